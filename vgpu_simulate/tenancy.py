"""Tenants, fault domains and users in a replay: what isolating some tenants' pods costs in
packing (docs/isolation.md#what-fault-domains-cost), and what MPS's one user per GPU costs
(docs/isolation.md#what-one-user-per-gpu-costs).

The trace has no namespaces. With ``tenants`` above 1 each arriving pod is given one of that
many namespaces, and with ``isolated`` above 0 that share of the pods says
``vgpu.io/fault-domain: namespace``: it shares no fault domain with another namespace's
pods, on GPUs whose mode is one fault domain (the nodes report ``mode``; ``mps`` is the
case that matters). Both draws come from their own generator seeded by the replay's seed,
so the arrival order, and with it every other figure, stays the artifact's.

With ``users`` each pod runs as one of that many uids (``runAsUser``, from a generator of its
own); 0 gives no pod a uid, so on an MPS GPU each is a user of its own. The default, 1, puts
every pod under one uid: MPS then keeps nobody apart, and the replay is the one before users.
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass

from vgpu import fault_domains
from vgpu.errors import ConfigError
from vgpu.isolation_modes import MODES, UNKNOWN
from vgpu_simulate.trace import TracePod

#: The nodes' mode when nothing says: what the bundled trace's nodes reported so far.
DEFAULT_MODE = UNKNOWN
NAMESPACE = "default"
#: The first uid of ``users``; the others follow it.
FIRST_UID = 1000


@dataclass(frozen=True)
class Tenancy:
    tenants: int = 1
    isolated: float = 0.0
    mode: str = DEFAULT_MODE
    users: int = 1

    @classmethod
    def of(cls, args: argparse.Namespace) -> Tenancy:
        return cls(args.tenants, args.fault_domain_isolated, args.isolation or DEFAULT_MODE,
                   args.users)

    def __post_init__(self) -> None:
        if self.users < 0:
            raise ConfigError(f"--users {self.users}: must be 0 or more")
        if self.tenants < 1:
            raise ConfigError(f"--tenants {self.tenants}: must be at least 1")
        if not 0.0 <= self.isolated <= 1.0:
            raise ConfigError(f"--fault-domain-isolated {self.isolated}: must be 0 to 1")
        if self.mode not in (*MODES, UNKNOWN):
            raise ConfigError(f"--isolation {self.mode!r}: one of {', '.join(MODES)}")

    def assign(self, pods: tuple[TracePod, ...], seed: int) -> dict[str, tuple[str, bool]]:
        """Per pod name, its namespace and whether it keeps to it."""
        rng = random.Random(f"tenancy-{seed}")
        out: dict[str, tuple[str, bool]] = {}
        for pod in pods:
            tenant = rng.randrange(self.tenants)
            isolated = rng.random() < self.isolated
            namespace = NAMESPACE if self.tenants == 1 else f"tenant-{tenant}"
            out[pod.name] = (namespace, isolated)
        return out

    def uids(self, pods: tuple[TracePod, ...], seed: int) -> dict[str, int | None]:
        """Per pod name, the uid it runs as (None: it states none)."""
        if self.users == 0:
            return dict.fromkeys((p.name for p in pods), None)
        rng = random.Random(f"users-{seed}")
        return {p.name: FIRST_UID + rng.randrange(self.users) for p in pods}

    @staticmethod
    def annotations(isolated: bool) -> dict[str, str]:
        return {fault_domains.ANNOTATION: fault_domains.NAMESPACE} if isolated else {}


def tenancy_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tenants", type=int, default=1, metavar="N",
                        help="spread the pods over N namespaces at random (default 1: all "
                             "in one)")
    parser.add_argument("--fault-domain-isolated", type=float, default=0.0, metavar="SHARE",
                        help="this share of the pods (0 to 1) says vgpu.io/fault-domain: "
                             "namespace, sharing no fault domain with other namespaces' "
                             "pods (default 0)")
    parser.add_argument("--isolation", default=None, metavar="MODE",
                        help="the isolation mode every node's GPUs report (none, hami-core, "
                             "mps, mps-hami-core; default: unknown, as the trace's nodes "
                             "have no agent)")
    parser.add_argument("--users", type=int, default=1, metavar="N",
                        help="each pod runs as one of N uids at random (runAsUser); on MPS "
                             "GPUs only pods of one uid share a GPU; 0: no pod states one, "
                             "so each is a user of its own (default 1: one uid)")


def tenancy_line(args: argparse.Namespace) -> str | None:
    """What the replay's tenancy is, for the lines above the table; None: the default."""
    if args.tenants <= 1 and not args.isolation and args.users == 1:
        return None
    users = "no pod states a uid" if args.users == 0 else f"{args.users} uid(s)"
    return (f"tenants: {args.tenants} namespaces, {args.fault_domain_isolated:.0%} of the "
            f"pods keep to their namespace's fault domain, {users}, nodes in "
            f"{args.isolation or DEFAULT_MODE}")

"""Tenants and fault domains in a replay: what isolating some tenants' pods costs in packing
(docs/isolation.md#what-fault-domains-cost).

The trace has no namespaces. With ``tenants`` above 1 each arriving pod is given one of that
many namespaces, and with ``isolated`` above 0 that share of the pods says
``vgpu.io/fault-domain: namespace``: it shares no fault domain with another namespace's
pods, on GPUs whose mode is one fault domain (the nodes report ``mode``; ``mps`` is the
case that matters). Both draws come from their own generator seeded by the replay's seed,
so the arrival order, and with it every other figure, stays the artifact's.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from vgpu import fault_domains
from vgpu.errors import ConfigError
from vgpu.isolation_modes import MODES, UNKNOWN
from vgpu_simulate.trace import TracePod

#: The nodes' mode when nothing says: what the bundled trace's nodes reported so far.
DEFAULT_MODE = UNKNOWN
NAMESPACE = "default"


@dataclass(frozen=True)
class Tenancy:
    tenants: int = 1
    isolated: float = 0.0
    mode: str = DEFAULT_MODE

    def __post_init__(self) -> None:
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

    @staticmethod
    def annotations(isolated: bool) -> dict[str, str]:
        return {fault_domains.ANNOTATION: fault_domains.NAMESPACE} if isolated else {}

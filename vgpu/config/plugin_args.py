"""Settings of single scheduler plugins, as kube-scheduler's plugin args
(``InterPodAffinityArgs``, ``NodeResourcesFitArgs``, ``PodTopologySpreadArgs``) with its
defaults and validation."""

from __future__ import annotations

from dataclasses import dataclass

from vgpu.config.knobs import knob
from vgpu.errors import ConfigError
from vgpu.labels import valid_key

SYSTEM = "System"
LIST = "List"
WHEN_UNSATISFIABLE = ("DoNotSchedule", "ScheduleAnyway")


@dataclass(frozen=True)
class DefaultConstraint:
    """A cluster default topology spread constraint; its selector comes from the
    Services, ReplicaSets, ReplicationControllers and StatefulSets selecting each pod."""

    topology_key: str
    max_skew: int
    when_unsatisfiable: str


#: kube-scheduler's ``systemDefaultConstraints``.
SYSTEM_DEFAULT_CONSTRAINTS = (
    DefaultConstraint("kubernetes.io/hostname", 3, "ScheduleAnyway"),
    DefaultConstraint("topology.kubernetes.io/zone", 5, "ScheduleAnyway"),
)

_WHERE = "scheduler.podTopologySpread.defaultConstraints"


def parse_default_constraint(text: str) -> DefaultConstraint:
    """``topologyKey:maxSkew:whenUnsatisfiable``, e.g. ``topology.kubernetes.io/zone:1:
    DoNotSchedule`` (a label key has no colon, and the list splits on commas)."""
    parts = [part.strip() for part in text.split(":")]
    if len(parts) != 3:
        raise ConfigError(f"{_WHERE}: {text!r} is not topologyKey:maxSkew:whenUnsatisfiable")
    key, skew, when = parts
    if not valid_key(key):
        raise ConfigError(f"{_WHERE}: {text!r}: {key!r} is not a label key")
    if not skew.isdigit() or int(skew) < 1:
        raise ConfigError(f"{_WHERE}: {text!r}: maxSkew {skew!r} must be an integer of at "
                          "least 1")
    if when not in WHEN_UNSATISFIABLE:
        raise ConfigError(f"{_WHERE}: {text!r}: whenUnsatisfiable {when!r} is not one of "
                          f"{', '.join(WHEN_UNSATISFIABLE)}")
    return DefaultConstraint(key, int(skew), when)


@dataclass(frozen=True)
class InterPodAffinityArgs:
    hard_pod_affinity_weight: int = knob(
        1, "score weight of an existing pod's required affinity term that the incoming pod "
        "matches (kube-scheduler's hardPodAffinityWeight)", lo=0, hi=100)
    ignore_preferred_terms_of_existing_pods: bool = knob(
        False, "skip scoring by existing pods' terms when the incoming pod has no preferred "
        "(anti-)affinity of its own")


@dataclass(frozen=True)
class NodeResourcesFitArgs:
    ignored_resources: tuple[str, ...] = knob(
        (), "extended resources NodeResourcesFit does not check (kube-scheduler's "
        "ignoredResources), e.g. example.com/fpga; the names vgpu owns are never checked")
    ignored_resource_groups: tuple[str, ...] = knob(
        (), "domains whose extended resources NodeResourcesFit does not check "
        "(kube-scheduler's ignoredResourceGroups), e.g. example.com")

    def __post_init__(self) -> None:
        # kube-scheduler's ValidateNodeResourcesFitArgs: qualified names, and groups
        # without a '/'.
        where = "scheduler.nodeResourcesFit"
        for name in self.ignored_resources:
            if not valid_key(name):
                raise ConfigError(f"{where}.ignoredResources: {name!r} is not a resource name")
        for group in self.ignored_resource_groups:
            if "/" in group or not valid_key(group):
                raise ConfigError(f"{where}.ignoredResourceGroups: {group!r} is not a "
                                  "resource group (a domain, without '/')")


@dataclass(frozen=True)
class PodTopologySpreadArgs:
    defaulting_type: str = knob(
        SYSTEM, "System: kube-scheduler's default constraints (hostname maxSkew 3 and zone "
        "maxSkew 5, ScheduleAnyway); List: defaultConstraints", choices=(SYSTEM, LIST))
    default_constraints: tuple[str, ...] = knob(
        (), "with defaultingType List, the constraints of pods that set none, as "
        "topologyKey:maxSkew:whenUnsatisfiable; they apply to a pod only when Services, "
        "ReplicaSets, ReplicationControllers or StatefulSets select it")

    def __post_init__(self) -> None:
        if self.defaulting_type not in (SYSTEM, LIST):
            raise ConfigError(f"scheduler.podTopologySpread.defaultingType: "
                              f"{self.defaulting_type!r} is not System or List")
        if self.defaulting_type == SYSTEM and self.default_constraints:
            raise ConfigError(f"{_WHERE}: must be empty when defaultingType is System")
        seen: set[tuple[str, str]] = set()
        for constraint in map(parse_default_constraint, self.default_constraints):
            pair = (constraint.topology_key, constraint.when_unsatisfiable)
            if pair in seen:
                raise ConfigError(f"{_WHERE}: two constraints for {pair[0]!r} and {pair[1]}")
            seen.add(pair)

    def constraints(self) -> tuple[DefaultConstraint, ...]:
        if self.defaulting_type == SYSTEM:
            return SYSTEM_DEFAULT_CONSTRAINTS
        return tuple(map(parse_default_constraint, self.default_constraints))


@dataclass(frozen=True)
class NodeReservationArgs:
    wait_seconds: float = knob(
        600.0, "how long a pod asking only for whole GPUs waits (since its creation) before "
        "a node is held for it as it empties", lo=0)
    hold_seconds: float = knob(
        1800.0, "how long a node stays held for one pod; the pod then goes as long without "
        "a hold before it may hold one again", lo=1)
    min_gpus: int = knob(
        2, "the fewest whole GPUs a pod must ask for to get a node held", lo=1, hi=64)
    max_gpu_share: float = knob(
        0.1, "the share of the cluster's GPUs that held nodes may have together (each held "
        "node counts whole); 0 holds none", lo=0, hi=1)


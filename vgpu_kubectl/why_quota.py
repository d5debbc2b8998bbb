"""A pod that a namespace's ResourceQuota refused, explained: the part of ``vgpu why``
about quota.

A refused pod never exists, so nothing of vgpu's records it. Its owner does: a
ReplicaSet, Job or StatefulSet records ``FailedCreate`` with the API server's message,

    Error creating: pods "web-7d9f-x2k4q" is forbidden: exceeded quota: gpu,
    requested: requests.vgpu.io/memory-mib=4k, used: requests.vgpu.io/memory-mib=8k,
    limited: requests.vgpu.io/memory-mib=10k

which is Kubernetes' own quota admission speaking (a bare pod's creator gets the same
text, after ``is forbidden:``, as the error of its request). :func:`find` picks the
refusals that concern a name (the refused pod's, or its owner's, or a Deployment's whose
ReplicaSets are named after it); :func:`parse` reads the message; :func:`explain` says it
in plain words, per resource: asked, in use, allowed, left.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vgpu import meta, quota_charge
from vgpu.errors import QuantityError
from vgpu.quantity import parse_whole

FAILED_CREATE = "FailedCreate"
_EXCEEDED = re.compile(r"exceeded quota: (?P<quota>[^,]+), requested: (?P<requested>\S*), "
                       r"used: (?P<used>\S*), limited: (?P<limited>\S*)")
_UNKNOWN = re.compile(r"status unknown for quota: (?P<quota>[^,]+)")
_POD = re.compile(r'pods "(?P<pod>[^"]+)" is forbidden')
#: How the plain words name what is counted; other resources keep their quota names.
_WORDS = {quota_charge.VGPUS: ("vGPUs", ""), quota_charge.MEMORY: ("GPU memory", " MiB"),
          quota_charge.CORES: ("GPU compute", "% of a GPU")}


@dataclass(frozen=True)
class Item:
    """One resource the refused pod would have taken past the quota."""

    resource: str
    requested: str
    used: str
    limited: str


@dataclass(frozen=True)
class Refusal:
    quota: str
    #: The refused pod's name as the message gives it ("" when it gives none).
    pod: str
    items: tuple[Item, ...]
    #: Who tried: the owner that recorded the event (``ReplicaSet web-7d9f``).
    owner: str = ""
    time: str = ""
    count: int = 1
    #: True for "status unknown for quota": the quota controller has not counted it yet.
    unknown: bool = False
    #: The owner's name alone (``web-7d9f``).
    owner_name: str = ""


def _pairs(text: str) -> dict[str, str]:
    out = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        if sep:
            out[name] = value
    return out


def parse(message: str) -> Refusal | None:
    """The quota refusal in an API server message; None when the message is another one."""
    pod = _POD.search(message)
    name = pod.group("pod") if pod else ""
    exceeded = _EXCEEDED.search(message)
    if exceeded is not None:
        requested, used, limited = (_pairs(exceeded.group(g))
                                    for g in ("requested", "used", "limited"))
        items = tuple(Item(r, requested[r], used.get(r, "?"), limited.get(r, "?"))
                      for r in requested)
        return Refusal(exceeded.group("quota").strip(), name, items)
    unknown = _UNKNOWN.search(message)
    if unknown is not None:
        return Refusal(unknown.group("quota").strip(), name, (), unknown=True)
    return None


def find(name: str, events: Sequence[Mapping[str, Any]]) -> list[Refusal]:
    """The quota refusals among a namespace's events that concern ``name``: the refused
    pod's own name, the owner that tried to create it, or a Deployment whose ReplicaSets
    (``<name>-<hash>``) did. Oldest first."""
    found = []
    for event in events:
        if event.get("reason") != FAILED_CREATE:
            continue
        refusal = parse(str(event.get("message") or ""))
        if refusal is None:
            continue
        involved = meta.mapping(event.get("involvedObject"))
        owner = str(involved.get("name") or "")
        if name not in (refusal.pod, owner) and not owner.startswith(f"{name}-"):
            continue
        when = str(event.get("lastTimestamp") or event.get("eventTime") or "")
        found.append(Refusal(refusal.quota, refusal.pod, refusal.items,
                             f"{involved.get('kind') or 'owner'} {owner}", when,
                             int(event.get("count") or 1), refusal.unknown, owner))
    found.sort(key=lambda r: r.time)
    return found


def _whole(text: str) -> int | None:
    try:
        return parse_whole(text)
    except QuantityError:
        return None


def explain_item(item: Item) -> str:
    """One resource in plain words: what the pod asked, what is in use, what is left."""
    resource = item.resource.removeprefix(quota_charge.QUOTA_PREFIX)
    what, unit = _WORDS.get(resource, (item.resource, ""))
    asked, used, limit = _whole(item.requested), _whole(item.used), _whole(item.limited)
    if asked is None or used is None or limit is None:
        return (f"{what}: asks for {item.requested}, {item.used} of {item.limited} in use "
                f"({item.resource})")
    left = max(0, limit - used)
    return (f"{what}: asks for {asked}{unit}, but {used} of the {limit}{unit} allowed are in "
            f"use, {left}{unit} left ({item.resource})")


def summary(refusal: Refusal, namespace: str, attempts: int = 1) -> str:
    """``attempts``: how often the owner was refused (its events' counts, summed)."""
    who = refusal.owner or "its creator"
    times = f" ({attempts} refused attempts so far)" if attempts > 1 else ""
    if refusal.unknown:
        return (f"does not exist: {who} could not create it{times}: ResourceQuota "
                f"{refusal.quota} in {namespace} has not been counted yet (is the "
                f"controller-manager's quota controller running?); Kubernetes refuses "
                f"every pod the quota covers until it is")
    return (f"does not exist: {who} could not create it{times}: it would exceed "
            f"ResourceQuota {refusal.quota} in {namespace}. The owner retries by itself; "
            f"it gets in once pods charged to the quota end (`kubectl vgpu inspect -d` "
            f"lists them), or when the pod asks for less or the quota is raised")


def attempts(refusal: Refusal, events: Sequence[Mapping[str, Any]]) -> int:
    """How often the refusal's owner was refused: Kubernetes keeps one event per message
    (each names another generated pod) and counts repeats in it."""
    if not refusal.owner_name:
        return refusal.count
    return sum(r.count for r in find(refusal.owner_name, events) if r.owner == refusal.owner)


def explain(refusal: Refusal) -> tuple[str, ...]:
    return tuple(explain_item(item) for item in refusal.items)

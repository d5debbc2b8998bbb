"""``isolation.mps.namespaceUsers``: the webhook runs a named namespace's GPU containers as
its uid, and refuses a pod whose GPU container states another (table-driven, through the
server's parse → decide → answer, the patch applied by a strict RFC 6902 applier)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.webhook.pods import admit, ctr, pod
from vgpu import mps_users
from vgpu.config import from_mapping
from vgpu.errors import ConfigError
from vgpu.requests import parse_pod

GPU = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000", "nvidia.com/gpucores": "30"}
CONFIG = from_mapping({"isolation": {"mps": {"namespaceUsers": ["team-a=1000", "team-b=0"]},
                                     "mode": "mps"}, "quota": {"derivedRequests": False}})


def with_user(container: dict[str, Any], uid: Any) -> dict[str, Any]:
    return {**container, "securityContext": {"runAsUser": uid}}


def pod_user(obj: dict[str, Any], uid: int) -> dict[str, Any]:
    obj["spec"]["securityContext"] = {"runAsUser": uid}
    return obj


CASES: list[tuple[str, dict[str, Any], dict[str, int | None] | str]] = [
    ("no uid stated: the GPU container gets the namespace's", pod(ctr("c", GPU)),
     {"c": 1000}),
    ("only GPU containers get it", pod(ctr("c", GPU), ctr("sidecar", {"cpu": "1"})),
     {"c": 1000, "sidecar": None}),
    ("its securityContext kept, runAsUser added",
     pod({**ctr("c", GPU), "securityContext": {"privileged": False}}), {"c": 1000}),
    ("already the namespace's, on the container", pod(with_user(ctr("c", GPU), 1000)),
     {"c": 1000}),
    ("already the namespace's, on the pod", pod_user(pod(ctr("c", GPU)), 1000), {"c": 1000}),
    ("uid 0 named for a namespace", pod(ctr("c", GPU), namespace="team-b"), {"c": 0}),
    ("a namespace the option does not name", pod(ctr("c", GPU), namespace="team-c"),
     {"c": None}),
    ("another uid on the container",
     pod(with_user(ctr("c", GPU), 2000)), "container c: runAsUser 2000 (its securityContext) "
     "but namespace team-a runs its GPU containers as uid 1000"),
    ("another uid on the pod", pod_user(pod(ctr("c", GPU)), 0),
     "container c: runAsUser 0 (the pod's securityContext)"),
    ("the container's own uid wins over the pod's, and is the namespace's",
     pod_user(pod(with_user(ctr("c", GPU), 1000)), 0), {"c": 1000}),
    ("a GPU init container too", pod(ctr("c", GPU), init=(ctr("warm", GPU),)),
     {"c": 1000, "warm": 1000}),
]


@pytest.mark.parametrize(("obj", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_one_uid_per_namespace(obj: dict[str, Any], want: dict[str, int | None] | str) -> None:
    original = copy.deepcopy(obj)
    response, patched = admit(obj, config=CONFIG, namespace=obj["metadata"]["namespace"])
    assert obj == original
    if isinstance(want, str):
        assert response["allowed"] is False and want in response["status"]["message"]
        return
    assert response["allowed"] is True
    every = [*patched["spec"].get("initContainers", []), *patched["spec"]["containers"]]
    got = {c["name"]: mps_users.effective(patched, {c["name"]}, "p").uid for c in every}
    assert got == want
    # The scheduler reads the patched pod as the webhook meant it.
    gpu = {c.name for c in parse_pod(patched, CONFIG).containers if c.count}
    assert mps_users.effective(patched, gpu, "p").uid == next(iter(
        {v for k, v in want.items() if k in gpu}), None)
    # A second pass (reinvocationPolicy: IfNeeded) leaves the uids alone.
    again, twice = admit(patched, config=CONFIG, namespace=obj["metadata"]["namespace"])
    assert again["allowed"] is True
    assert [c.get("securityContext") for c in twice["spec"]["containers"]] == \
        [c.get("securityContext") for c in patched["spec"]["containers"]]


@pytest.mark.parametrize(("entry", "message"), [
    ("team-a", "is not <namespace>=<uid>"),
    ("team-a=root", "is not <namespace>=<uid>"),
    ("team-a=-1", "is not <namespace>=<uid>"),
    ("=1000", "is not <namespace>=<uid>"),
    ("team-a=4294967295", "is above 2147483647"),
])
def test_bad_entries_are_config_errors(entry: str, message: str) -> None:
    with pytest.raises(ConfigError, match=f"isolation.mps.namespaceUsers: .*{message}"):
        from_mapping({"isolation": {"mps": {"namespaceUsers": [entry]}}})
    with pytest.raises(ConfigError, match="named twice"):
        from_mapping({"isolation": {"mps": {"namespaceUsers": ["a=1", "a=2"]}}})

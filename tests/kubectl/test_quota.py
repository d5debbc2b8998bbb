"""The GPU quota view of ``vgpu inspect`` and the quota refusal of ``vgpu why``, built from
API objects alone (vgpu_kubectl/quota.py, vgpu_kubectl/why_quota.py)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from vgpu import cli
from vgpu.cluster.memory import MemoryCluster
from vgpu.config import Config
from vgpu.quota_charge import CORES, MEMORY, VGPUS, Charge
from vgpu_kubectl import inspect_cli, inspect_quota, why_quota
from vgpu_kubectl.why import Cluster, build
from vgpu_kubectl.why_render import render_json, render_text

NOW = dt.datetime(2026, 11, 23, 10, 0, 0, tzinfo=dt.UTC)
REFUSED = ('Error creating: pods "web-7d9f-x2k4q" is forbidden: exceeded quota: gpu, '
           'requested: requests.vgpu.io/memory-mib=4k,requests.vgpu.io/vgpus=1, '
           'used: requests.vgpu.io/memory-mib=8k,requests.vgpu.io/vgpus=2, '
           'limited: requests.vgpu.io/memory-mib=10k,requests.vgpu.io/vgpus=4')


def gpu_pod(name: str, mib: int, *, ns: str = "team-a", vgpus: int = 1, cores: int = 0,
            phase: str = "Running", spec: dict[str, Any] | None = None) -> dict[str, Any]:
    derived = {VGPUS: str(vgpus), MEMORY: str(mib), CORES: str(cores)}
    return {"metadata": {"name": name, "namespace": ns},
            "spec": {"containers": [{"name": "c", "resources": {
                "limits": {"nvidia.com/gpu": str(vgpus), **derived},
                "requests": dict(derived)}}], **(spec or {})},
            "status": {"phase": phase}}


def resource_quota(name: str, hard: dict[str, str], used: dict[str, str] | None = None, *,
                   ns: str = "team-a", **spec: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": {"name": name, "namespace": ns},
                           "spec": {"hard": hard, **spec}}
    if used is not None:
        obj["status"] = {"hard": hard, "used": used}
    return obj


def event(message: str, owner: str, *, kind: str = "ReplicaSet", reason: str = "FailedCreate",
          when: str = "2026-11-23T09:59:00Z", count: int = 3) -> dict[str, Any]:
    return {"metadata": {"name": f"{owner}.1", "namespace": "team-a"},
            "involvedObject": {"kind": kind, "name": owner, "namespace": "team-a"},
            "reason": reason, "message": message, "type": "Warning", "count": count,
            "lastTimestamp": when}


# --- the refusal ------------------------------------------------------------------------

def test_kubernetes_message_is_read() -> None:
    refusal = why_quota.parse(REFUSED)
    assert refusal is not None
    assert (refusal.quota, refusal.pod, refusal.unknown) == ("gpu", "web-7d9f-x2k4q", False)
    assert refusal.items == (
        why_quota.Item("requests.vgpu.io/memory-mib", "4k", "8k", "10k"),
        why_quota.Item("requests.vgpu.io/vgpus", "1", "2", "4"))


@pytest.mark.parametrize(("message", "quota_name", "unknown"), [
    ('pods "p" is forbidden: status unknown for quota: gpu, resources: '
     'requests.vgpu.io/memory-mib', "gpu", True),
    ('pods "p" is forbidden: exceeded quota: q, requested: requests.cpu=1, used: '
     'requests.cpu=2, limited: requests.cpu=2', "q", False),
    ("pods \"p\" is forbidden: error looking up service account x/default", None, False),
    ("admission webhook denied the request", None, False),
])
def test_other_messages(message: str, quota_name: str | None, unknown: bool) -> None:
    refusal = why_quota.parse(message)
    assert (refusal.quota if refusal else None) == quota_name
    assert (refusal.unknown if refusal else False) == unknown


@pytest.mark.parametrize(("name", "found"), [
    ("web-7d9f-x2k4q", True),   # the refused pod, as the message names it
    ("web-7d9f", True),         # its ReplicaSet
    ("web", True),              # the Deployment whose ReplicaSets are web-<hash>
    ("we", False),
    ("other", False),
])
def test_refusals_are_found_by_pod_owner_or_deployment(name: str, found: bool) -> None:
    events = [event(REFUSED, "web-7d9f"),
              event(REFUSED, "web-7d9f", reason="SuccessfulCreate"),
              event("Error creating: something else", "web-7d9f")]
    got = why_quota.find(name, events)
    assert bool(got) == found
    if found:
        assert (got[0].owner, got[0].count) == ("ReplicaSet web-7d9f", 3)


def test_plain_words() -> None:
    refusal = why_quota.parse(REFUSED)
    assert refusal is not None
    assert why_quota.explain(refusal) == (
        "GPU memory: asks for 4000 MiB, but 8000 of the 10000 MiB allowed are in use, "
        "2000 MiB left (requests.vgpu.io/memory-mib)",
        "vGPUs: asks for 1, but 2 of the 4 allowed are in use, 2 left "
        "(requests.vgpu.io/vgpus)")
    other = why_quota.explain_item(why_quota.Item("requests.cpu", "1", "2", "2"))
    assert other.startswith("requests.cpu: asks for 1, but 2 of the 2 allowed")
    odd = why_quota.explain_item(why_quota.Item("requests.vgpu.io/cores", "x", "?", "?"))
    assert odd == "GPU compute: asks for x, ? of ? in use (requests.vgpu.io/cores)"


def test_why_reports_a_quota_refusal() -> None:
    # Kubernetes keeps one event per message (each names another generated pod).
    again = event(REFUSED.replace("x2k4q", "p9z2m"), "web-7d9f", when="2026-11-23T09:58:00Z",
                  count=2)
    seen = Cluster(None, [], namespace_events=[event(REFUSED, "web-7d9f"), again])
    report = build("team-a", "web-7d9f-x2k4q", seen, config=Config(), now=NOW)
    assert report.state == "quota-refused"
    assert "ReplicaSet web-7d9f could not create it (5 refused attempts so far)" in \
        report.summary
    assert "exceed ResourceQuota gpu in team-a" in report.summary
    text = render_text(report)
    assert "Quota:" in text and "2000 MiB left" in text
    assert json.loads(render_json(report))["quota"][0].startswith("GPU memory")
    # By the Deployment's name too; an unrelated name finds nothing.
    assert build("team-a", "web", seen, config=Config(), now=NOW).state == "quota-refused"
    assert build("team-a", "db", seen, config=Config(), now=NOW).state == "not-found"


def test_a_later_webhook_denial_wins() -> None:
    denial = {**event("denied: privileged", "web-7d9f-x2k4q", kind="Pod",
                      reason="FailedAdmission", when="2026-11-23T09:59:30Z")}
    seen = Cluster(None, [denial], namespace_events=[event(REFUSED, "web-7d9f")])
    assert build("team-a", "web-7d9f-x2k4q", seen, config=Config(), now=NOW).state == "denied"


# --- the view -----------------------------------------------------------------------------

def test_quota_rows() -> None:
    quotas = [
        resource_quota("gpu", {"requests.vgpu.io/memory-mib": "10k",
                               "requests.vgpu.io/vgpus": "4", "requests.cpu": "8"},
                       {"requests.vgpu.io/memory-mib": "8k", "requests.vgpu.io/vgpus": "2"}),
        resource_quota("cpu-only", {"requests.cpu": "8"}),
        resource_quota("fresh", {"requests.vgpu.io/cores": "200"}, ns="team-b"),
    ]
    pods = [gpu_pod("a", 4000), gpu_pod("b", 4000, phase="Pending"),
            gpu_pod("done", 4000, phase="Succeeded"), gpu_pod("other-ns", 100, ns="team-b"),
            {"metadata": {"name": "cpu", "namespace": "team-a"},
             "spec": {"containers": [{"name": "c"}]}}]
    rows, warnings = inspect_quota.build(quotas, pods)
    assert warnings == ()
    assert [(r.namespace, r.name) for r in rows] == [("team-a", "gpu"), ("team-b", "fresh")]
    gpu = rows[0]
    assert gpu.lines == (inspect_quota.QuotaLine(VGPUS, 4, 2),
                         inspect_quota.QuotaLine(MEMORY, 10000, 8000))
    assert [p.name for p in gpu.pods] == ["a", "b"]
    assert gpu.charged == Charge(2, 8000, 0)
    assert rows[1].lines == (inspect_quota.QuotaLine(CORES, 200, None),)
    lines = inspect_quota.render_lines(rows, details=True)
    assert lines[0].split() == ["NAMESPACE", "QUOTA", "RESOURCE", "USED/HARD", "PODS", "SCOPES"]
    assert lines[1].split() == ["team-a", "gpu", "vGPUs", "2/4", "2"]
    assert "team-a/b  vgpus=1  memory=4000MiB  cores=0%  (Pending)" in "\n".join(lines)
    assert lines[-2].split() == ["team-b", "fresh", "GPU", "cores", "%", "?/200", "1"]
    body = inspect_quota.to_json(rows)
    assert body[0]["resources"][MEMORY] == {"hard": 10000, "used": 8000}
    assert body[0]["pods"][0] == {"namespace": "team-a", "name": "a", "phase": "Running",
                                  VGPUS: 1, MEMORY: 4000, CORES: 0}


HIGH = {"priorityClassName": "gpu-high"}
LOW = {"priorityClassName": "gpu-low"}
TERMINATING = {"activeDeadlineSeconds": 600}


@pytest.mark.parametrize(("scopes", "charged"), [
    ({"scopeSelector": {"matchExpressions": [
        {"scopeName": "PriorityClass", "operator": "In", "values": ["gpu-low"]}]}}, ["low"]),
    ({"scopeSelector": {"matchExpressions": [
        {"scopeName": "PriorityClass", "operator": "NotIn", "values": ["gpu-low"]}]}},
     ["high", "none", "term"]),
    ({"scopeSelector": {"matchExpressions": [
        {"scopeName": "PriorityClass", "operator": "DoesNotExist"}]}}, ["none", "term"]),
    ({"scopes": ["PriorityClass"]}, ["high", "low"]),
    ({"scopes": ["Terminating"]}, ["term"]),
    ({"scopes": ["NotTerminating", "BestEffort"]}, ["high", "low", "none"]),
    ({"scopes": ["NotBestEffort"]}, []),
])
def test_scopes_pick_the_pods_charged(scopes: dict[str, Any], charged: list[str]) -> None:
    pods = [gpu_pod("high", 1, spec=HIGH), gpu_pod("low", 2, spec=LOW), gpu_pod("none", 3),
            gpu_pod("term", 4, spec=TERMINATING)]
    rows, _ = inspect_quota.build([resource_quota("q", {"requests.vgpu.io/vgpus": "9"}, **scopes)],
                          pods)
    assert [p.name for p in rows[0].pods] == charged


def test_unreadable_quotas_and_scopes_are_warnings() -> None:
    rows, warnings = inspect_quota.build(
        [resource_quota("bad", {"requests.vgpu.io/vgpus": "1.5"}),
         resource_quota("odd", {"requests.vgpu.io/vgpus": "2"}, scopes=["Unknown"])],
        [gpu_pod("a", 1)])
    assert [r.name for r in rows] == ["odd"] and rows[0].pods == ()
    assert "1.5" in warnings[0] and "scope" in warnings[1]


def test_inspect_shows_the_quotas(monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    cluster = MemoryCluster()
    cluster.create("resourcequotas", resource_quota(
        "gpu", {"requests.vgpu.io/memory-mib": "10k"}, {"requests.vgpu.io/memory-mib": "4k"}))
    cluster.create("pods", gpu_pod("a", 4000))
    rows, _ = inspect_cli.collect_quotas(cluster)
    assert rows[0].charged == Charge(1, 4000, 0)

    from vgpu.kube import adapter
    monkeypatch.setattr(adapter, "connect", lambda *_, **__: cluster)
    assert cli.main(["inspect", "-d"]) == 0
    out = capsys.readouterr().out
    assert "GPU quotas:" in out and "team-a/a  vgpus=1  memory=4000MiB" in out
    assert cli.main(["inspect", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["quotas"][0]["name"] == "gpu"


def test_a_user_who_may_not_list_quotas_still_gets_the_gpu_report(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from vgpu.errors import ClusterError
    from vgpu.kube import adapter

    class NoQuotas(MemoryCluster):
        def list(self, kind: Any, selector: Any = None) -> Any:
            if kind == "resourcequotas":
                raise ClusterError("list resourcequotas: forbidden (HTTP 403)")
            return super().list(kind) if selector is None else super().list(kind, selector)

    cluster = NoQuotas()
    monkeypatch.setattr(adapter, "connect", lambda *_, **__: cluster)
    assert cli.main(["inspect"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("NODE") and "WARNING cannot list ResourceQuotas: list " \
        "resourcequotas: forbidden" in out

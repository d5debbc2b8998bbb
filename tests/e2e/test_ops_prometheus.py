"""The dashboards against a real Prometheus scraping the running components.

The whole of vgpu runs as processes (tests/e2e/harness.py): `vgpu webhook`, `vgpu
scheduler` and a `vgpu nodeagent` on the fake-gpus overlay's GPUs, next to a kubelet
stand-in, against this e2e API server. One GPU pod is placed and allocated and one waits
for a GPU type nobody has, so every family has series; a ResourceQuota on the derived
names, counted by the quota controller (kube-controller-manager running it alone), feeds
the quota row through a stand-in for kube-state-metrics' ``kube_resourcequota``
(tests/e2e/kube_state_metrics.py). Debian's Prometheus scrapes the four /metrics every
second, the components' as a Prometheus in a cluster does: over HTTPS, trusting the CA of
their certificate, with the token of a ServiceAccount allowed ``get`` on ``/metrics`` (the
components ask the API server: TokenReview, SubjectAccessReview). Every PromQL expression
of every dashboard panel and variable is then evaluated and must return data; a query
naming a metric no component exports returns none, and fails the same check.
"""

from __future__ import annotations

import json
import re
import ssl
import subprocess
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.controlplane.cluster import ControlPlane
from tests.controlplane.kube_controllers import KubeControllers
from tests.e2e.harness import FullStack, Gpu, NodeSpec, OpsAccess, free_port, wait_until
from tests.e2e.kube_state_metrics import QuotaExporter
from tests.e2e.ops_support import MANIFESTS, ROOT, metrics_reader_token
from tests.webhook import certs
from vgpu import latency, quota_charge

DASHBOARDS = MANIFESTS / "dashboards"
# What Grafana puts in for its variables; a 1 s scrape interval makes 10 s rate windows.
GRAFANA = {"$__rate_interval": "10s", "$node": ".*", "$gpu": ".*"}
RUNNING = ("webhook", "scheduler", "nodeagent", "kube-state-metrics")


def queries() -> list[tuple[str, str]]:
    """(id, PromQL) for every panel target and query variable of every dashboard."""
    out = []
    for path in sorted(DASHBOARDS.glob("*.json")):
        board = json.loads(path.read_text())
        for panel in board["panels"]:
            for t in panel.get("targets", []):  # a row has none
                out.append((f"{path.stem}: {panel['title']} [{t['refId']}]", t["expr"]))
        for var in board["templating"]["list"]:
            if var["type"] == "query":
                match = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", var["definition"])
                assert match, var["definition"]
                selector, label = match.groups()
                # label_values(selector, label) needs series of the selector with the label.
                out.append((f"{path.stem}: variable {var['name']}",
                            f"count by ({label}) ({selector})"))
    return out


def for_prometheus(expr: str) -> str:
    for var, value in GRAFANA.items():
        expr = expr.replace(var, value)
    return expr


class Prometheus:
    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}"
        #: What each component's /metrics answered a caller with no token.
        self.refused: dict[str, int] = {}

    def query(self, expr: str) -> list[dict[str, Any]]:
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=10) as resp:
            answer = json.load(resp)
        assert answer["status"] == "success", answer
        result: list[dict[str, Any]] = answer["data"]["result"]
        return result

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False


def gpus_of_the_fake_overlay() -> tuple[Gpu, ...]:
    """The GPUs the fake-gpus overlay gives every node, usage figures included."""
    devices = yaml.safe_load((MANIFESTS / "overlays" / "fake-gpus" / "devices.yaml")
                             .read_text())["devices"]
    return tuple(Gpu(d["model"], d["memory_mib"], d.get("numa", 0), d.get("memory_used_mib"),
                     d.get("utilization")) for d in devices)


def gpu_pod(name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "annotations": annotations or {}},
            "spec": {"containers": [{"name": "main", "image": "busybox", "resources": {
                "limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4096",
                           "nvidia.com/gpucores": "30"}}}]}}


def ops_access(control_plane: ControlPlane, folder: Path) -> OpsAccess:
    """A CA, the components' serving certificate from it, and a reader's token."""
    ca = certs.authority()
    ca_file = ca.write(folder / "ca.crt")
    certs.serving(ca, folder / "tls.crt", folder / "tls.key")
    namespace = f"prom-reader-{uuid.uuid4().hex[:6]}"
    control_plane.ensure_namespace(namespace)
    token = metrics_reader_token(control_plane, namespace, "prometheus")
    return OpsAccess(folder / "tls.crt", folder / "tls.key", ca_file, token)


@pytest.fixture(scope="module")
def prometheus(control_plane: ControlPlane,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    bin_dir = Path(subprocess.run(["bash", str(ROOT / "tests" / "e2e" / "prometheus.sh")],
                                  capture_output=True, text=True, check=True,
                                  timeout=300).stdout.strip().splitlines()[-1])
    access = ops_access(control_plane, tmp_path_factory.mktemp("prom-tls"))
    with KubeControllers(control_plane, ("resourcequota",)), \
            FullStack(control_plane, [NodeSpec("prom", gpus_of_the_fake_overlay())],
                      agent_metrics=True, ops_access=access) as stack, \
            QuotaExporter(stack.cluster) as quotas:
        (node,) = stack.nodes.values()
        namespace = stack.namespace(f"prom-{stack.tag}")
        stack.create_pod(namespace, gpu_pod("job"))
        stack.create_pod(namespace, gpu_pod("waits", {"nvidia.com/use-gputype": "H100"}))
        stack.wait_allocated(namespace, "job")
        stack.create(f"/api/v1/namespaces/{namespace}/resourcequotas", {
            "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu"},
            "spec": {"hard": {f"requests.{name}": "100000" for name in quota_charge.NAMES}}})

        prom_port = free_port()
        (stack.workdir / "reader.token").write_text(access.token)
        # As a Prometheus in the cluster: HTTPS, the CA, a token allowed get /metrics.
        secure = {"scheme": "https",
                  "tls_config": {"ca_file": str(access.ca_file), "server_name": "localhost"},
                  "authorization": {"credentials_file": str(stack.workdir / "reader.token")}}
        scrape: dict[str, Any] = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [
                {"job_name": "webhook", **secure, "static_configs": [
                    {"targets": [f"127.0.0.1:{stack.webhook_metrics_port}"]}]},
                {"job_name": "scheduler", **secure, "static_configs": [
                    {"targets": [f"127.0.0.1:{stack.scheduler_metrics_port}"]}]},
                # As the prometheus-operator overlay's PodMonitor: the workload's namespace,
                # pod and container labels win, and the series carry their node.
                {"job_name": "nodeagent", "honor_labels": True, **secure,
                 "static_configs": [{"targets": [f"127.0.0.1:{node.metrics_port}"],
                                     "labels": {"node": node.name}}]},
                {"job_name": "kube-state-metrics", "honor_labels": True, "static_configs": [
                    {"targets": [f"127.0.0.1:{quotas.port}"]}]},
            ]}
        (stack.workdir / "prometheus.yml").write_text(yaml.safe_dump(scrape))
        stack.procs.start("prometheus", [
            str(bin_dir / "prometheus"), f"--config.file={stack.workdir / 'prometheus.yml'}",
            f"--storage.tsdb.path={stack.workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{prom_port}"])
        prom = Prometheus(prom_port)
        wait_until("prometheus ready", prom.ready, 60, context=stack.logs)

        def scraped() -> bool:
            result = prom.query("count_over_time(up[1m]) >= 4 and up == 1")
            return {r["metric"]["job"] for r in result} == set(RUNNING)

        wait_until("every component scraped 4 times", scraped, 90, interval=0.25,
                   context=stack.logs)
        # The agent's grant shows once its pod watch has the pod; the waiting pod once
        # the scheduler found no GPU for it.
        wait_until("the agent reports the pod's grant",
                   lambda: prom.query("vgpu_container_memory_granted_bytes"), 30,
                   interval=0.25, context=stack.logs)
        wait_until("the quota controller counted the pods",
                   lambda: prom.query('kube_resourcequota{type="used"} > 0'), 30,
                   interval=0.25, context=stack.logs)
        wait_until("the scheduler reports a pending pod",
                   lambda: prom.query("sum(vgpu_scheduler_pending_pods) > 0"), 30,
                   interval=0.25, context=stack.logs)
        context = ssl.create_default_context(cafile=str(access.ca_file))
        context.check_hostname = False
        for job, port in (("webhook", stack.webhook_metrics_port),
                          ("scheduler", stack.scheduler_metrics_port),
                          ("nodeagent", node.metrics_port)):
            try:
                urllib.request.urlopen(f"https://127.0.0.1:{port}/metrics", timeout=10,
                                       context=context)
                prom.refused[job] = 200
            except urllib.error.HTTPError as exc:
                prom.refused[job] = exc.code
        yield prom
        stack.clear(namespace)


QUERIES = queries()


@pytest.mark.parametrize(("where", "expr"), QUERIES, ids=[q[0] for q in QUERIES])
def test_every_dashboard_query_returns_data(prometheus: Prometheus, where: str,
                                            expr: str) -> None:
    assert prometheus.query(for_prometheus(expr)), f"{where}: no data for {expr}"


def test_every_step_of_the_pods_path_was_measured(prometheus: Prometheus) -> None:
    """The "where the time goes" row: the placed pod went through every step, each
    measured by its component, in one histogram name."""
    counted = prometheus.query(f"sum by (step) ({latency.METRIC}_count) > 0")
    assert {r["metric"]["step"] for r in counted} == set(latency.STEPS)


def test_a_query_of_a_metric_nobody_exports_returns_nothing(prometheus: Prometheus) -> None:
    assert prometheus.query("sum(vgpu_gpu_memory_total_bytes)")
    assert prometheus.query("sum(vgpu_gpu_memory_free_bytes)") == []


def test_a_scrape_without_the_readers_token_is_refused(prometheus: Prometheus) -> None:
    """The same ports refuse a caller the API server does not authorize."""
    assert prometheus.refused, "no scrape without a token was tried"
    assert set(prometheus.refused.values()) == {403}


def test_every_dashboard_expression_is_valid_promql(tmp_path: Path) -> None:
    """promtool parses them all, the scheduler's included."""
    bin_dir = subprocess.run(["bash", str(ROOT / "tests" / "e2e" / "prometheus.sh")],
                             capture_output=True, text=True, check=True,
                             timeout=300).stdout.strip().splitlines()[-1]
    rules = {"groups": [{"name": "dashboards", "rules": [
        {"record": f"vgpu:dashboard_query_{i}", "expr": for_prometheus(expr)}
        for i, (_, expr) in enumerate(QUERIES)]}]}
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules))
    proc = subprocess.run([f"{bin_dir}/promtool", "check", "rules", str(tmp_path / "rules.yml")],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr

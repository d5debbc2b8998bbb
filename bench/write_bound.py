"""How late a write can still land: a Binding sent with a write timeout, under faults.

    python bench/write_bound.py [--write-timeout 5] [--trials 3] [--delays 2.5,7]
                                [--etcd-delays 1,7] [--late 7]

A fresh control plane (etcd + kube-apiserver 1.20 of tests/controlplane) with the fault
proxy of the fault suite (tests/e2e/faults/proxy.py) in front of the API server and a
TCP proxy that can delay every byte between the API server and etcd
(``bench/_etcd_delay.py``). A client through the fault proxy, as the scheduler's
(``KubeCluster.write_timeout`` = ``--write-timeout``; 0: none, the old way: a 30 s read
timeout and no ``timeout`` for the server), binds one pending pod per trial, under:

- ``forwarded``: no fault;
- ``delay-<d>``: the proxy holds the Binding ``d`` seconds, then sends it on (whether or
  not the client still waits: a hop that holds requests);
- ``lose-answer``: the proxy sends it on and drops the connection before the answer
  (drop after write);
- ``late-<d>``: the proxy drops the connection at once and sends the Binding ``d``
  seconds later (a hop that stores a request and forwards it after its client gave up);
- ``slow-etcd-<d>``: every byte between the API server and etcd takes ``d`` seconds more,
  each way, from just before the Binding until it landed or the wait ended.

A trial's figures are what the client was told (``bound``, ``in-doubt``, an error) and
when, and when the Binding landed: the first time etcd itself (read directly, not
through the delay) holds the pod with its node, counted from the moment the client
called ``bind`` (which is when the write's deadline starts). The last line is one JSON
object: per case every trial and the latest landing, its excess over the write timeout,
and ``bound_s``: the latest landing of the cases whose path holds nothing after its
client gave up (``forwarded``, ``lose-answer``, ``delay`` below the timeout); the hops
that hold a request (``delay`` past the timeout, ``late``) and a slow etcd are reported
per case: no client deadline reaches them (docs/faults.md#writes-in-flight).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _etcd_delay import EtcdDelay
from _support import ROOT

sys.path.insert(0, str(ROOT))

# After the line above: it imports the test helpers.
from tests.controlplane.cluster import ControlPlane
from tests.controlplane.daemons import etcd_post
from tests.e2e.faults.conftest import start_proxy
from tests.e2e.faults.proxy import FaultProxy
from tests.e2e.faults.rules import Action, Fault, once
from vgpu import builders
from vgpu.errors import ClusterError, OutcomeUnknownError
from vgpu.kube.adapter import KubeCluster, connect

NAMESPACE = "writes"
NODE = "write-bound"


@dataclass(frozen=True)
class Case:
    name: str
    #: Set up the fault for the pod about to be bound; returns its undoing.
    arm: Callable[[str], Callable[[], None]]
    #: How long after the call the Binding may still land, at most, under this fault.
    horizon: float
    #: ``client``: the path holds nothing once the client gave up (counts in ``bound_s``);
    #: ``hop``: a hop holds it after that; ``etcd``: etcd is slow.
    kind: str


class Bench:
    def __init__(self, cp: ControlPlane, etcd: EtcdDelay, proxy: FaultProxy,
                 client: KubeCluster, kube: KubeCluster) -> None:
        self.cp, self.etcd, self.proxy, self.client, self.kube = cp, etcd, proxy, client, kube
        self._made = 0

    def cases(self, args: argparse.Namespace) -> list[Case]:
        timeout = args.write_timeout or 30.0

        def proxied(action: Action, delay: float) -> Callable[[str], Callable[[], None]]:
            def arm(pod: str) -> Callable[[], None]:
                self.proxy.rules.append(once(lambda r: r.is_binding(pod), Fault(action, delay)))
                return self.proxy.rules.clear
            return arm

        def slow_etcd(delay: float) -> Callable[[str], Callable[[], None]]:
            def arm(_pod: str) -> Callable[[], None]:
                self.etcd.delay = delay
                return lambda: setattr(self.etcd, "delay", 0.0)
            return arm

        found = [Case("forwarded", proxied(Action.FORWARD, 0), timeout, "client"),
                 Case("lose-answer", proxied(Action.LOSE_ANSWER, 0), timeout, "client")]
        found += [Case(f"delay-{d:g}", proxied(Action.DELAY, d), d + timeout,
                       "client" if d < timeout else "hop") for d in args.delays]
        found += [Case(f"late-{d:g}", proxied(Action.LATE, d), d + timeout, "hop")
                  for d in args.late]
        found += [Case(f"slow-etcd-{d:g}", slow_etcd(d), 3 * d + timeout, "etcd")
                  for d in args.etcd_delays]
        return found

    def trial(self, case: Case) -> dict[str, Any]:
        self._made += 1
        name = f"{case.name}-{self._made}"
        pod = builders.pod(name, [builders.container(gpus=None, cpu="10m")],
                           namespace=NAMESPACE, scheduler_name="nobody")
        pod["spec"]["automountServiceAccountToken"] = False
        uid = self.kube.create("pods", pod)["metadata"]["uid"]
        told: list[tuple[str, float]] = []

        def bind(called: float) -> None:
            try:
                self.client.bind(NAMESPACE, name, NODE, {}, uid=uid)
                answer = "bound"
            except OutcomeUnknownError:
                answer = "in-doubt"
            except ClusterError as exc:
                answer = f"error: {str(exc)[:80]}"
            told.append((answer, time.monotonic() - called))

        undo = case.arm(name)
        try:
            called = time.monotonic()
            # On a thread: etcd is watched from the call on, not from the answer.
            binder = threading.Thread(target=bind, args=(called,), daemon=True)
            binder.start()
            landed = self.landed(name, called, case.horizon + 5)
            binder.join(case.horizon + 35)
        finally:
            undo()
        answer, answered = told[0] if told else ("no answer", float("nan"))
        with contextlib.suppress(ClusterError):
            self.kube.request_json("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}",
                                   "delete pod", query=[("gracePeriodSeconds", "0")])
        return {"answer": answer, "answered_s": round(answered, 3),
                "landed_s": None if landed is None else round(landed, 3)}

    def landed(self, pod: str, since: float, horizon: float) -> float | None:
        """Seconds from ``since`` to when etcd first holds ``pod`` bound, or None if it
        does not by ``horizon``."""
        key = base64.b64encode(f"/registry/pods/{NAMESPACE}/{pod}".encode()).decode()
        while time.monotonic() < since + horizon:
            kvs = etcd_post(self.cp.etcd_url, "/v3/kv/range", {"key": key}).get("kvs") or []
            if kvs and NODE.encode() in base64.b64decode(kvs[0]["value"]):
                return time.monotonic() - since
            time.sleep(0.02)
        return None


@contextlib.contextmanager
def stack(write_timeout: float, workdir: Path) -> Iterator[Bench]:
    etcd_url: list[str] = []
    etcd = EtcdDelay(lambda: etcd_url[0])

    def through_delay(url: str) -> str:
        etcd_url.append(url)
        return f"http://127.0.0.1:{etcd.port}"

    try:
        with ControlPlane(etcd_for_apiserver=through_delay) as cp:
            cp.ensure_namespace(NAMESPACE)
            kube = connect(str(cp.kubeconfig), qps=0)
            assert kube is not None
            kube.create("nodes", builders.node(NODE))
            proxy, kubeconfig = start_proxy(cp, workdir)
            try:
                client = connect(str(kubeconfig), qps=0)
                assert client is not None
                client.write_timeout = write_timeout or None
                yield Bench(cp, etcd, proxy, client, kube)
            finally:
                proxy.stop()
    finally:
        etcd.close()


def floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write-timeout", type=float, default=5.0,
                        help="the client's write timeout (0: none, the old way)")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--delays", type=floats, default=[2.5, 7.0])
    parser.add_argument("--late", type=floats, default=[7.0])
    parser.add_argument("--etcd-delays", type=floats, default=[1.0, 7.0])
    args = parser.parse_args()
    out: dict[str, Any] = {}
    bounded: list[float] = []
    with contextlib.ExitStack() as exits:
        workdir = Path(exits.enter_context(tempfile.TemporaryDirectory(prefix="vgpu-wb-")))
        bench = exits.enter_context(stack(args.write_timeout, workdir))
        for case in bench.cases(args):
            trials = [bench.trial(case) for _ in range(args.trials)]
            landed = [t["landed_s"] for t in trials if t["landed_s"] is not None]
            latest = max(landed) if landed else None
            out[case.name] = {"trials": trials, "latest_landed_s": latest,
                              "past_write_timeout_s": None if latest is None or
                              not args.write_timeout else round(latest - args.write_timeout, 3)}
            if case.kind == "client":
                bounded += landed
            print(f"{case.name}: {trials}", flush=True)
    print(json.dumps({"write_timeout": args.write_timeout, "trials": args.trials,
                      "bound_s": max(bounded) if bounded else None, "cases": out}))


if __name__ == "__main__":
    main()

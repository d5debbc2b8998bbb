"""Hypothesis: whatever arrives, the answer is well formed and never a 500.

The pure path (parse → decide → answer) is fuzzed hard; the same inputs then go through
the real TLS server a smaller number of times.
"""

from __future__ import annotations

import asyncio
import base64
import http.client
import json
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, event, example, given, settings
from hypothesis import strategies as st

from tests.webhook import certs
from tests.webhook.jsonpatch import apply
from tests.webhook.pods import HOMOGENEOUS, MIXED, NO_GPUS, review
from vgpu.config import Config, ResourceNames
from vgpu.errors import VgpuError
from vgpu.requests import names_gpu_resource, parse_gpu_pod, parse_pod
from vgpu_webhook.admission_server import WebhookServer
from vgpu_webhook.derived_requests import charges
from vgpu_webhook.gpus import ClusterGpus, GpuView
from vgpu_webhook.mutate import decide
from vgpu_webhook.review import BadReview, answer, parse
from vgpu_webhook.route_around import route_around
from vgpu_webhook.tls import CertReloader

CONFIG = Config()
NAMES = ResourceNames().all()

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20),
                         st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=10)

def mostly(good: st.SearchStrategy[Any], junk: st.SearchStrategy[Any] = json_values,
           one_in: int = 10) -> st.SearchStrategy[Any]:
    """``good`` most of the time, ``junk`` about once in ``one_in`` draws."""
    # (st.one_of would merge the repeated branches; a flag keeps the proportion.)
    return st.sampled_from(range(one_in)).flatmap(
        lambda n: junk if n == one_in - 1 else good)


def rarely(one_in: int) -> st.SearchStrategy[bool]:
    return st.sampled_from(range(one_in)).map(lambda n: n == one_in - 1)


valid_quantities = st.one_of(
    st.sampled_from(["1", "2", "4", "50", "100", "3000", "2Gi", "1k", "1e3", "25", "0"]),
    st.integers(0, 100))
quantities = mostly(valid_quantities, st.one_of(
    st.sampled_from(["-1", "101", "5", "1500m", "1e40", "lots", "", " 7 ", "0.5", "+3"]),
    st.floats(allow_nan=False, allow_infinity=False, width=32), json_values), one_in=6)
resource_keys = mostly(st.sampled_from([*NAMES, "cpu", "memory"]), st.text(max_size=10))
sections = st.dictionaries(resource_keys, quantities, min_size=1, max_size=3)
resources_ = mostly(st.one_of(
    st.fixed_dictionaries({"limits": sections}, optional={"requests": sections}),
    st.fixed_dictionaries({"requests": sections}),
    st.fixed_dictionaries({"limits": st.one_of(st.none(), json_values), "requests": sections}),
    st.just({})))


@st.composite
def containers(draw: st.DrawFn) -> Any:
    if draw(rarely(30)):
        return draw(json_values)
    container: dict[str, Any] = {}
    name = draw(mostly(st.sampled_from(["a", "b", "c", "main", "init"]), one_in=30))
    if not draw(rarely(30)):
        container["name"] = name
    resources = draw(resources_)
    if not draw(rarely(8)):
        container["resources"] = resources
    if draw(rarely(8)):
        container["securityContext"] = draw(mostly(
            st.fixed_dictionaries({"privileged": st.booleans()})))
    return container


annotation_values = mostly(
    st.sampled_from(["A100", "T4", "a100,t4", "GPU-a0-0", "GPU-t0-1, GPU-t0-0", "binpack",
                     "spread", "lowest-task-count", "nope", "true", "false", "maybe"]))
annotation_keys = st.sampled_from([
    "nvidia.com/use-gputype", "nvidia.com/nouse-gputype", "nvidia.com/use-gpuuuid",
    "nvidia.com/nouse-gpuuuid", "nvidia.com/numa-bind", "vgpu.io/gpu-scheduler-policy",
    "vgpu.io/node-scheduler-policy", "hami.io/gpu-scheduler-policy", "team"])


@st.composite
def pods(draw: st.DrawFn) -> Any:
    if draw(rarely(30)):
        return draw(json_values)
    spec: dict[str, Any] = {"containers": draw(mostly(
        st.lists(containers(), min_size=1, max_size=3), one_in=30))}
    if draw(rarely(3)):
        spec["initContainers"] = draw(mostly(st.lists(containers(), max_size=2), one_in=30))
    if draw(st.booleans()):
        spec["schedulerName"] = draw(mostly(st.sampled_from(
            ["default-scheduler", "vgpu-scheduler", "default-scheduler", "volcano", ""])))
    if draw(rarely(8)):
        spec["nodeName"] = draw(mostly(st.just("node-1")))
    metadata: Any = {"generateName": "job-"}
    if draw(st.booleans()):
        metadata["annotations"] = draw(mostly(
            st.dictionaries(annotation_keys, annotation_values, max_size=2), one_in=20))
    if draw(rarely(30)):
        metadata = draw(json_values)
    obj: dict[str, Any] = {"metadata": metadata, "spec": spec}
    if draw(rarely(30)):
        del obj[draw(st.sampled_from(["metadata", "spec"]))]
    return obj


clusters = st.sampled_from([NO_GPUS, HOMOGENEOUS, MIXED])
configs = st.sampled_from([CONFIG, Config(device_memory_scaling=1.5, default_mem=1000)])


def check_answer(raw: bytes, uid: str, obj: Any, config: Config, gpus: ClusterGpus) -> None:
    """A well-formed AdmissionReview answer whose patch applies and leaves a valid pod."""
    document = json.loads(raw)
    assert document["apiVersion"] == "admission.k8s.io/v1"
    assert document["kind"] == "AdmissionReview"
    response = document["response"]
    assert response["uid"] == uid
    assert isinstance(response["allowed"], bool)
    if not response["allowed"]:
        assert "patch" not in response
        assert isinstance(response["status"]["message"], str) and response["status"]["message"]
        assert response["status"]["code"] in (400, 403)
        return
    assert "status" not in response
    if "patch" not in response:
        assert "patchType" not in response
        return
    assert response["patchType"] == "JSONPatch"
    patched = apply(obj, json.loads(base64.b64decode(response["patch"], validate=True)))
    # Whatever the webhook let through is a pod the scheduler reads without error ...
    parse_pod(patched, config)
    # ... and a second pass (reinvocation) has nothing more to change.
    again = decide(review(patched)["request"], config, gpus)
    assert again.allowed and not again.patch


def respond(body: bytes, config: Config, gpus: ClusterGpus) -> tuple[int, bytes]:
    """What the server's handler does, minus HTTP."""
    try:
        parsed = parse(body)
    except BadReview as exc:
        return 400, str(exc).encode()
    return 200, answer(parsed.uid, decide(parsed.request, config, gpus))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pods(), clusters, configs, st.sampled_from(["CREATE", "UPDATE", None]))
def test_fuzzed_pods_get_well_formed_answers(obj: Any, gpus: ClusterGpus, config: Config,
                                             operation: str | None) -> None:
    body = json.dumps(review(obj, operation=operation or "CREATE", uid="fz")).encode()
    status, raw = respond(body, config, gpus)
    response = json.loads(raw)["response"]
    event("denied" if not response["allowed"] else "patched" if "patch" in response
          else "untouched")
    assert status == 200
    check_answer(raw, "fz", obj, config, gpus)


@settings(max_examples=100, deadline=None)
@given(pods(), clusters)
def test_gpu_pods_that_parse_are_never_denied_for_shape(obj: Any, gpus: ClusterGpus) -> None:
    """Only pods the core rejects (or policy/cluster limits) are denied."""
    decision = decide(review(obj)["request"], CONFIG, gpus)
    if not decision.allowed:
        assume(isinstance(obj, dict))
        with pytest.raises(VgpuError):
            parse_pod(obj, CONFIG)
            parsed = parse_gpu_pod(obj, CONFIG)
            assert parsed is not None  # it was denied: a GPU pod
            # The one policy rule: a GPU pod reaches a node only through vgpu's scheduler
            # (no nodeName, no other scheduler, no privileged container, no grant variables).
            if route_around(parsed, CONFIG) is not None:
                raise VgpuError("policy denial")
            # A memory percentage with no GPU known to charge it against (quota).
            charges(parsed, CONFIG, gpus)
            if gpus.known:
                raise VgpuError("cluster limit denial")


@settings(max_examples=100, deadline=None)
@given(json_values)
def test_arbitrary_json_bodies(value: Any) -> None:
    status, raw = respond(json.dumps(value).encode(), CONFIG, HOMOGENEOUS)
    assert status == 400 and raw


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.sampled_from(["uid", "kind", "operation", "object", "resource",
                                        "subResource", "namespace"]), json_values),
       st.sampled_from(["admission.k8s.io/v1", "admission.k8s.io/v1beta1", None]))
def test_fuzzed_envelopes(request: dict[str, Any], api_version: str | None) -> None:
    body = json.dumps({"apiVersion": api_version, "kind": "AdmissionReview",
                       "request": request}).encode()
    status, raw = respond(body, CONFIG, MIXED)
    if status == 200:
        check_answer(raw, request["uid"], request.get("object"), CONFIG, MIXED)
    else:
        assert status == 400 and raw


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes(body: bytes) -> None:
    status, raw = respond(body, CONFIG, MIXED)
    assert status in (200, 400) and raw


# --- the same through the real server ------------------------------------------------------


class ThreadServer:
    """The webhook on its own event loop in a thread, for synchronous hypothesis tests."""

    def __init__(self, tmp: Path) -> None:
        ca = certs.authority()
        self.ca_file = ca.write(tmp / "ca.crt")
        certs.serving(ca, tmp / "tls.crt", tmp / "tls.key")
        view = GpuView()
        view.mark_synced()
        self.server = WebhookServer(CONFIG, view,
                                    CertReloader(str(tmp / "tls.crt"), str(tmp / "tls.key")),
                                    host="127.0.0.1", port=0, metrics_port=0)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> ThreadServer:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ThreadServer,
                                                                     http.client.HTTPSConnection]]:
    with ThreadServer(tmp_path_factory.mktemp("fuzz-tls")) as running:
        context = ssl.create_default_context(cafile=str(running.ca_file))
        connection = http.client.HTTPSConnection("127.0.0.1", running.server.port,
                                                 context=context, timeout=10)
        yield running, connection
        connection.close()
        assert running.server.metrics.outcome["error"]._value.get() == 0


def send(connection: http.client.HTTPSConnection, body: bytes) -> tuple[int, bytes]:
    connection.request("POST", "/mutate", body=body,
                       headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    return response.status, response.read()


#: A draw that failed: one ``{}`` (st.just) is the resources of the app container and of the
#: first init container, which a deepcopying applier patched as one (test_jsonpatch.py).
_ONE: dict[str, Any] = {}
_ALIASED = {"metadata": {"generateName": "job-"}, "spec": {
    "containers": [{"name": "a", "resources": _ONE}], "initContainers": [
        {"name": "c", "resources": _ONE},
        {"name": "b", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}


@settings(max_examples=80, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture])
@given(st.one_of(
    pods().map(lambda obj: (obj, json.dumps(review(obj, uid="live")).encode())),
    json_values.map(lambda value: (None, json.dumps(value).encode())),
    st.binary(max_size=100).map(lambda raw: (None, raw))))
@example((_ALIASED, json.dumps(review(_ALIASED, uid="live")).encode()))
def test_fuzz_through_the_server(live: tuple[ThreadServer, http.client.HTTPSConnection],
                                 case: tuple[Any, bytes]) -> None:
    _, connection = live
    obj, body = case
    status, raw = send(connection, body)
    assert status in (200, 400), raw
    assert b"Traceback" not in raw
    if status == 200:
        check_answer(raw, "live", obj, CONFIG, NO_GPUS)
    if obj is not None and names_gpu_resource(obj, CONFIG):
        assert status == 200

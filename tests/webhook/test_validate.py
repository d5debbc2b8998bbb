"""``/validate``: what its denials say, and the endpoint on the real server over TLS.

Which writes it refuses is tabled (and checked against the registrations' CEL) in
test_registration_validate.py; here, that each refusal says what to do instead and that the
server answers and counts on ``/validate`` beside ``/mutate``.
"""

from __future__ import annotations

import dataclasses
import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.webhook import certs
from tests.webhook.pods import ctr, pod, review
from vgpu.config import Config, WebhookConfig
from vgpu_webhook.admission_server import WebhookServer
from vgpu_webhook.gpus import GpuView
from vgpu_webhook.tls import CertReloader
from vgpu_webhook.validate import validate

GPU_POD = pod(ctr("c", {"nvidia.com/gpu": "1"}))
PLACED = {"vgpu.io/assignment": "{}", "vgpu.io/bind-phase": "success"}


def placed(**extra: str) -> dict[str, Any]:
    return pod(ctr("c", {"nvidia.com/gpu": "1"}), annotations={**PLACED, **extra})


def update(new: dict[str, Any], old: dict[str, Any], user: str = "alice") -> dict[str, Any]:
    request = review(new, operation="UPDATE")["request"]
    request.update(oldObject=old, userInfo={"username": user})
    return request


def create(obj: dict[str, Any], user: str = "alice") -> dict[str, Any]:
    request = review(obj)["request"]
    request["userInfo"] = {"username": user}
    return request


def test_an_edit_names_the_keys_the_user_and_what_to_do() -> None:
    stripped = pod(ctr("c", {"nvidia.com/gpu": "1"}), annotations={})
    decision = validate(update(stripped, placed()), Config())
    assert not decision.allowed and decision.code == 403
    assert decision.message.startswith(
        "annotations vgpu.io/assignment, vgpu.io/bind-phase belong to vgpu")
    assert "not 'alice'" in decision.message and "leave them as they are" in decision.message
    assert "delete the pod and create it again" in decision.message


def test_a_forged_creation_says_which_annotations_a_pod_may_carry() -> None:
    forged = pod(ctr("c", {"cpu": "1"}), annotations={"vgpu.io/assignment": "{}"})
    decision = validate(create(forged), Config())
    assert not decision.allowed
    assert "annotation vgpu.io/assignment belongs to vgpu" in decision.message
    assert "create the pod without them" in decision.message
    assert ("vgpu.io/gpu-scheduler-policy, vgpu.io/node-scheduler-policy, "
            "vgpu.io/require-isolation") in decision.message


def test_writers_come_from_the_config() -> None:
    custom = dataclasses.replace(Config(), webhook=dataclasses.replace(
        WebhookConfig(), annotation_writers=("ops-robot",)))
    edit = update(pod(ctr("c", {"nvidia.com/gpu": "1"}), annotations={}), placed(),
                  user="ops-robot")
    assert validate(edit, custom).allowed
    assert not validate(edit, Config()).allowed


@pytest.mark.parametrize(("request_", "outcome"), [
    (dict(review(GPU_POD, kind="Deployment", group="apps")["request"]), "skipped"),
    ({**review(GPU_POD)["request"], "operation": "DELETE"}, "skipped"),
    ({**update(placed(), placed()), "subResource": "binding"}, "skipped"),
    ({**update(placed(), placed()), "subResource": "status"}, "unchanged"),
    (update(placed(), placed()), "unchanged"),
])
def test_what_is_passed(request_: dict[str, Any], outcome: str) -> None:
    decision = validate(request_, Config())
    assert decision.allowed and decision.outcome == outcome


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[tuple[WebhookServer, ssl.SSLContext]]:
    ca = certs.authority()
    ca_file = ca.write(tmp_path / "ca.crt")
    cert_file, key_file = tmp_path / "tls.crt", tmp_path / "tls.key"
    certs.serving(ca, cert_file, key_file)
    running = WebhookServer(Config(), GpuView(), CertReloader(str(cert_file), str(key_file)),
                            host="127.0.0.1", port=0, metrics_port=0)
    await running.start()
    try:
        yield running, ssl.create_default_context(cafile=str(ca_file))
    finally:
        await running.stop()


async def test_validate_is_served_beside_mutate(
        server: tuple[WebhookServer, ssl.SSLContext]) -> None:
    running, tls = server
    stripped = pod(ctr("c", {"nvidia.com/gpu": "1"}), annotations={})
    bodies = [{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
               "request": {**update(stripped, placed()), "uid": "u-1"}},
              {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
               "request": {**update(stripped, placed(), user=Config().webhook
                                    .annotation_writers[1]), "uid": "u-2"}}]
    answers = []
    async with aiohttp.ClientSession() as session:
        for body in bodies:
            async with session.post(f"https://127.0.0.1:{running.port}/validate",
                                    data=json.dumps(body).encode(), ssl=tls) as response:
                assert response.status == 200
                answers.append(json.loads(await response.read())["response"])
        async with session.post(f"https://127.0.0.1:{running.port}/validate", data=b"no",
                                ssl=tls) as response:
            assert response.status == 400
        async with session.get(f"http://127.0.0.1:{running.metrics_port}/metrics") as response:
            text = await response.text()
    assert answers[0]["uid"] == "u-1" and answers[0]["allowed"] is False
    assert answers[0]["status"]["code"] == 403 and "patch" not in answers[0]
    assert answers[1] == {"uid": "u-2", "allowed": True}
    for outcome in ("denied", "skipped", "invalid"):
        assert f'vgpu_webhook_validations_total{{outcome="{outcome}"}} 1.0' in text
    assert "vgpu_webhook_validation_duration_seconds_count 3.0" in text
    # /validate is not counted as /mutate's.
    assert "vgpu_webhook_request_duration_seconds_count 0.0" in text

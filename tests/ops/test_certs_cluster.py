"""``vgpu certs`` through the cluster port, on the in-memory cluster: the Secret and the
webhook configuration's ``caBundle`` as real objects, with concurrent writers."""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from tests.ops.certs_support import DAY, NAMES, NOW, SETTINGS, subject, subjects
from vgpu.cluster.memory import MemoryCluster
from vgpu.cluster.port import Kind
from vgpu.errors import ConfigError, ConflictError
from vgpu_certs import pki
from vgpu_certs.cluster import ClusterSecretStore, ClusterWebhookStore, WebhookConfigurations
from vgpu_certs.reconcile import reconcile, reconcile_retrying

HOOKS = ("a.vgpu.io", "b.vgpu.io")


def hook(name: str, bundle: bytes = b"") -> dict[str, Any]:
    client: dict[str, Any] = {"url": "https://localhost/mutate"}
    if bundle:
        client["caBundle"] = base64.b64encode(bundle).decode()
    return {"name": name, "clientConfig": client, "sideEffects": "None"}


class Meddling(MemoryCluster):
    """A memory cluster where someone else writes once, just before our next replace
    of ``kind``: the edit lands between our read and our write."""

    def __init__(self) -> None:
        super().__init__()
        self.edits: dict[str, Callable[[MemoryCluster], None]] = {}

    def replace(self, kind: Kind, obj: dict[str, Any]) -> dict[str, Any]:
        edit = self.edits.pop(kind, None)
        if edit is not None:
            edit(self)
        return super().replace(kind, obj)


def on_cluster(hooks: Sequence[str] = HOOKS) -> tuple[
        Meddling, ClusterSecretStore, ClusterWebhookStore]:
    cluster = Meddling()
    cluster.create("mutatingwebhookconfigurations", {
        "metadata": {"name": "vgpu-webhook"}, "webhooks": [hook(n) for n in hooks]})
    return (cluster, ClusterSecretStore(cluster, "vgpu-system", "vgpu-webhook-tls"),
            ClusterWebhookStore(cluster, "vgpu-webhook"))


def stored(cluster: MemoryCluster) -> tuple[dict[str, Any], dict[str, Any]]:
    return (cluster.get("secrets", "vgpu-webhook-tls", "vgpu-system"),
            cluster.get("mutatingwebhookconfigurations", "vgpu-webhook"))


def bundles(config: dict[str, Any]) -> dict[str, bytes]:
    return {w["name"]: base64.b64decode(w["clientConfig"].get("caBundle", ""))
            for w in config["webhooks"]}


def test_on_a_cluster_the_first_run_creates_and_the_next_changes_nothing() -> None:
    cluster, secrets, hooks = on_cluster()
    outcome = reconcile_retrying(secrets, hooks, SETTINGS, NOW)
    assert outcome.secret_written and outcome.webhooks_patched == HOOKS
    secret, config = stored(cluster)
    assert secret["type"] == "kubernetes.io/tls"
    assert secret["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "vgpu-certs"
    ca = base64.b64decode(secret["data"]["ca.crt"])
    assert bundles(config) == dict.fromkeys(HOOKS, ca)
    # Only the bundles changed: the rest of each webhook is as it was.
    assert config["webhooks"][0]["clientConfig"]["url"] == "https://localhost/mutate"
    versions = cluster.resource_version
    again = reconcile_retrying(secrets, hooks, SETTINGS, NOW + DAY)
    assert not again.changed and cluster.resource_version == versions


def test_on_a_cluster_renewal_replaces_the_secret_and_keeps_the_old_ca_trusted() -> None:
    cluster, secrets, hooks = on_cluster()
    reconcile_retrying(secrets, hooks, SETTINGS, NOW)
    old_secret, _ = stored(cluster)
    soon = NOW + 340 * DAY
    renewed = reconcile_retrying(secrets, hooks, SETTINGS, soon)
    assert renewed.secret_written and "expires" in renewed.renewed[0]
    secret, config = stored(cluster)
    assert secret["metadata"]["uid"] == old_secret["metadata"]["uid"]  # replaced, not new
    old_ca, new_ca = (base64.b64decode(s["data"]["ca.crt"]) for s in (old_secret, secret))
    assert new_ca != old_ca
    for bundle in bundles(config).values():
        assert subjects(bundle) == [subject(new_ca), subject(old_ca)]
    assert not reconcile_retrying(secrets, hooks, SETTINGS, soon).changed


def test_on_a_cluster_a_concurrent_edit_of_the_configuration_is_a_conflict() -> None:
    cluster, secrets, hooks = on_cluster()

    def insert_a_webhook_first(c: MemoryCluster) -> None:
        config = c.get("mutatingwebhookconfigurations", "vgpu-webhook")
        config["webhooks"].insert(0, hook("new.vgpu.io"))
        c.replace("mutatingwebhookconfigurations", config)

    # One pass: its positions are stale after the insert, and the write says so.
    cluster.edits["mutatingwebhookconfigurations"] = insert_a_webhook_first
    with pytest.raises(ConflictError, match="modified"):
        reconcile(secrets, hooks, SETTINGS, NOW)
    config = cluster.get("mutatingwebhookconfigurations", "vgpu-webhook")
    assert bundles(config) == dict.fromkeys(("new.vgpu.io", *HOOKS), b"")
    # The retrying run reads again and sets every bundle, the inserted webhook's too.
    outcome = reconcile_retrying(secrets, hooks, SETTINGS, NOW)
    secret, config = stored(cluster)
    ca = base64.b64decode(secret["data"]["ca.crt"])
    assert bundles(config) == dict.fromkeys(("new.vgpu.io", *HOOKS), ca)
    assert outcome.secret_written


def test_on_a_cluster_a_concurrent_secret_write_is_a_conflict_then_retried() -> None:
    cluster, secrets, hooks = on_cluster()
    reconcile_retrying(secrets, hooks, SETTINGS, NOW)
    writes: list[str] = []

    def another_job_renews(c: MemoryCluster) -> None:
        # A second Job pod, a moment ahead: it stores material of its own.
        other = ClusterSecretStore(c, "vgpu-system", "vgpu-webhook-tls")
        current = other.read()
        assert current is not None
        material = pki.issue(NAMES, NOW + 340 * DAY, 365 * DAY)
        other.write({"ca.crt": material.ca_crt, "tls.crt": material.tls_crt,
                     "tls.key": material.tls_key}, current.resource_version)
        writes.append("other")

    cluster.edits["secrets"] = another_job_renews
    outcome = reconcile_retrying(secrets, hooks, SETTINGS, NOW + 340 * DAY)
    assert writes == ["other"]
    # The second pass found the other writer's fresh certificate and kept it.
    assert not outcome.secret_written
    secret, config = stored(cluster)
    ca = base64.b64decode(secret["data"]["ca.crt"])
    assert all(subjects(b)[0] == subject(ca) for b in bundles(config).values())


def test_on_a_cluster_a_secret_of_another_type_is_refused_and_left_alone() -> None:
    cluster, secrets, hooks = on_cluster()
    cluster.create("secrets", {"metadata": {"name": "vgpu-webhook-tls",
                                            "namespace": "vgpu-system"},
                               "type": "Opaque", "data": {"x": "eA=="}})
    with pytest.raises(ConfigError, match=r"type 'Opaque'.*choose another --secret"):
        reconcile_retrying(secrets, hooks, SETTINGS, NOW)
    secret, config = stored(cluster)
    assert secret["type"] == "Opaque" and secret["data"] == {"x": "eA=="}
    assert bundles(config) == dict.fromkeys(HOOKS, b"")


def test_on_a_cluster_a_missing_configuration_still_writes_the_secret() -> None:
    cluster = MemoryCluster()
    secrets = ClusterSecretStore(cluster, "vgpu-system", "vgpu-webhook-tls")
    outcome = reconcile(secrets, ClusterWebhookStore(cluster, "vgpu-webhook"), SETTINGS, NOW)
    assert outcome.secret_written and outcome.webhook_missing
    assert cluster.get("secrets", "vgpu-webhook-tls", "vgpu-system")["data"]["tls.crt"]


def test_a_secret_that_is_not_base64_is_a_clear_error() -> None:
    cluster = MemoryCluster()
    cluster.create("secrets", {"metadata": {"name": "s", "namespace": "ns"},
                               "type": "kubernetes.io/tls", "data": {"tls.crt": "%%%"}})
    with pytest.raises(ConfigError, match=r"secret ns/s key tls\.crt is not base64"):
        ClusterSecretStore(cluster, "ns", "s").read()




def test_both_configurations_of_the_name_get_the_bundle() -> None:
    """/mutate's and /validate's configurations (one server, one certificate) are one
    store; a missing one is a missing store, and an edit of one keeps the other's."""
    cluster, secrets, _ = on_cluster(("mutate.vgpu.io",))
    both = WebhookConfigurations(cluster, "vgpu-webhook")
    assert reconcile(secrets, both, SETTINGS, NOW).webhook_missing
    cluster.create("validatingwebhookconfigurations", {
        "metadata": {"name": "vgpu-webhook"}, "webhooks": [hook("validate.vgpu.io")]})
    outcome = reconcile_retrying(secrets, both, SETTINGS, NOW)
    assert outcome.webhooks_patched == ("mutate.vgpu.io", "validate.vgpu.io")
    ca = base64.b64decode(stored(cluster)[0]["data"]["ca.crt"])
    assert bundles(cluster.get("mutatingwebhookconfigurations", "vgpu-webhook")) == {
        "mutate.vgpu.io": ca}
    assert bundles(cluster.get("validatingwebhookconfigurations", "vgpu-webhook")) == {
        "validate.vgpu.io": ca}
    # Someone resets the validating bundle: the next run puts it back and leaves the
    # mutating configuration alone.
    config = cluster.get("validatingwebhookconfigurations", "vgpu-webhook")
    config["webhooks"][0]["clientConfig"].pop("caBundle")
    cluster.replace("validatingwebhookconfigurations", config)
    before = cluster.get("mutatingwebhookconfigurations", "vgpu-webhook")
    assert reconcile_retrying(secrets, both, SETTINGS, NOW).webhooks_patched == (
        "validate.vgpu.io",)
    assert cluster.get("mutatingwebhookconfigurations", "vgpu-webhook") == before

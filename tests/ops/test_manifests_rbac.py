"""Least privilege in the manifests' RBAC: each ServiceAccount has exactly the rights its
code uses, in every install (the base and each overlay, as kustomize renders them).

The rights a component needs are read from its code (:mod:`tests.ops.api_calls`): every
request it can make, as (API group, resource, subresource, verb). A right granted that no
call uses, or a call without its right, fails here naming the lines of code concerned.
Which command a ServiceAccount runs is read from the rendered workloads (their
``serviceAccountName`` and the ``vgpu`` subcommand their container runs), so nothing in
this file names a component's rights.

Where a right can be narrower than cluster-wide (one namespace, named objects), the
narrowing is pinned in :data:`NARROWED` from the names the code uses; RBAC cannot name
the object of a ``create``, ``list`` or ``watch``, so those stay namespace-wide there.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.ops.api_calls import ApiCall, calls_of
from tests.ops.manifest_sources import ROOT, Obj, pod_specs
from tests.ops.rendered import INSTALLS, render
from vgpu.config import Config
from vgpu_certs import cli as certs_cli
from vgpu_webhook import remembered

ENTRY_POINTS: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text())[
    "project"]["entry-points"]["vgpu.commands"]
UNNAMEABLE = {"create", "list", "watch", "deletecollection"}


@dataclass(frozen=True)
class Grant:
    call: ApiCall
    #: None: cluster-wide (a ClusterRoleBinding); else the RoleBinding's namespace.
    namespace: str | None
    #: The rule's resourceNames ("" when it names none).
    name: str


def grants(objs: list[Obj], account: tuple[str, str]) -> set[Grant]:
    """Every right bound to the ServiceAccount ``(namespace, name)``."""
    out: set[Grant] = set()
    for binding in objs:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if not any(s["kind"] == "ServiceAccount" and (s["namespace"], s["name"]) == account
                   for s in binding["subjects"]):
            continue
        ref = binding["roleRef"]
        namespace = binding["metadata"].get("namespace") \
            if binding["kind"] == "RoleBinding" else None
        role = next(o for o in objs if o["kind"] == ref["kind"]
                    and o["metadata"]["name"] == ref["name"]
                    and (ref["kind"] == "ClusterRole"
                         or o["metadata"].get("namespace") == namespace))
        for rule in role["rules"]:
            for group in rule["apiGroups"]:
                for path in rule["resources"]:
                    resource, _, sub = path.partition("/")
                    for verb in rule["verbs"]:
                        for name in rule.get("resourceNames") or [""]:
                            out.add(Grant(ApiCall(group, resource, sub, verb), namespace,
                                          name))
    return out


def accounts(objs: list[Obj]) -> dict[tuple[str, str], set[str]]:
    """Each ServiceAccount the workloads run as, with the ``vgpu`` commands run under it."""
    out: dict[tuple[str, str], set[str]] = {}
    for where, spec in pod_specs(objs):
        obj = next(o for o in objs if f"{o['kind']}/{o['metadata']['name']}" == where)
        account = (obj["metadata"]["namespace"], spec["serviceAccountName"])
        commands = out.setdefault(account, set())
        for container in spec["containers"]:
            command = (container.get("args") or [""])[0]
            assert command in ENTRY_POINTS, (where, container["name"], command)
            commands.add(command)
    return out


def needed(commands: set[str]) -> dict[ApiCall, list[str]]:
    out: dict[ApiCall, list[str]] = {}
    for command in sorted(commands):
        for call, where in calls_of(ENTRY_POINTS[command]).items():
            out.setdefault(call, []).extend(where)
    return out


def _installs() -> Iterator[tuple[str, tuple[str, str]]]:
    for folder in INSTALLS:
        for account in sorted(accounts(render(folder))):
            yield folder, account


INSTALLED = list(_installs())


@pytest.mark.parametrize(("folder", "account"), INSTALLED,
                         ids=[f"{f}:{a[1]}" for f, a in INSTALLED])
def test_each_account_is_granted_exactly_what_its_code_calls(
        folder: str, account: tuple[str, str]) -> None:
    objs = render(folder)
    calls = needed(accounts(objs)[account])
    granted = {g.call for g in grants(objs, account)}
    missing = {c: calls[c] for c in set(calls) - granted}
    unused = granted - set(calls)
    assert not missing, f"{account[1]} calls these without the right: {missing}"
    assert not unused, f"{account[1]} is granted what no code of it calls: {sorted(unused)}"


@dataclass(frozen=True)
class Narrow:
    namespace: str | None
    #: None: whatever the name (the code reads objects it learns the names of).
    names: frozenset[str] | None


def narrowed(account: str, component_namespace: str) -> dict[tuple[str, str], Narrow]:
    """(group, resource) an account is granted only in one namespace or on named objects,
    from the names the code uses: the scheduler's Lease (the Deployment's
    ``--lease-name``), the webhook's remembered GPU types and the node agents' pods (the
    namespace of ``webhook.nodeAgents``), the certs Secret and the webhook configurations
    ``vgpu certs`` keeps."""
    own = component_namespace
    (agent,) = {a.split(":")[2] for a in Config().webhook.node_agents}
    table = {
        "vgpu-scheduler": {("coordination.k8s.io", "leases"): Narrow(own, frozenset(
            {"vgpu-scheduler"}))},
        "vgpu-webhook": {("", "configmaps"): Narrow(own, frozenset({remembered.NAME})),
                         ("", "pods"): Narrow(agent, None)},
        "vgpu-certs": {
            ("", "secrets"): Narrow(own, frozenset({certs_cli.DEFAULT_SECRET})),
            ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"): Narrow(
                None, frozenset({certs_cli.DEFAULT_WEBHOOK_CONFIG})),
            ("admissionregistration.k8s.io", "validatingwebhookconfigurations"): Narrow(
                None, frozenset({certs_cli.DEFAULT_WEBHOOK_CONFIG})),
        },
    }
    return table.get(account, {})


@pytest.mark.parametrize(("folder", "account"), INSTALLED,
                         ids=[f"{f}:{a[1]}" for f, a in INSTALLED])
def test_rights_on_vgpus_own_objects_are_narrowed_to_them(
        folder: str, account: tuple[str, str]) -> None:
    namespace, name = account
    narrow = narrowed(name, namespace)
    for grant in grants(render(folder), account):
        rule = narrow.get((grant.call.group, grant.call.resource))
        if rule is None:
            continue
        assert grant.namespace == rule.namespace, grant
        if grant.call.verb in UNNAMEABLE:
            assert not grant.name, grant
        elif rule.names is not None:
            assert grant.name in rule.names, grant


def test_the_lease_name_is_the_one_the_scheduler_is_told() -> None:
    deployment = next(o for o in render("base") if o["kind"] == "Deployment"
                      and o["metadata"]["name"] == "vgpu-scheduler")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--lease-name=vgpu-scheduler" in args


@pytest.mark.parametrize("folder", INSTALLS)
def test_no_wildcards_and_no_deletes_anywhere(folder: str) -> None:
    for o in render(folder):
        for rule in o.get("rules", []):
            for key in ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"):
                assert "*" not in rule.get(key, []), (o["metadata"]["name"], rule)
            assert not {"delete", "deletecollection", "escalate", "bind", "impersonate"} & \
                set(rule["verbs"]), (o["metadata"]["name"], rule)


@pytest.mark.parametrize("folder", INSTALLS)
def test_workloads_run_as_their_own_service_account(folder: str) -> None:
    objs = render(folder)
    for where, spec in pod_specs(objs):
        component = where.split("/", 1)[1].removeprefix("vgpu-")
        assert spec["serviceAccountName"] == f"vgpu-{component}", where

"""Fault domains in the core: which modes share faults, whom a pod trusts, the annotation,
the operator's defaults, what a placed pod holds, and the scope recorded in an assignment."""

from __future__ import annotations

import pytest

from vgpu import fault_domains as fd
from vgpu.codecs import Assignment, GrantedDevice, decode_assignment, encode_assignment
from vgpu.config import from_mapping
from vgpu.errors import ConfigError, RequestError


@pytest.mark.parametrize(("mode", "shared"), [
    ("mps", True),
    ("mps-hami-core", True),
    ("none", True),
    ("hami-core", False),
    ("unknown", True),          # a version 1 inventory: nobody knows, so shared
    ("something-new", True),    # an open set: a mode nobody measured shares faults
])
def test_which_modes_share_faults(mode: str, shared: bool) -> None:
    assert fd.shared(mode) is shared


A_ANY = fd.Tenant("a", fd.ANY, "1")
A_NS = fd.Tenant("a", fd.NAMESPACE, "2")
A_NS2 = fd.Tenant("a", fd.NAMESPACE, "3")
B_ANY = fd.Tenant("b", fd.ANY, "4")
B_NS = fd.Tenant("b", fd.NAMESPACE, "5")
A_NEW = fd.Tenant("a", "pod", "6")   # a scope a newer vgpu recorded


@pytest.mark.parametrize(("a", "b", "together"), [
    (A_ANY, B_ANY, True),        # both trust anyone
    (A_NS, A_NS2, True),         # one namespace, both namespace-only
    (A_NS, A_ANY, True),         # same namespace: the any pod is welcome
    (A_NS, B_ANY, False),        # the namespace-only pod does not trust b's pod...
    (B_ANY, A_NS, False),        # ...whichever of the two is placed second
    (A_NS, B_NS, False),
    (A_ANY, B_NS, False),
    (A_NEW, A_NS, False),        # an unknown scope trusts no other pod
    (A_NEW, A_NEW, True),        # but a pod shares with itself (two of its containers)
    (fd.Tenant("a", fd.NAMESPACE), fd.Tenant("b", fd.ANY), False),
])
def test_two_pods_share_a_fault_domain_only_when_each_trusts_the_other(
        a: fd.Tenant, b: fd.Tenant, together: bool) -> None:
    assert fd.compatible(a, b) is together
    assert fd.compatible(b, a) is together


@pytest.mark.parametrize(("annotations", "namespace", "expected"), [
    (None, "a", ("any", False)),
    ({}, "team", ("namespace", False)),                       # the namespace's default
    ({"vgpu.io/fault-domain": "any"}, "team", ("any", True)),  # the pod's own word wins
    ({"vgpu.io/fault-domain": " Namespace "}, "x", ("namespace", True)),
    ({"other": "x"}, "x", ("any", False)),
])
def test_the_scope_a_pod_states_or_gets(annotations: dict[str, str] | None, namespace: str,
                                        expected: tuple[str, bool]) -> None:
    defaults = fd.Defaults(fd.ANY, {"team": fd.NAMESPACE})
    assert fd.effective(annotations, namespace, defaults) == expected


@pytest.mark.parametrize("value", ["", "none", "tenant", "any,namespace"])
def test_an_unreadable_annotation_is_a_request_error(value: str) -> None:
    with pytest.raises(RequestError, match=r"vgpu\.io/fault-domain: .* is not a fault domain"):
        fd.stated({"vgpu.io/fault-domain": value})


@pytest.mark.parametrize(("recorded", "namespace", "expected"), [
    ("any", "team", "any"),              # recorded at placement: what counts
    ("namespace", "other", "namespace"),
    (None, "team", "namespace"),         # nothing recorded: the operator's default
    (None, "other", "any"),
])
def test_a_placed_pod_holds_its_recorded_scope_never_its_annotation_now(
        recorded: str | None, namespace: str, expected: str) -> None:
    defaults = fd.Defaults(fd.ANY, {"team": fd.NAMESPACE})
    assert fd.held(recorded, namespace, defaults) == expected


@pytest.mark.parametrize(("entries", "expected", "error"), [
    ((), {}, None),
    (("a=namespace", " b = any"), {"a": "namespace", "b": "any"}, None),
    (("a",), None, "is not <namespace>=<scope>"),
    (("=any",), None, "is not <namespace>=<scope>"),
    (("a=any", "a=namespace"), None, "named twice"),
    (("a=pod",), None, "is not a fault domain"),
])
def test_namespace_defaults(entries: tuple[str, ...], expected: dict[str, str] | None,
                            error: str | None) -> None:
    if error is None:
        assert fd.parse_namespace_defaults(entries) == expected
        return
    with pytest.raises(RequestError, match=error):
        fd.parse_namespace_defaults(entries)


def test_the_config_section_gives_the_defaults_and_refuses_a_bad_entry() -> None:
    config = from_mapping({"isolation": {"faultDomains": {
        "default": "namespace", "namespaceDefaults": ["shared=any"]}}})
    defaults = config.isolation.fault_domains.defaults
    assert (defaults.scope_of("shared"), defaults.scope_of("team")) == ("any", "namespace")
    with pytest.raises(ConfigError, match=r"isolation.faultDomains.namespaceDefaults: 'x'"):
        from_mapping({"isolation": {"faultDomains": {"namespaceDefaults": ["x"]}}})


def test_the_assignment_carries_the_recorded_scope_only_when_there_is_one() -> None:
    slices = {"main": (GrantedDevice("GPU-a", 1024, 30),)}
    plain = Assignment(node="n", containers=slices)
    assert "fault_domain" not in encode_assignment(plain)
    stamped = Assignment(node="n", containers=slices, fault_domain="namespace")
    text = encode_assignment(stamped)
    assert '"fault_domain":"namespace"' in text
    assert decode_assignment(text) == stamped
    assert decode_assignment(encode_assignment(plain)) == plain


@pytest.mark.parametrize(("reported", "configured", "shared"), [
    ("mps", "mps", True),
    ("hami-core", "mps", True),        # MPS configured, its daemon down for now
    ("hami-core", "hami-core", False),
    ("none", "hami-core", True),       # hami-core without its library: nothing holds
    ("unknown", "hami-core", True),
])
def test_a_gpu_shares_faults_by_what_it_reports_or_is_configured_for(
        reported: str, configured: str, shared: bool) -> None:
    assert fd.gpu_shares_faults(reported, configured) is shared


@pytest.mark.parametrize(("occupants", "blocked_by", "shown"), [
    ((), None, ""),
    ((A_ANY, A_NS2), None, "a only"),
    ((B_ANY,), B_ANY, "any"),
    ((A_ANY, B_NS), B_NS, "b only"),
])
def test_blocker_and_guard(occupants: tuple[fd.Tenant, ...], blocked_by: fd.Tenant | None,
                           shown: str) -> None:
    assert fd.blocker(A_NS, occupants) == blocked_by
    assert fd.guard(occupants) == shown

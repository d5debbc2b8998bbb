"""The reader of a component's API calls (tests/ops/api_calls.py), on code written for it.

The RBAC test trusts this reader to see every call; each way the product's code names a
resource is here, and so is each way a call could be missed (which must be an error).
"""

from __future__ import annotations

import ast
import textwrap

import pytest

from tests.ops.api_calls import ApiCall, Reader, Unresolved, calls_of
from tests.ops.api_reading import Module

HEADER = """
from vgpu.cluster.port import ClusterPort, Kind
from vgpu.cluster.informer import Informer
"""


def read(source: str) -> set[tuple[str, str, str]]:
    mod = Module("vgpu_fake.mod", ast.parse(HEADER + textwrap.dedent(source)))
    return {(c.group, c.path, c.verb) for c in Reader([mod]).calls()}


@pytest.mark.parametrize(("source", "expected"), [
    ("def f(port: ClusterPort):\n    port.get('nodes', 'a')\n",
     {("", "nodes", "get")}),
    ("def f(cluster: ClusterPort):\n    cluster.replace('leases', {})\n",
     {("coordination.k8s.io", "leases", "update")}),
    # status=True goes through the status subresource; a run-time flag means either.
    ("def f(port: ClusterPort):\n    port.patch_annotations('pods', 'p', {}, status=True)\n",
     {("", "pods/status", "patch")}),
    ("def f(port: ClusterPort, s: bool):\n    port.patch_annotations('pods', 'p', {}, status=s)\n",
     {("", "pods/status", "patch"), ("", "pods", "patch")}),
    ("def f(port: ClusterPort):\n    port.patch_status('pods', 'p', {})\n",
     {("", "pods/status", "patch")}),
    ("def f(port: ClusterPort):\n    port.bind('ns', 'p', 'node', {}, uid='u')\n",
     {("", "pods/binding", "create")}),
    ("def f(port: ClusterPort):\n    port.evict('ns', 'p', uid='u')\n",
     {("", "pods/eviction", "create")}),
    ("def f(port: ClusterPort, pod):\n    port.record_event(pod, 'Warning', 'R', 'm', 'c')\n",
     {("", "events", "create")}),
    ("def f(port: ClusterPort):\n    Informer(port, 'configmaps')\n",
     {("", "configmaps", "list"), ("", "configmaps", "watch")}),
    # A parameter typed Kind is followed to the calls of its function.
    ("class S:\n"
     "    def __init__(self, port: ClusterPort, kind: Kind = 'secrets'):\n"
     "        self._port = port\n"
     "        self.kind = kind\n"
     "    def read(self):\n"
     "        return self._port.get(self.kind, 'x')\n"
     "KINDS: tuple[Kind, ...] = ('nodes', 'csinodes')\n"
     "def g(port: ClusterPort):\n"
     "    return [S(port, k) for k in KINDS]\n",
     {("", "secrets", "get"), ("", "nodes", "get"), ("storage.k8s.io", "csinodes", "get")}),
    ("def lister(port: ClusterPort, kind: Kind):\n    return Informer(port, kind)\n"
     "def h(port: ClusterPort):\n"
     "    lister(port, 'services')\n"
     "    for kind in ('replicasets', 'statefulsets'):\n        lister(port, kind)\n",
     {("", "services", "list"), ("", "services", "watch"), ("apps", "replicasets", "list"),
      ("apps", "replicasets", "watch"), ("apps", "statefulsets", "list"),
      ("apps", "statefulsets", "watch")}),
    # A local holding the port, assigned from one.
    ("class B:\n    def __init__(self, cluster: ClusterPort):\n        self._cluster = cluster\n"
     "    def go(self):\n        c = self._cluster\n        c.create('events', {})\n",
     {("", "events", "create")}),
    # Not the port: a dict's get of a plural, a port number's get, another bind.
    ("def f(informers: dict, port_spec: dict, plugin):\n    informers.get('pods')\n"
     "    plugin.bind(1, 2, 3)\n", set()),
    ("def f(port: dict):\n    port.get('hostPort')\n", set()),
    # A class that implements the port forwards: its calls are its callers'.
    ("class Wrap:\n    def __init__(self, inner: ClusterPort):\n        self.inner = inner\n"
     + "".join(f"    def {m}(self, kind: Kind, *a):\n        return self.inner.{m}(kind, *a)\n"
               for m in ("list", "watch", "get", "create", "delete", "replace")),
     set()),
])
def test_reads_each_way_the_code_names_a_resource(source: str,
                                                  expected: set[tuple[str, str, str]]) -> None:
    assert read(source) == expected


@pytest.mark.parametrize("source", [
    # A resource computed at run time: the RBAC test cannot know it, so it must say so.
    "def f(port: ClusterPort, name: str):\n    port.get(name.lower(), 'x')\n",
    "def f(port: ClusterPort, kind: str):\n    port.patch_annotations(kind, 'x', {})\n",
    "def f(port: ClusterPort, kind: Kind):\n    port.list(kind)\ndef g(port, k):\n    f(port, k)\n",
])
def test_a_call_it_cannot_resolve_is_an_error_not_an_omission(source: str) -> None:
    with pytest.raises(Unresolved, match="cannot tell which resource"):
        read(source)


def test_the_product_reads_without_errors_and_the_scheduler_never_patches_a_pod() -> None:
    calls = calls_of("vgpu_scheduler.cli")
    assert ApiCall("", "pods", "binding", "create") in calls
    assert not [c for c in calls if c.resource == "pods" and c.verb == "patch" and
                not c.subresource]

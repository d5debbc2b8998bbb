"""The constraints of a pod that sets none: the cluster's default constraints with a
selector derived, as kube-scheduler's ``helper.DefaultSelector``, from the Services whose
selector matches the pod and from the ReplicationController, ReplicaSet or StatefulSet
that controls it. No such selector, no default constraints."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vgpu import meta
from vgpu.cluster.port import Obj
from vgpu.config import DefaultConstraint
from vgpu.errors import RequestError
from vgpu.labels import LabelRequirement, LabelSelector, from_labels, parse_selector
from vgpu_scheduler.framework.handle import Lister
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.spread import SpreadConstraint

#: (apiVersion, kind) of the controllers whose selector counts.
_RC = ("v1", "ReplicationController")
_WITH_LABEL_SELECTOR = {("apps/v1", "ReplicaSet"): "replicasets",
                        ("apps/v1", "StatefulSet"): "statefulsets"}


def _controller(pod: Obj) -> tuple[str, str, str] | None:
    """(apiVersion, kind, name) of the owner reference with ``controller: true``."""
    for ref in meta.owner_references(pod):
        if ref.get("controller") is True:
            return str(ref.get("apiVersion", "")), str(ref.get("kind", "")), str(
                ref.get("name", ""))
    return None


def _map(value: Any) -> dict[str, str] | None:
    if not isinstance(value, Mapping):
        return None
    return {str(k): str(v) for k, v in value.items()}


class Selectors:
    """The listers the default selector reads; the Services of a namespace are grouped
    once per version of the Service list (every pod looks them up)."""

    def __init__(self, services: Lister, controllers: Mapping[str, Lister]) -> None:
        self._services = services
        self._controllers = controllers
        self._by_namespace: dict[str, list[dict[str, str]]] = {}
        self._version: object = None

    def _service_selectors(self, namespace: str) -> list[dict[str, str]]:
        # An informer knows its resourceVersion; a lister that does not is re-read each time.
        version = getattr(self._services, "resource_version", None)
        if version is None or version != self._version:
            grouped: dict[str, list[dict[str, str]]] = {}
            for svc in self._services.items():
                selector = _map((svc.get("spec") or {}).get("selector"))
                if selector is not None:  # a Service without a selector selects no pod
                    ns = meta.namespace(svc, "default")
                    grouped.setdefault(ns, []).append(selector)
            self._by_namespace, self._version = grouped, version
        return self._by_namespace.get(namespace, [])

    def selector(self, pod: PodInfo) -> LabelSelector | None:
        """The pod's default selector; None when nothing selects it."""
        services = self._service_selectors(pod.namespace)
        owner = _controller(pod.pod)
        if not services and owner is None:
            return None
        merged: dict[str, str] = {}
        for selector in services:
            if from_labels(selector).matches(pod.labels):
                merged.update(selector)
        extra: tuple[LabelRequirement, ...] = ()
        if owner is not None and owner[:2] == _RC:
            rc = self._controllers["replicationcontrollers"].get(f"{pod.namespace}/{owner[2]}")
            # An RC's selector is a label map: it merges into the Services' one.
            merged.update(_map(((rc or {}).get("spec") or {}).get("selector")) or {})
        elif owner is not None:
            extra = self._owner_requirements(pod.namespace, owner)
        requirements = from_labels(merged).requirements + extra
        return LabelSelector(requirements) if requirements else None

    def _owner_requirements(self, namespace: str,
                            owner: tuple[str, str, str]) -> tuple[LabelRequirement, ...]:
        api_version, kind, name = owner
        plural = _WITH_LABEL_SELECTOR.get((api_version, kind))
        obj = None if plural is None else self._controllers[plural].get(f"{namespace}/{name}")
        if obj is None:
            return ()
        try:
            selector = parse_selector((obj.get("spec") or {}).get("selector"), "spec.selector")
        except RequestError:
            return ()
        return selector.requirements if selector is not None else ()


def constraints(defaults: tuple[DefaultConstraint, ...],
                selector: LabelSelector | None) -> tuple[SpreadConstraint, ...]:
    if selector is None:
        return ()
    return tuple(SpreadConstraint(d.max_skew, d.topology_key, d.when_unsatisfiable, selector)
                 for d in defaults)

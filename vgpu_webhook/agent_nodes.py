"""Which node a node agent's request comes from, for ``/node-scope``.

From its token: the node a pod-bound token names (Kubernetes 1.30+), else the node of the
pod the token is bound to, read once per pod from the API server (a pod's node never
changes, and a token of a deleted pod no longer authenticates). Only pods of the agent's
own namespace are read (the webhook's right is a Role there), and only the pod whose uid
the token names: a pod recreated under the name is another pod.

It also reads a Node as stored, when ``/node-scope`` cannot trust the review's
``oldObject`` (:func:`vgpu_webhook.node_scope.stored_to_read`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from vgpu import meta
from vgpu.cluster.port import ClusterPort, Obj
from vgpu.errors import NotFoundError
from vgpu.pods import node_name
from vgpu_webhook.node_scope import Identity

#: Agent pods remembered: one per GPU node, and a few generations of them.
REMEMBERED = 8192


class AgentNodes:
    def __init__(self, port: ClusterPort | None, remembered: int = REMEMBERED) -> None:
        self._port = port
        self._remembered = remembered
        self._nodes: OrderedDict[tuple[str, str, str], str] = OrderedDict()
        self._lock = threading.Lock()

    def needs_lookup(self, who: Identity) -> bool:
        """Whether :meth:`node_of` would ask the API server (a blocking call)."""
        if who.node or not (who.pod and who.pod_uid and who.namespace) or self._port is None:
            return False
        with self._lock:
            return (who.namespace, who.pod, who.pod_uid) not in self._nodes

    def node_of(self, who: Identity) -> str | None:
        """The writer's node; None when its token ties it to none. Raises the cluster
        errors of a failed lookup (the caller denies: it cannot tell)."""
        if who.node:
            return who.node
        if not (who.pod and who.pod_uid and who.namespace) or self._port is None:
            return None
        key = (who.namespace, who.pod, who.pod_uid)
        with self._lock:
            known = self._nodes.get(key)
            if known is not None:
                self._nodes.move_to_end(key)
                return known
        try:
            pod = self._port.get("pods", who.pod, who.namespace)
        except NotFoundError:
            return None
        node = node_name(pod)
        if meta.uid(pod) != who.pod_uid or not node:
            return None
        with self._lock:
            self._nodes[key] = node
            while len(self._nodes) > self._remembered:
                self._nodes.popitem(last=False)
        return node

    def stored_node(self, name: str) -> Obj | None:
        """The Node ``name`` as stored now (a blocking read); None without a cluster.
        Raises the cluster errors of a failed read (the caller denies: it cannot tell)."""
        return None if self._port is None else self._port.get("nodes", name)

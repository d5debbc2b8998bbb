"""Where the webhook's GPU view comes from: a watch on Nodes, or nothing.

With a cluster (a kubeconfig, or running in one) an informer lists and watches Nodes and
feeds their inventory annotations to the :class:`~vgpu_webhook.gpus.GpuView`; the webhook is
ready once that first list is in. With no cluster configuration at all, the view stays
empty and is ready at once: every percentage is then left to the scheduler and no request
is denied for exceeding the cluster's GPUs.
"""

from __future__ import annotations

import threading

from vgpu import logs
from vgpu.cluster.informer import Informer
from vgpu.cluster.port import ClusterPort
from vgpu_webhook import quota_caps, remembered
from vgpu_webhook.gpus import GpuView

log = logs.get("vgpu.webhook.watch")


def watch_nodes(port: ClusterPort, stop: threading.Event, *, namespace: str = "",
                remember: bool = False) -> GpuView:
    """A view kept current by informer threads on ``port`` until ``stop`` is set: the
    Nodes' inventories, the ResourceQuotas that cap GPU memory (the view is ready once
    both were listed), and with ``remember`` the GPU types seen before, kept in the
    ConfigMap of ``namespace`` (:mod:`vgpu_webhook.remembered`)."""
    informer = Informer(port, "nodes")
    view = GpuView(synced=informer.synced)
    informer.add_handler(view.handle)
    quotas = quota_caps.watch(port, stop, view.cap)
    view.wait_for(quotas.synced)
    if remember and namespace:
        store = remembered.start(port, namespace, stop)
        store.on_change = view.remember
        view.on_kinds = store.learn
    informer.start(stop, name="webhook-nodes")
    return view


def no_cluster() -> GpuView:
    """An empty view, ready now: no inventory is coming."""
    log.info("no cluster configuration; running without a node inventory, percentages "
             "are left to the scheduler")
    view = GpuView()
    view.mark_synced()
    return view

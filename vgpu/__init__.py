"""vgpu: GPU sharing for Kubernetes.

This package is the shared core that the components (the webhook, the scheduler, the node
agent, certs and the kubectl plugin) import, and that imports none of them: configuration,
the parsed GPU request of a pod, the device model and fit arithmetic, the annotation
codecs, the cluster port with its adapters, and the ``vgpu`` command's dispatcher. Only
:mod:`vgpu.kube` talks to an API server (and :mod:`vgpu.probes` serves the components'
``/metrics`` and probes).
"""

# No ``from __future__ import annotations`` here, unlike every other module: it would bind
# the name ``annotations`` in this package to the feature object, so that
# ``from vgpu import annotations`` yields that object, not the module, whenever nothing
# imported ``vgpu.annotations`` first. This file holds no annotation to defer.

__version__ = "0.1.0"

"""The gRPC surface towards the kubelet: the ``DevicePlugin`` service, serving it on its
socket and registering it, and the pod-resources client (generated modules: ``proto/``).
"""

from __future__ import annotations

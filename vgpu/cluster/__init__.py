"""The cluster port: the one narrow interface through which vgpu talks to Kubernetes.

``port`` defines it and ``resources`` lists what it serves; ``memory`` is the in-memory
cluster (a product part: the simulator and the tests run the real components on it);
``informer`` is the list+watch loop every component uses on top of either adapter;
``leader`` is leader election on a Lease, through the port. The real adapter (the
``kubernetes`` client) lives in ``vgpu.kube``, the only module of the core that does
network I/O.
"""

from __future__ import annotations

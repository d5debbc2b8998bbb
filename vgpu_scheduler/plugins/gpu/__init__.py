"""vgpu's own plugins, what GPU sharing adds to kube-scheduler's: :mod:`.share` (``VGPU``:
per-GPU fit, node score, the GPU choice at Reserve), :mod:`.allocation_gate`
(``AllocationGate``: Permit holds a pod the node agent could confuse with one in flight),
:mod:`.binder` (``VGPUBinder``: the Binding that carries the assignment),
:mod:`.fragmentation_aware` (``FragmentationAware``: the fragmentation-aware node score and
GPU policy) and :mod:`.isolation_required` (``IsolationRequired``: pods that require
isolation only on nodes that enforce it).
"""

from __future__ import annotations

"""vgpu: GPU sharing for Kubernetes.

This package is the pure shared core that the webhook, the scheduler and the node agent
all import: configuration, the parsed GPU request of a pod, the device model and fit
arithmetic, and the annotation codecs. Nothing here does network I/O.
"""

from __future__ import annotations

__version__ = "0.1.0"

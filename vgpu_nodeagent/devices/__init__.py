"""The node's GPUs: discovery (NVML or a fake file), the kubelet's virtual device IDs,
health after XID faults, and the inventory the agent publishes on its node.

Nothing here knows of pods or isolation; the rest of the agent sees the GPUs through
these values only.
"""

from __future__ import annotations

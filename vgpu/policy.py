"""Names of the placement policies.

They live in the core so that the webhook can reject an unknown name in a pod annotation
with the same list the scheduler's plugin registry accepts.
"""

from __future__ import annotations

#: How the scheduler picks GPUs on the chosen node. ``lowest-task-count`` is the default
#: (the GPU running the fewest tasks); the others are selectable per pod or in config.
GPU_POLICIES: tuple[str, ...] = (
    "lowest-task-count",
    "binpack",
    "spread",
    "fragmentation-aware",
    # FGD (USENIX ATC'23), the paper's own GPU choice, and a random GPU: for comparisons
    # with vgpu simulate.
    "fgd",
    "random",
)

#: How the scheduler ranks nodes.
NODE_POLICIES: tuple[str, ...] = ("binpack", "spread")

DEFAULT_GPU_POLICY = "lowest-task-count"
DEFAULT_NODE_POLICY = "binpack"

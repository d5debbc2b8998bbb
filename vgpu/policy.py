"""Names of the scheduling policies a configuration (or a pod) chooses among.

They live in the core so that the webhook can reject an unknown name in a pod annotation
with the same list the scheduler's plugin registry accepts, and so that the configuration
can offer them without importing the code that implements them.
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

#: How the scheduler ranks nodes: vgpu's own (the node with the pod placed), and HAMi's
#: (its score of the node before the pod), which ``hami.io/node-scheduler-policy`` names.
HAMI_NODE_BINPACK = "hami-binpack"
HAMI_NODE_SPREAD = "hami-spread"
NODE_POLICIES: tuple[str, ...] = ("binpack", "spread", HAMI_NODE_BINPACK, HAMI_NODE_SPREAD)

DEFAULT_GPU_POLICY = "lowest-task-count"
DEFAULT_NODE_POLICY = "binpack"

#: Which GPU pods the scheduler's Permit gate holds behind a pod in flight on their node
#: (``scheduler.permitGate``): only one the node agent could confuse with it
#: (:func:`vgpu.confusable.confusable`), or every one (the behaviour before device-ID
#: matching).
PERMIT_AMBIGUOUS = "ambiguous"
PERMIT_NODE = "node"
PERMIT_GATES: tuple[str, ...] = (PERMIT_AMBIGUOUS, PERMIT_NODE)

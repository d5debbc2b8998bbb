"""The largest number vgpu reads for each quantity, from any object a node, a pod's owner or
an operator writes (docs/contracts.md#conventions).

Each bound is far above any real GPU or node and far below what the scheduler's numeric
columns hold (32-bit per GPU, summed over a node's GPUs), so a value past it is a bug or an
attack, refused at the codec with a message naming the field, instead of an overflow deep
in a scheduling loop (issue 36: ``cores: 2147483648`` on one Node stopped every GPU pod).
"""

from __future__ import annotations

#: MiB of one GPU (4 TiB; the largest GPU today has 192 GiB).
GPU_MEMORY_MIB = 1 << 22
#: Compute of one GPU, in percent: what a whole GPU is and the most a slice can be.
GPU_CORES = 100
#: Tasks (vGPU slots) one GPU may be split into.
GPU_SPLIT = 1024
#: GPUs on one node, and vGPUs one container may ask for (a node has 8 or 16 today).
GPUS_PER_NODE = 128
#: A GPU's index on its node and a NUMA node's number.
GPU_INDEX = 1023
NUMA_NODE = 1023
#: NVLinks between two GPUs (18 on an H100 pair) and the NVLink generation.
NVLINKS = 64
NVLINK_GENERATION = 64
#: A container's task priority (``nvidia.com/priority``: 0 high, 1 low).
TASK_PRIORITY = 1
#: A Linux uid as Kubernetes accepts it in ``runAsUser`` (0 to 2^31-1).
UID = 2**31 - 1

# Sums of a node's GPUs stay inside a signed 32-bit column.
assert GPU_MEMORY_MIB * GPUS_PER_NODE < 2**31

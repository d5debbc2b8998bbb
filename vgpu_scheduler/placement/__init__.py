"""Where a pod's vGPUs go: the pure arithmetic of placement and the GPU and node policies.

Nothing here does I/O or knows the host: :mod:`.place` chooses GPUs on one node,
:mod:`.policies` ranks GPUs and nodes, :mod:`.vectorfit` explains failures over many
nodes at once, :mod:`.shapes` and :mod:`.shares` speak milli-GPU, :mod:`.stranding` is the
measure behind the fragmentation-aware policy.
"""

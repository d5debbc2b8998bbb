"""How a node's GPUs talk to each other, and which set of them a multi-GPU container gets.

:mod:`.links` is the model (a pair's NVLinks, NVSwitch and common PCIe ancestor, ranked by
speed), :mod:`.codec` its wire form in the node inventory, :mod:`.choice` the pure choice
of a GPU set that the scheduler's placement and the node agent's GetPreferredAllocation
share, and :mod:`.shapes` the named topologies the fake-GPU examples and the simulator use.
"""

from __future__ import annotations

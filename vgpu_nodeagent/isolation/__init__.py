"""What holds a container to its slice: the isolation mode a node runs now (``mode``), the
Allocate answer of each backend (``answers``: none, hami-core, mps), HAMi-core's
environment (``grants``), the MPS control daemon (``mps``), and the usage watchdog that
checks the grants against NVML (``watchdog``, ``usage_rules``, ``cgroups``).
"""

from __future__ import annotations

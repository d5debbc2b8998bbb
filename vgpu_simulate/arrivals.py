"""The arrival order of a replay, as the FGD artifact builds it.

The artifact (``pkg/simulator/core.go``, ``simulator.go``) does, with Go's global
``math/rand``:

1. ``rand.Seed(seed)`` and one ``rand.Int()`` (its debug log line evaluates it even when
   debug logging is off, so it consumes one value);
2. sort the pods by name and ``rand.Shuffle`` them;
3. tune the list to ``ratio`` × the cluster's GPU capacity: below it, clone pods drawn with
   ``rand.Intn`` from the name-sorted original list and append them until the next clone
   would exceed the target (the check adds the clone's *per-GPU* milli, a quirk kept here so
   the lists match); above it, remove pods at ``rand.Intn`` positions until it fits;
4. ``rand.Perm`` over the node count to prefix node names, which decides which of equally
   scored nodes wins (the replay creates the nodes in that order).

The same generator then keeps running inside the scheduler (random tie-breaks); the
returned :class:`GoRand` is positioned after step 4 for that purpose.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from vgpu_simulate.gorand import GoRand
from vgpu_simulate.trace import TracePod


@dataclass(frozen=True)
class Arrivals:
    pods: tuple[TracePod, ...]
    rng: GoRand  # positioned where the artifact's scheduler starts drawing
    original: int  # pods from the list itself; the rest are clones
    target_milli: float
    node_perm: tuple[int, ...]  # rand.Perm(node count): the artifact's node name prefixes


def arrival_order(pods: Sequence[TracePod], *, seed: int, ratio: float, capacity_milli: int,
                  node_count: int) -> Arrivals:
    """Shuffle and tune ``pods`` for one seed; ``ratio <= 0`` keeps the list as it is."""
    rng = GoRand(seed)
    rng.int63()  # log.Debugf(..., rand.Int()) right after rand.Seed
    by_name = sorted(pods, key=lambda p: p.name.encode())  # Go compares strings bytewise
    order = list(by_name)
    rng.shuffle_list(order)
    target = ratio * capacity_milli
    total = sum(p.total_gpu_milli for p in order)
    original = len(order)
    if ratio > 0 and total < target:
        i = 0
        while True:
            pick = by_name[rng.intn(len(by_name))]
            if total + pick.gpu_milli > target:
                break
            order.append(dataclasses.replace(pick, name=f"{pick.name}-tuned-{i}"))
            total += pick.total_gpu_milli
            i += 1
    elif ratio > 0 and total > target:
        while total > target and order:
            gone = order.pop(rng.intn(len(order)))
            total -= gone.total_gpu_milli
        original = len(order)
    perm = rng.perm(node_count)
    return Arrivals(pods=tuple(order), rng=rng, original=original, target_milli=target,
                    node_perm=tuple(perm))

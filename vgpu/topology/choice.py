"""Which set of GPUs a container of several vGPUs gets, when the node's links are known.

The candidates are the GPUs that fit one vGPU, in the order the GPU policy ranks them.
A set is judged, in this order, by:

1. its **slowest pair** (:meth:`LinkMatrix.worst`): the faster, the better; a container
   runs as fast as its slowest link;
2. the **policy**: the sorted policy classes of its GPUs, smaller is better. A class is a
   run of candidates the policy ranked next to each other that look alike to any policy
   (same model, capacity and usage: two idle GPUs, say), so the topology only chooses
   among GPUs the policy has no reason to tell apart;
3. what it leaves of the node's **idle fast sets** (:func:`_leftover`): taking a GPU out
   of an NVLink pair when a GPU without one fits as well would leave the next two-GPU pod
   a slower pair;
4. the policy's exact order (its index tie-breaks).

A container of one vGPU skips the first criterion. With a uniform topology (every pair
alike) the choice is the policy's first ``count`` candidates, as without topology.

The search visits sets in policy order and drops a partial set as soon as its slowest
pair is slower than the best complete set's; on a node of 8 GPUs that is at most a few
hundred steps. Only the sets tied on the first two criteria are judged on the third, at
most :data:`MAX_TIED` of them (then the earliest in policy order).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from vgpu.topology.links import NO_PAIR, LinkMatrix

#: Sets tied on the slowest pair and the policy that are compared on what they leave.
MAX_TIED = 512


@dataclass(frozen=True, slots=True)
class Pick:
    """The chosen GPUs (device positions, in policy order) and their slowest pair's rank
    (a large number for one GPU: no pair)."""

    positions: tuple[int, ...]
    worst: int


class _Idle:
    """The node's idle GPUs grouped, for every rank present among them, into the groups
    linked at that rank or faster (the "fast sets" a later multi-GPU pod could get).

    One pass over the pairs, fastest first, joining groups (the groups of a slower rank
    contain those of a faster one), with the groups noted at the end of each rank.
    """

    def __init__(self, links: LinkMatrix, idle: Collection[int]) -> None:
        members = sorted(idle)
        ranks = links.ranks
        pairs = sorted(((ranks[a][b], a, b) for i, a in enumerate(members)
                        for b in members[i + 1:]), reverse=True)
        parent = {m: m for m in members}
        size = dict.fromkeys(members, 1)

        def root(x: int) -> int:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        self.groups: list[dict[int, int]] = []
        self.sizes: list[dict[int, int]] = []
        for i, (level, a, b) in enumerate(pairs):
            ra, rb = root(a), root(b)
            if ra != rb:
                if size[ra] < size[rb]:
                    ra, rb = rb, ra
                parent[rb] = ra
                size[ra] += size[rb]
            if i + 1 == len(pairs) or pairs[i + 1][0] != level:
                group = {m: root(m) for m in members}
                self.groups.append(group)
                self.sizes.append({g: size[g] for g in set(group.values())})

    def leftover(self, taken: Sequence[int]) -> tuple[tuple[int, ...], ...]:
        """Per rank, fastest first, the sizes of the idle groups left once ``taken`` is
        taken, largest first; a larger tuple keeps more fast sets whole."""
        out = []
        for group, sizes in zip(self.groups, self.sizes, strict=True):
            left = dict(sizes)
            for p in taken:
                g = group.get(p)
                if g is not None:
                    left[g] -= 1
            out.append(tuple(sorted((s for s in left.values() if s), reverse=True)))
        return tuple(out)

    def alone(self, position: int) -> tuple[int, ...]:
        """For one GPU taken: per rank, fastest first, the size of its idle group (0 when
        it is not idle). Taking from a smaller group leaves the larger ones whole, so the
        smaller tuple is :meth:`leftover`'s larger one."""
        return tuple(sizes[group[position]] if position in group else 0
                     for group, sizes in zip(self.groups, self.sizes, strict=True))


def _search(order: Sequence[int], count: int, links: LinkMatrix, classes: Sequence[int], *,
            groups: Sequence[int] | None, fixed: int) -> tuple[int, list[list[int]]]:
    """The best slowest-pair rank over the sets of ``count`` candidates (indices into
    ``order``) and the sets reaching it with the smallest class tuple, in policy order."""
    ranks = links.ranks
    best_worst = -1
    best_classes: tuple[int, ...] | None = None
    tied: list[list[int]] = []
    chosen: list[int] = list(range(fixed))  # the fixed GPUs are order's first entries

    def visit(nxt: int, worst: int) -> None:
        nonlocal best_worst, best_classes, tied
        if len(chosen) == count:
            key = tuple(sorted(classes[i] for i in chosen))
            if worst > best_worst or (best_classes is not None and worst == best_worst
                                      and key < best_classes):
                best_worst, best_classes, tied = worst, key, [list(chosen)]
            elif worst == best_worst and key == best_classes and len(tied) < MAX_TIED:
                tied.append(list(chosen))
            return
        need = count - len(chosen)
        group = groups[chosen[0]] if groups is not None and chosen else None
        for i in range(nxt, len(order) - need + 1):
            if group is not None and groups is not None and groups[i] != group:
                continue
            row = ranks[order[i]]
            w = worst
            for j in chosen:
                w = min(w, row[order[j]])
            if w < best_worst:
                continue
            chosen.append(i)
            visit(i + 1, w)
            chosen.pop()

    initial = links.worst([order[i] for i in chosen]) if chosen else NO_PAIR
    visit(fixed, initial)
    return best_worst, tied


def choose(order: Sequence[int], count: int, links: LinkMatrix, *,
           classes: Sequence[int] | None = None, idle: Collection[int] = (),
           groups: Sequence[int] | None = None, fixed: int = 0) -> Pick | None:
    """The best set of ``count`` of the candidates ``order`` (device positions, the
    policy's best first), or None when there is none (too few, or no NUMA group with
    enough). ``classes`` gives each candidate's policy class (non-decreasing; default: each
    its own), ``idle`` the node's idle GPUs (device positions), ``groups`` each
    candidate's NUMA node when the set must come from one, and ``fixed`` how many of the
    first candidates the set must hold (the kubelet's must-include devices)."""
    if count <= 0 or count > len(order) or fixed > count:
        return None
    cls = list(classes) if classes is not None else list(range(len(order)))
    worst, tied = _search(order, count, links, cls, groups=groups, fixed=fixed)
    if not tied:
        return None
    best = tied[0]
    if len(tied) > 1 and idle:
        view = _Idle(links, idle)
        if count == 1:
            best = min(tied, key=lambda s: (view.alone(order[s[0]]), s))
        else:
            best = max(tied, key=lambda s: (view.leftover([order[i] for i in s]),
                                            tuple(-i for i in s)))
    return Pick(tuple(order[i] for i in best), worst)


def best_worst(positions: Sequence[int], count: int, links: LinkMatrix,
               groups: Sequence[int] | None = None) -> int | None:
    """The fastest slowest-pair any ``count`` of ``positions`` could have (one NUMA group
    each, when ``groups`` is given); None when no such set exists."""
    pick = choose(positions, count, links, classes=[0] * len(positions), groups=groups)
    return None if pick is None else pick.worst

"""How many tasks of each shape a GPU of each model should expect: how scarce a model is.

A task that names the GPU models it accepts (``nvidia.com/use-gputype``, the trace's
``gpu_spec``; or refuses some, ``nouse-gputype``) can use only those models' GPUs. When
many tasks are pinned to a small model, each of its GPUs is wanted by more tasks than the
average GPU, and a task that could run anywhere takes from them what a pinned task will
miss.

A task of shape ``s`` is taken to be as likely to ask for any GPU it allows: with ``C_m``
GPUs of model ``m``, ``C`` in all and ``C(A_s)`` on the models ``s`` allows, a GPU of an
allowed model sees ``1 / C(A_s)`` of the shape's tasks, against ``1 / C`` if every GPU were
allowed. That ratio is the shape's *density* on the model::

    density(s, m) = C / C(A_s)  if s allows m,  else 0

A shape that allows every model has density 1 everywhere (the measure without
constraints); one pinned to a model with a tenth of the GPUs has density 10 there. So a
model's GPUs weigh the pinned tasks' claims on top of everyone else's, and a task that can
go anywhere strands least where the fewest pinned tasks need the GPUs.

Why not the split a perfect scheduler would reach (flexible tasks sent wherever loads
come out even)? In that split every model is loaded alike and a flexible task finds every
model equally costly, so which scarce model fills first is left to chance, and the pinned
tasks that arrive after it fail. On the generated ``gpuspec33`` workload (tuning seeds
1-3) the even split left 11.36 % of the GPUs unallocated, these densities 6.82 %, FGD
11.13 %. Nothing here is tuned: the densities follow from the shapes and the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scheduler.placement.shapes import Shape


def densities(shapes: Sequence[tuple[Shape, float]], capacity: Mapping[str, int]
              ) -> dict[str, tuple[float, ...]]:
    """Per model with GPUs, each of ``shapes``' density on it (see the module docstring);
    empty when no shape names a model, which means density 1 wherever a shape is allowed."""
    models = sorted(m for m, c in capacity.items() if c > 0)
    if not models or not any(s.models or s.excluded for s, _ in shapes):
        return {}
    total = sum(capacity[m] for m in models)
    allowed = [[s.allows(m) for m in models] for s, _ in shapes]
    reach = [sum(capacity[m] for m, ok in zip(models, row, strict=True) if ok)
             for row in allowed]
    return {m: tuple(total / r if row[j] else 0.0 for row, r in zip(allowed, reach, strict=True))
            for j, m in enumerate(models)}

"""Preemption (kube-scheduler's DefaultPreemption), GPU slices included: the plugin in
:mod:`.plugin`, victim selection in :mod:`.victims`, the choice of node in
:mod:`.candidates`, PodDisruptionBudgets in :mod:`.budgets`, evictions in :mod:`.evict`."""

from __future__ import annotations

from vgpu_scheduler.plugins.preemption.default_preemption import DefaultPreemption

__all__ = ["DefaultPreemption"]

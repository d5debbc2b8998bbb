"""kube-scheduler's default plugins, reimplemented: one package per plugin, named after it
(``NodeAffinity`` is :mod:`.node_affinity`, ``DefaultPreemption`` :mod:`.default_preemption`).

Their contract is parity with kube-scheduler: each filters, scores, orders, preempts,
binds volumes and wakes pods as its namesake in ``pkg/scheduler/framework/plugins`` does,
in kube's words, so that a pod lands where kube-scheduler could have put it (tests/parity,
and tests/e2e/parity against a real kube-scheduler). A difference from kube is a bug,
unless it is one of the documented known differences (README "Known differences"). vgpu
reaches into them at two points only: the resources vgpu owns (``Config.owns_resource``)
never reach NodeResourcesFit, vgpu's plugins (:mod:`vgpu_scheduler.plugins.gpu`) account
them; and DefaultPreemption holds a preemptor's GPU slices, which it asks the framework
for (``CycleState.claim_on``).
"""

from __future__ import annotations

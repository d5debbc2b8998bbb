"""Where a GPU pod's time goes: one histogram for every step of its path.

Every component exports :data:`METRIC` with a ``step`` label and the same
:data:`BUCKETS`, so that one query (``sum by (le, step) (rate(..._bucket[5m]))``) sets the
steps side by side, whichever component measured them:

=====================  ===========  ==================================================
step                   measured by  from → to
=====================  ===========  ==================================================
``webhook_decision``   webhook      AdmissionReview received → answer ready
``queue_wait``         scheduler    pod ready in the active queue → popped for an attempt
``scheduling_cycle``   scheduler    attempt start → node chosen, or refused (one per attempt)
``bind``               scheduler    binding call start → answer
``bind_to_allocate``   node agent   ``vgpu.io/bind-time`` → the pod's last Allocate answered
=====================  ===========  ==================================================

``bind_to_allocate`` compares the scheduler's clock (bind-time) with the node's, so clock
skew between the two shows up in it; it includes the kubelet's admission of the pod.
"""

from __future__ import annotations

METRIC = "vgpu_step_duration_seconds"
HELP = ("Time a GPU pod spends in each step of its path (webhook_decision, queue_wait, "
        "scheduling_cycle, bind, bind_to_allocate), same buckets for every step")
LABEL = "step"

WEBHOOK_DECISION = "webhook_decision"
QUEUE_WAIT = "queue_wait"
SCHEDULING_CYCLE = "scheduling_cycle"
BIND = "bind"
BIND_TO_ALLOCATE = "bind_to_allocate"
STEPS = (WEBHOOK_DECISION, QUEUE_WAIT, SCHEDULING_CYCLE, BIND, BIND_TO_ALLOCATE)

#: From half a millisecond (an admission decision, a scheduling cycle) to ten minutes (a
#: pod queued until a GPU frees up, an image pull before Allocate).
BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
           10.0, 30.0, 60.0, 120.0, 300.0, 600.0)

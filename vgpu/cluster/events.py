"""The core/v1 Event a component records about an object, as the real adapter POSTs it.

``vgpu why`` reads them back with ``list("events", Selector(involved_name=...))``. The
in-memory cluster keeps what ``record_event`` is given apart, counted by content
(:meth:`MemoryCluster.events`, which the simulator's thousands of attempts would otherwise
turn into as many objects and watch events), so its ``list("events")`` shows only Event
objects created through the port, such as tests make with this function.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from dataclasses import dataclass
from typing import Literal

from vgpu import meta, times
from vgpu.cluster.port import Obj

#: The API server refuses longer messages.
MAX_MESSAGE = 1024


@dataclass(frozen=True)
class RecordedEvent:
    """A Kubernetes Event as the in-memory cluster keeps it."""

    kind: str
    namespace: str
    name: str
    type: str
    reason: str
    message: str
    component: str
    count: int = 1


def event_object(obj: Obj, event_type: Literal["Normal", "Warning"], reason: str,
                 message: str, component: str, *, now: dt.datetime | None = None) -> Obj:
    name = meta.name(obj)
    namespace = meta.namespace(obj, "default")
    stamp = times.format_time(now or dt.datetime.now(dt.UTC))
    return {
        "apiVersion": "v1", "kind": "Event",
        # client-go's naming: the names sort by creation time, as kubectl's listing does.
        "metadata": {"name": f"{name or 'object'}.{time.time_ns():x}",
                     "namespace": namespace},
        "involvedObject": {"apiVersion": "v1", "kind": obj.get("kind") or "Pod",
                           "name": name, "namespace": namespace,
                           "uid": meta.uid(obj),
                           "resourceVersion": meta.resource_version(obj)},
        "type": event_type, "reason": reason, "message": message[:MAX_MESSAGE],
        "source": {"component": component}, "reportingComponent": component,
        "reportingInstance": os.environ.get("HOSTNAME", component),
        "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
    }

"""The API requests of one burst, as the API server counts them (its
``apiserver_request_total``), per bound pod and by kind: what each scheduler, the agents
and the creating client wrote for it."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

#: Requests that change something, as the API server's metric names their verbs.
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE", "CREATE", "UPDATE", "APPLY"})


def counts(kube: Any) -> Counter[str]:
    """Every request the API server has served so far, by ``VERB resource[/subresource]``."""
    status, body = kube.transport.call("GET", "/metrics", query=[], body=None,
                                       content_type="application/json", timeout=30)
    if status != 200:
        raise SystemExit(f"GET /metrics from the API server: HTTP {status}")
    out: Counter[str] = Counter()
    for family in text_string_to_metric_families(body.decode()):
        if family.name != "apiserver_request":
            continue
        for sample in family.samples:
            if not sample.name.endswith("_total"):
                continue
            labels = sample.labels
            sub = labels.get("subresource") or ""
            kind = f"{labels.get('verb', '')} {labels.get('resource', '')}"
            out[kind + (f"/{sub}" if sub else "")] += int(sample.value)
    return out


def settled(kube: Any, quiet: float = 1.5, limit: float = 20.0) -> Counter[str]:
    """:func:`counts` once no write has been added for ``quiet`` seconds (the schedulers'
    events go out from queues of their own, after the burst's last binding)."""
    deadline = time.monotonic() + limit
    last = counts(kube)
    while time.monotonic() < deadline:
        time.sleep(quiet)
        now = counts(kube)
        if {k: v for k, v in now.items() if k.split(" ", 1)[0] in WRITES} == {
                k: v for k, v in last.items() if k.split(" ", 1)[0] in WRITES}:
            return now
        last = now
    return last


def per_pod(before: Mapping[str, int], after: Mapping[str, int], pods: int
            ) -> dict[str, Any]:
    """The writes of the burst per bound pod, by kind, and their sum."""
    writes = {kind: (after.get(kind, 0) - before.get(kind, 0)) / pods
              for kind in after if kind.split(" ", 1)[0] in WRITES}
    writes = {k: round(v, 3) for k, v in sorted(writes.items()) if v > 0}
    return {"writes_per_pod": writes, "writes_per_pod_total": round(sum(writes.values()), 3)}

"""The kube-scheduler style one-line answer to "why is my pod pending"."""

from __future__ import annotations

from collections import Counter

from scheduler.framework.diagnosis import Diagnosis


def summarize(diagnosis: Diagnosis) -> str:
    """``0/12 nodes are available: 7 insufficient GPU memory, 5 GPU type excluded.``

    Each node counts once per distinct reason it gave; reasons are sorted by how many
    nodes gave them, then alphabetically, so the message is stable across attempts.
    """
    head = f"0/{diagnosis.total} nodes are available"
    if diagnosis.pod_status is not None:
        reason = diagnosis.pod_status.message or diagnosis.pod_status.code.name.lower()
        return f"{head}: {reason.rstrip('.')}."
    counts: Counter[str] = Counter()
    for status, n in diagnosis.counted():
        for reason in dict.fromkeys(status.reasons or (status.code.name.lower(),)):
            counts[reason] += n
    if not counts:
        return f"{head}."
    parts = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return f"{head}: " + ", ".join(f"{n} {reason}" for reason, n in parts) + "."

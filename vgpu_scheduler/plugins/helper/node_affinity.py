"""Whether a node's labels and name satisfy node selector terms (kube's
``component-helpers/scheduling/corev1/nodeaffinity``): what NodeAffinity filters on, what
PodTopologySpread counts nodes by, and what a PersistentVolume's node affinity means to
VolumeBinding.

Terms are ORed, the requirements of a term ANDed; operators In, NotIn, Exists,
DoesNotExist, Gt, Lt on labels, and In/NotIn on the ``metadata.name`` field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from vgpu_scheduler.framework.objects import Requirement, SelectorTerm


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return None


def requirement_matches(req: Requirement, value: str | None) -> bool:
    """``value`` is the label's value, None when the node lacks the label."""
    op = req.operator
    if op == "In":
        return value is not None and value in req.values
    if op == "NotIn":
        return value is None or value not in req.values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    have, want = _int(value), _int(req.values[0] if req.values else None)
    if have is None or want is None:
        return False
    return have > want if op == "Gt" else have < want


def term_matches(term: SelectorTerm, labels: Mapping[str, str], node_name: str) -> bool:
    if not term.expressions and not term.fields:
        return False  # an empty term selects nothing, as in Kubernetes
    for req in term.expressions:
        if not requirement_matches(req, labels.get(req.key)):
            return False
    for req in term.fields:
        value = node_name if req.key == "metadata.name" else None
        if not requirement_matches(req, value):
            return False
    return True


def matches(labels: Mapping[str, str], node_name: str, node_selector: Mapping[str, str],
            terms: Sequence[SelectorTerm] | None) -> bool:
    """A pod's ``spec.nodeSelector`` and required node affinity (kube's
    ``GetRequiredNodeAffinity(pod).Match(node)``)."""
    for key, value in node_selector.items():
        if labels.get(key) != value:
            return False
    if terms is None:
        return True
    return any(term_matches(t, labels, node_name) for t in terms)

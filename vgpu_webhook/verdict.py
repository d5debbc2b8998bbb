"""What the webhook answers on one admission request, ``/mutate`` and ``/validate`` alike:
allowed or denied, with a JSONPatch or a message. :func:`vgpu_webhook.review.answer` writes
it into the AdmissionReview response; the outcome is what the metrics count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from vgpu_webhook.patch import Op

Outcome = Literal["skipped", "unchanged", "mutated", "denied"]


@dataclass(frozen=True)
class AdmissionVerdict:
    """What to answer. ``code`` is the HTTP status the API server reports for a denial."""

    allowed: bool
    outcome: Outcome
    patch: tuple[Op, ...] = ()
    message: str = ""
    code: int = 200
    #: What the user should know about an admitted pod (where vgpu reads it otherwise
    #: than HAMi): the AdmissionReview's ``warnings``, which kubectl prints.
    warnings: tuple[str, ...] = ()


def allow(outcome: Outcome, message: str, warnings: tuple[str, ...] = ()) -> AdmissionVerdict:
    """Let the object through as it is."""
    return AdmissionVerdict(allowed=True, outcome=outcome, message=message, warnings=warnings)


def mutated(patch: tuple[Op, ...], warnings: tuple[str, ...] = ()) -> AdmissionVerdict:
    """Let the object through with ``patch`` applied."""
    return AdmissionVerdict(allowed=True, outcome="mutated", patch=patch,
                            message="GPU pod mutated", warnings=warnings)


def deny(message: str, code: int = 400) -> AdmissionVerdict:
    """Refuse the object; ``message`` is what the user sees, so it says what to do."""
    return AdmissionVerdict(allowed=False, outcome="denied", message=message, code=code)

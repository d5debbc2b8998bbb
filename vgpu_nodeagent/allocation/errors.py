"""What an Allocate is refused with: the gRPC status code and the error carrying it."""

from __future__ import annotations

import enum

from vgpu.cluster.port import Obj
from vgpu.errors import VgpuError
from vgpu.pods import pod_key


class Code(enum.Enum):
    """The gRPC status an Allocate failure is answered with."""

    FAILED_PRECONDITION = "FAILED_PRECONDITION"  # nothing to allocate for (yet)
    INVALID_ARGUMENT = "INVALID_ARGUMENT"  # the request does not fit the in-flight pod
    PERMISSION_DENIED = "PERMISSION_DENIED"  # the request is a pod's vgpu did not place
    RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"  # the GPU has no room left for the grant


class AllocateError(VgpuError):
    def __init__(self, code: Code, message: str) -> None:
        super().__init__(message)
        self.code = code


class Refused(AllocateError):
    """The request is the own of ``pod``, which no vgpu scheduler placed: serving it would
    hand it the grant of a pod that was."""

    def __init__(self, pod: Obj, reason: str) -> None:
        super().__init__(Code.PERMISSION_DENIED, f"pod {pod_key(pod)}: {reason}")
        self.pod = pod
        self.reason = reason


class Unservable(AllocateError):
    """The request is for ``pod``, which cannot be served (its assignment unreadable, or no
    container of it fits): the pod has failed."""

    def __init__(self, pod: Obj, reason: str) -> None:
        super().__init__(Code.INVALID_ARGUMENT, f"pod {pod_key(pod)}: {reason}")
        self.pod = pod
        self.reason = reason


class Overcommitted(AllocateError):
    """The grant for ``pod`` would take a GPU past what it has, counting what this agent
    served: the pod has failed, so that no GPU is over-committed (issue 36)."""

    def __init__(self, pod: Obj, reason: str) -> None:
        super().__init__(Code.RESOURCE_EXHAUSTED, f"pod {pod_key(pod)}: {reason}")
        self.pod = pod
        self.reason = reason

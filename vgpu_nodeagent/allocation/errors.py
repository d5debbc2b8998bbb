"""What an Allocate is refused with: the gRPC status code and the error carrying it."""

from __future__ import annotations

import enum

from vgpu.errors import VgpuError


class Code(enum.Enum):
    """The gRPC status an Allocate failure is answered with."""

    FAILED_PRECONDITION = "FAILED_PRECONDITION"  # nothing to allocate for (yet)
    INVALID_ARGUMENT = "INVALID_ARGUMENT"  # the request does not fit the in-flight pod
    PERMISSION_DENIED = "PERMISSION_DENIED"  # the request is a pod's vgpu did not place


class AllocateError(VgpuError):
    def __init__(self, code: Code, message: str) -> None:
        super().__init__(message)
        self.code = code

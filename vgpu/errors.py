"""The one exception tree of the project.

Every error a user or an operator can cause derives from :class:`VgpuError`, so the
edges (CLI, webhook handler, gRPC servicer) catch one type and turn it into a clear
message instead of a traceback.
"""

from __future__ import annotations


class VgpuError(Exception):
    """Base of every error vgpu raises on purpose."""


class ConfigError(VgpuError):
    """A configuration file, key or value is wrong."""


class RequestError(VgpuError):
    """A pod's GPU request is malformed or impossible; the message is meant for its author."""


class QuantityError(RequestError):
    """A Kubernetes quantity string could not be parsed."""


class CodecError(VgpuError):
    """An annotation (node inventory, pod assignment, ...) is malformed."""


class DiscoveryError(VgpuError):
    """GPU discovery failed (no NVML, unreadable fake-device file, ...)."""


class ClusterError(VgpuError):
    """A cluster operation failed; adapters map their transport errors onto these."""


class NotFoundError(ClusterError):
    """The object does not exist (HTTP 404)."""


class ConflictError(ClusterError):
    """A write lost a race: stale resourceVersion or the object already exists (HTTP 409)."""


class InvalidError(ClusterError):
    """The request's content is refused: by the API server (HTTP 422), or before sending
    because it cannot apply (a namespace on a cluster-scoped resource, say)."""


class EvictionRefusedError(ClusterError):
    """An eviction the API server refused (HTTP 429): a PodDisruptionBudget allows no
    disruption of the pod now."""


class OutcomeUnknownError(ClusterError):
    """A write went out but no answer came back (the connection ended or timed out first):
    the server may have carried it out. It is never sent again by the transport; the
    caller reads what happened before acting on it as a failure."""


class GoneError(ClusterError):
    """A watch resourceVersion is too old (HTTP 410); the caller must re-list."""


class NotAvailableError(VgpuError):
    """A feature exists in the command line but is not built into this version."""


class LibraryError(VgpuError):
    """A library the node agent would hand to containers (HAMi-core's) was refused: not
    found, not the build the bundle names, or without the wrappers that enforce."""

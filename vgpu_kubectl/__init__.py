"""The kubectl plugin of vgpu: ``vgpu inspect`` and ``vgpu why``, also run as
``kubectl vgpu inspect`` and ``kubectl vgpu why``.

Read-only tools for people: each reads the cluster through the cluster port and builds a
pure report (:mod:`.inspect`, :mod:`.why` with :mod:`.closest`), then renders it
(:mod:`.why_render`; inspect renders its own). :mod:`.plugin` is the ``kubectl-vgpu``
command kubectl finds on PATH.
"""

from __future__ import annotations

"""Helpers the plugins share (kube-scheduler's ``plugins/helper``): kube's default score
normalization (:mod:`.normalize_score`), the snapshot's pods grouped by labels and affinity
terms for the plugins that count pods across nodes (:mod:`.pod_index`), and the parsed,
assume-aware view of PersistentVolumes, PersistentVolumeClaims, StorageClasses and CSINodes
the volume plugins read (:mod:`.volume_objects`, :mod:`.volume_store`,
:mod:`.volume_claims`)."""

from __future__ import annotations

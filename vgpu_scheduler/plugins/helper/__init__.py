"""Helpers the plugins share (kube-scheduler's ``plugins/helper``, and the
``component-helpers`` its plugins import): kube's default score normalization
(:mod:`.normalize_score`), node selector terms matched against a node
(:mod:`.node_affinity`), the taint that keeps a pod off a node (:mod:`.taints`), the
snapshot's pods grouped by labels and affinity terms for the plugins that count pods across
nodes (:mod:`.pod_index`), and the parsed, assume-aware view of PersistentVolumes,
PersistentVolumeClaims, StorageClasses and CSINodes the volume plugins read
(:mod:`.volume_objects`, :mod:`.volume_store`, :mod:`.volume_claims`)."""

from __future__ import annotations

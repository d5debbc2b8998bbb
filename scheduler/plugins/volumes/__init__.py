"""The volume plugins, as kube-scheduler's: VolumeRestrictions, NodeVolumeLimits,
VolumeBinding and VolumeZone, over PersistentVolumes, PersistentVolumeClaims,
StorageClasses and CSINodes watched through the cluster port (:mod:`.store`)."""

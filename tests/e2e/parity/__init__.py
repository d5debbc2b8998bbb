"""The same scenarios under kube-scheduler v1.20 and under vgpu-scheduler."""

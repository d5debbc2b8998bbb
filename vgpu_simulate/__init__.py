"""Replay of workload traces through the vgpu scheduler (``vgpu simulate``)."""

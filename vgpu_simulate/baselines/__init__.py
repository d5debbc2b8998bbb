"""The FGD paper's placement policies (Weng et al., USENIX ATC'23), as scheduler plugins.

Research baselines that ``vgpu simulate`` compares ours with: Random, DotProd,
GpuClustering, GpuPacking, BestFit and FGD itself. The scheduler host never imports them;
the simulator adds them to the plugin registry of the profiles it builds.
"""

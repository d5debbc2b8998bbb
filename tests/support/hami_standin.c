/* A stand-in for HAMi-core's libvgpu.so in tests: the functions the node agent requires it
 * to export (vgpu_nodeagent/isolation/hami_bundle.py, REQUIRED_WRAPPERS), doing nothing.
 * tests/support/hami_standin.py compiles it with gcc: as is (a build that exports its
 * wrappers, as HAMi-core's Debug build does), with -fvisibility=hidden (as its Release
 * build: nothing exported), or with -DOMIT_<name> to leave one wrapper out. Not HAMi-core's
 * code: only the names are its, and they are the CUDA driver's and NVML's. */

#define STANDIN_VERSION "vgpu-standin " STANDIN_TAG
#ifndef STANDIN_TAG
#define STANDIN_TAG "0"
#endif

const char *vgpu_standin_version(void) { return STANDIN_VERSION; }

#ifndef OMIT_cuInit
int cuInit(unsigned int flags) { (void)flags; return 0; }
#endif
#ifndef OMIT_cuMemAlloc_v2
int cuMemAlloc_v2(void *ptr, unsigned long size) { (void)ptr; (void)size; return 0; }
#endif
#ifndef OMIT_cuMemGetInfo_v2
int cuMemGetInfo_v2(unsigned long *free, unsigned long *total) {
    (void)free; (void)total; return 0;
}
#endif
#ifndef OMIT_cuDeviceTotalMem_v2
int cuDeviceTotalMem_v2(unsigned long *bytes, int dev) { (void)bytes; (void)dev; return 0; }
#endif
#ifndef OMIT_cuLaunchKernel
int cuLaunchKernel(void *f) { (void)f; return 0; }
#endif
#ifndef OMIT_cuGetProcAddress
int cuGetProcAddress(const char *symbol, void **pfn, int version, unsigned long flags) {
    (void)symbol; (void)pfn; (void)version; (void)flags; return 0;
}
#endif
#ifndef OMIT_cuGetProcAddress_v2
int cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long flags,
                        void *status) {
    (void)symbol; (void)pfn; (void)version; (void)flags; (void)status; return 0;
}
#endif
#ifndef OMIT_nvmlDeviceGetMemoryInfo
int nvmlDeviceGetMemoryInfo(void *device, void *memory) { (void)device; (void)memory; return 0; }
#endif

/* usage_nvml.c: NVML's few calls that `memscope usage --devices` needs (usage_nvml.h), through
 * dlopen: the declarations are NVML's (nvml.h) by value, so no NVIDIA header is needed to
 * build. Tested with the test NVML beside the test driver (tests/cuda/ms_test_libnvml.c), found
 * through LD_LIBRARY_PATH as the real one is. Workload: a few devices, ten reads a second. */
#include "usage_nvml.h"

#include "common/ms_error.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

/* nvml.h's nvmlMemory_t and nvmlProcessInfo_t (v3: the _v3 call's) */
struct nvml_memory {
    unsigned long long total, free, used;
};
struct nvml_process {
    unsigned int pid;
    unsigned long long used;
    unsigned int gi, ci;
};

int usage_nvml_open(struct usage_nvml *n, char *why, size_t len)
{
    memset(n, 0, sizeof *n);
    n->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!n->lib) {
        snprintf(why, len, "libnvidia-ml.so.1 not found (no NVIDIA driver)");
        return -ENOENT;
    }
    n->init = (int (*)(void))dlsym(n->lib, "nvmlInit_v2");
    n->count = (int (*)(unsigned *))dlsym(n->lib, "nvmlDeviceGetCount_v2");
    n->by_index = (int (*)(unsigned, void **))dlsym(n->lib, "nvmlDeviceGetHandleByIndex_v2");
    n->memory = (int (*)(void *, void *))dlsym(n->lib, "nvmlDeviceGetMemoryInfo");
    n->processes = (int (*)(void *, unsigned *, void *))dlsym(
        n->lib, "nvmlDeviceGetComputeRunningProcesses_v3");
    int rc = !n->init || !n->count || !n->by_index || !n->memory ? -ENOSYS : n->init();
    if (rc != 0) {
        if (rc == -ENOSYS)
            snprintf(why, len, "libnvidia-ml.so.1 lacks the calls memscope needs");
        else
            snprintf(why, len, "nvmlInit failed (NVML error %d)", rc);
        dlclose(n->lib);
        memset(n, 0, sizeof *n);
        return rc == -ENOSYS ? -ENOSYS : -EIO;
    }
    return 0;
}

int usage_nvml_count(struct usage_nvml *n)
{
    unsigned c = 0;
    return n->count(&c) == 0 ? (int)c : -EIO;
}

int usage_nvml_read(struct usage_nvml *n, unsigned d, const pid_t *pids, size_t npids,
                    uint64_t *shares, struct usage_nvml_sample *s)
{
    void *dev;
    struct nvml_memory m;
    if (n->by_index(d, &dev) != 0 || n->memory(dev, &m) != 0)
        return -EIO;
    s->used = m.used;
    s->free = m.free;
    s->total = m.total;
    for (size_t i = 0; i < npids; i++)
        shares[i] = 0;
    if (!npids || !n->processes)
        return 0;
    static struct nvml_process procs[256];
    unsigned cnt = 256;
    if (n->processes(dev, &cnt, procs) != 0)
        return 0; /* the shares stay unknown (0) */
    for (unsigned k = 0; k < cnt && k < 256; k++)
        for (size_t i = 0; i < npids; i++)
            if ((pid_t)procs[k].pid == pids[i])
                shares[i] += procs[k].used;
    return 0;
}

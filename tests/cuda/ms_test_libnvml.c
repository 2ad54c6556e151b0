/* ms_test_libnvml.c: memscope's TEST NVML. Built as libnvidia-ml.so.1 beside the test driver
 * (build/tests/cuda/cuda-test-driver/, never installed), it answers the NVML calls memscope's
 * agent makes (src/agent/cuda.c, cuda_sample_usage) from the test driver's own state: device
 * d+1 on PCI bus d+1, its used bytes and capacity, and one process on each device that has
 * memory in use, the calling process, using all of it (the test driver serves one process).
 * MS_TEST_NVML_CONTEXT_BYTES=N (tests only) adds N bytes that no driver call allocated to each
 * device with memory in use, the process's and the device's: what a CUDA context holds.
 * Without the test driver in the process (`memscope usage --devices`, which loads no driver),
 * MS_TEST_NVML_DEVICES="USED:TOTAL,USED:TOTAL,..." gives the devices (NVML indexes 0, 1, ...)
 * and MS_TEST_NVML_PID the one process listed on each device with memory in use, using all of
 * it. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define API __attribute__((visibility("default")))
typedef int nvmlReturn_t;
struct nvml_memory {
    unsigned long long total, free, used;
};
struct nvml_process {
    unsigned int pid;
    unsigned long long used;
    unsigned int gi, ci;
};

static uint64_t (*used_of)(int, uint64_t *);
static int inited;

/* The device's used bytes as the test driver says, plus the context bytes when any. */
static uint64_t used_with_context(int d, uint64_t *total)
{
    uint64_t used = used_of(d, total);
    const char *e = getenv("MS_TEST_NVML_CONTEXT_BYTES");
    return used && e ? used + strtoull(e, NULL, 10) : used;
}

/* The device figures of MS_TEST_NVML_DEVICES: device d's used bytes (*total its total), 0 for
 * a device not listed. */
static int env_count(void)
{
    const char *e = getenv("MS_TEST_NVML_DEVICES");
    int n = e && *e ? 1 : 0;
    for (; e && *e; e++)
        n += *e == ',';
    return n;
}

static uint64_t env_used(int d, uint64_t *total)
{
    const char *e = getenv("MS_TEST_NVML_DEVICES");
    for (int i = 0; e && i < d; i++)
        e = strchr(e, ',') ? strchr(e, ',') + 1 : NULL;
    unsigned long long u = 0, t = 0;
    if (!e || sscanf(e, "%llu:%llu", &u, &t) != 2)
        u = t = 0;
    if (total)
        *total = t;
    return u;
}

API nvmlReturn_t nvmlInit_v2(void)
{
    if (getenv("MS_TEST_NVML_DEVICES")) {
        used_of = env_used;
        inited = 1;
        return 0;
    }
    used_of = (uint64_t(*)(int, uint64_t *))dlsym(RTLD_DEFAULT, "ms_test_cuda_used");
    if (!used_of) {
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
        if (h)
            used_of = (uint64_t(*)(int, uint64_t *))dlsym(h, "ms_test_cuda_used");
    }
    inited = used_of != NULL;
    return inited ? 0 : 9; /* NVML_ERROR_DRIVER_NOT_LOADED */
}

API nvmlReturn_t nvmlShutdown(void)
{
    inited = 0;
    return 0;
}

API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n)
{
    if (!inited || !n)
        return 1;
    *n = used_of == env_used ? (unsigned)env_count() : 2;
    return 0;
}

API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, void **dev)
{
    unsigned n;
    if (nvmlDeviceGetCount_v2(&n) != 0 || i >= n || !dev)
        return 2;
    *dev = (void *)(uintptr_t)(i + 1);
    return 0;
}

/* A handle is the device index + 1. */
API nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *bus, void **dev)
{
    unsigned dom, b, d, f;
    if (!inited)
        return 1; /* NVML_ERROR_UNINITIALIZED */
    if (!bus || sscanf(bus, "%x:%x:%x.%x", &dom, &b, &d, &f) != 4 || b == 0)
        return 2; /* NVML_ERROR_INVALID_ARGUMENT */
    *dev = (void *)(uintptr_t)b;
    return 0;
}

API nvmlReturn_t nvmlDeviceGetMemoryInfo(void *dev, struct nvml_memory *m)
{
    uint64_t total = 0;
    if (!inited || !dev || !m)
        return 2;
    m->used = used_with_context((int)(uintptr_t)dev - 1, &total);
    m->total = total;
    m->free = total - m->used;
    return 0;
}

API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(void *dev, unsigned int *n,
                                                         struct nvml_process *p)
{
    if (!inited || !dev || !n)
        return 2;
    uint64_t used = used_with_context((int)(uintptr_t)dev - 1, NULL);
    if (!used) {
        *n = 0;
        return 0;
    }
    if (*n < 1 || !p) {
        *n = 1;
        return 7; /* NVML_ERROR_INSUFFICIENT_SIZE */
    }
    memset(p, 0, sizeof *p);
    const char *pid = getenv("MS_TEST_NVML_PID");
    p->pid = used_of == env_used && pid ? (unsigned int)atoi(pid) : (unsigned int)getpid();
    p->used = used;
    *n = 1;
    return 0;
}

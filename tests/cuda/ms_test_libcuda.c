/* ms_test_libcuda.c: memscope's TEST DRIVER for the CUDA driver API. Built as libcuda.so.1 in
 * build/tests/cuda-test-driver/ for the tests only (never installed); it runs no kernel and
 * needs no GPU. It stands in for NVIDIA's driver so that memscope's CUDA hooks (src/agent/cuda.c)
 * are tested on the paths real programs use: exported symbols (-lcuda, dlopen + dlsym) and
 * cuGetProcAddress(_v2) by base name, version and flags, as cudart asks.
 *
 * Semantics kept real where memscope depends on them:
 *   - MEMSCOPE_TEST_CUDA_DEVICES devices (default 2), each with MEMSCOPE_TEST_CUDA_CAPACITY bytes
 *     (default 16 GiB); an allocation past the capacity fails with CUDA_ERROR_OUT_OF_MEMORY (2).
 *   - device memory lives in a per-device PROT_NONE address range (like device memory, the host
 *     cannot touch it); freed addresses are reused.
 *   - primary contexts per device and created contexts, current per thread; a call that needs a
 *     context fails with CUDA_ERROR_INVALID_CONTEXT without one. Destroying a context frees what
 *     was allocated in it (as the driver does).
 *   - stream-ordered pools: cuMemFreeAsync returns the memory when its stream is synchronized.
 *   - VMM: cuMemCreate makes a memfd, cuMemAddressReserve reserves address space, cuMemMap maps
 *     the memfd there and cuMemSetAccess makes it readable and writable: real memory.
 *   - managed and pinned host memory is host memory; IPC handles name a block and open it at a
 *     new address in another process.
 * The driver's own memory comes from raw mmap syscalls and static tables, so that it adds nothing
 * to what memscope records of the program's heap and mmap. With MEMSCOPE_TEST_CUDA_PROC_ALIASES=1,
 * cuGetProcAddress hands out functions that are not the exported ones (same behaviour), as a
 * driver may. Built with MS_TEST_CUDA_OLD (as cuda-test-driver-old/libcuda.so.1) it is a driver
 * of the CUDA 11.3 era: no cuGetProcAddress_v2, cuLaunchKernelEx, cuFuncGetName,
 * cuMemGetAddressRange, cuDeviceGetMemPool or cuMemPoolGetAttribute. */
#include "agent/cuda_driver.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define API __attribute__((visibility("default")))
#define MAX_DEVICES 8
#define MAX_LIVE (1u << 20)   /* hash slots for live device blocks */
#define MAX_FREE 4096         /* reusable freed ranges per device */
#define MAX_STREAMS 256
#define MAX_CTX 64
#define MAX_HANDLES 4096
#define MAX_FUNCS 256
#define GRANULARITY (2u << 20)

typedef ms_CUresult R;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int ndev = -1;
static uint64_t capacity;
static int initialized;

struct ctx { int used, dev, primary, refs; };
static struct ctx ctxs[MAX_CTX]; /* 0..MAX_DEVICES-1: primary contexts */
static __thread struct ctx *current;

struct device {
    uintptr_t base, end, cursor; /* the PROT_NONE address range, bump cursor */
    uint64_t used;               /* bytes allocated (capacity check) */
    uint64_t pool_used;          /* of which stream-ordered, live or not yet synchronized */
    uintptr_t free_addr[MAX_FREE];
    uint64_t free_size[MAX_FREE];
    unsigned nfree;
};
static struct device devs[MAX_DEVICES];

enum { K_DEVICE = 1, K_MANAGED, K_HOST, K_REGISTERED, K_IPC, K_ASYNC };
struct live {
    uintptr_t addr;   /* 0: empty; 1: deleted */
    uint64_t size;
    int dev, kind, pending; /* pending: freed on stream `pending - 1`, not yet synchronized */
    struct ctx *ctx;
};
static struct live *live; /* MAX_LIVE slots, mapped on first use */

struct stream { int used; int dev; };
static struct stream streams[MAX_STREAMS];

struct handle { int used, dev, fd, mapped, released; uint64_t size; };
static struct handle handles[MAX_HANDLES];

static char func_names[MAX_FUNCS][64];
static int nfuncs;

static void *raw_mmap(void *a, size_t n, int prot, int flags, int fd, off_t off)
{
    long r = syscall(SYS_mmap, a, n, prot, flags, fd, off);
    return r == -1 ? MAP_FAILED : (void *)r;
}

static uint64_t env_u64(const char *name, uint64_t def)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return def;
    char *e;
    unsigned long long v = strtoull(s, &e, 10);
    return *e ? def : v;
}

/* Called with lock held. */
static void setup(void)
{
    if (ndev >= 0)
        return;
    ndev = (int)env_u64("MEMSCOPE_TEST_CUDA_DEVICES", 2);
    if (ndev > MAX_DEVICES)
        ndev = MAX_DEVICES;
    capacity = env_u64("MEMSCOPE_TEST_CUDA_CAPACITY", 16ull << 30);
    for (int d = 0; d < ndev; d++) {
        uint64_t span = 4 * capacity + (64u << 20);
        void *p = raw_mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED)
            abort();
        devs[d].base = devs[d].cursor = ((uintptr_t)p + 0xfffff) & ~(uintptr_t)0xfffff;
        devs[d].end = (uintptr_t)p + span;
    }
    live = raw_mmap(NULL, MAX_LIVE * sizeof *live, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (live == MAP_FAILED)
        abort();
}

static size_t slot_of(uintptr_t a)
{
    return (size_t)((a * 0x9e3779b97f4a7c15ull) >> 44) & (MAX_LIVE - 1);
}

static struct live *find(uintptr_t a)
{
    for (size_t i = slot_of(a), k = 0; k < MAX_LIVE; k++, i = (i + 1) & (MAX_LIVE - 1)) {
        if (live[i].addr == a)
            return &live[i];
        if (live[i].addr == 0)
            return NULL;
    }
    return NULL;
}

static struct live *insert(uintptr_t a)
{
    for (size_t i = slot_of(a), k = 0; k < MAX_LIVE; k++, i = (i + 1) & (MAX_LIVE - 1))
        if (live[i].addr <= 1) {
            live[i] = (struct live){.addr = a};
            return &live[i];
        }
    return NULL;
}

static uint64_t round_up(uint64_t n, uint64_t a)
{
    return (n + a - 1) / a * a;
}

/* A device address range of n bytes on device d, or 0 when the device is full. */
static uintptr_t dev_alloc(int d, uint64_t n)
{
    struct device *v = &devs[d];
    uint64_t r = round_up(n ? n : 1, 512);
    if (v->used + r > capacity)
        return 0;
    for (unsigned i = v->nfree; i-- > 0;) {
        if (v->free_size[i] == r) {
            uintptr_t a = v->free_addr[i];
            v->free_addr[i] = v->free_addr[--v->nfree];
            v->free_size[i] = v->free_size[v->nfree];
            v->used += r;
            return a;
        }
    }
    if (v->cursor + r > v->end)
        return 0;
    uintptr_t a = v->cursor;
    v->cursor += r;
    v->used += r;
    return a;
}

static void dev_release(int d, uintptr_t a, uint64_t n)
{
    struct device *v = &devs[d];
    uint64_t r = round_up(n ? n : 1, 512);
    v->used -= r;
    if (v->nfree < MAX_FREE) {
        v->free_addr[v->nfree] = a;
        v->free_size[v->nfree++] = r;
    }
}

static void block_release(struct live *b)
{
    if (b->kind == K_DEVICE || b->kind == K_ASYNC)
        dev_release(b->dev, b->addr, b->size);
    if (b->kind == K_ASYNC)
        devs[b->dev].pool_used -= round_up(b->size ? b->size : 1, 512);
    else if (b->kind == K_MANAGED || b->kind == K_HOST)
        syscall(SYS_munmap, b->addr, round_up(b->size, 4096));
    b->addr = 1;
}

#define LOCKED(body)                   \
    do {                               \
        pthread_mutex_lock(&lock);     \
        setup();                       \
        R r_ = (body);                 \
        pthread_mutex_unlock(&lock);   \
        return r_;                     \
    } while (0)

/* ---- init, devices, contexts ---- */

API R cuInit(unsigned flags)
{
    (void)flags;
    pthread_mutex_lock(&lock);
    setup();
    initialized = 1;
    pthread_mutex_unlock(&lock);
    return MS_CUDA_SUCCESS;
}

API R cuDriverGetVersion(int *v)
{
    if (!v)
        return MS_CUDA_ERROR_INVALID_VALUE;
    *v = 13000;
    return MS_CUDA_SUCCESS;
}

API R cuDeviceGetCount(int *n)
{
    if (!initialized)
        return MS_CUDA_ERROR_NOT_INITIALIZED;
    *n = ndev;
    return MS_CUDA_SUCCESS;
}

API R cuDeviceGet(ms_CUdevice *d, int ordinal)
{
    if (!initialized)
        return MS_CUDA_ERROR_NOT_INITIALIZED;
    if (ordinal < 0 || ordinal >= ndev)
        return MS_CUDA_ERROR_INVALID_DEVICE;
    *d = ordinal;
    return MS_CUDA_SUCCESS;
}

API R cuDeviceTotalMem_v2(size_t *bytes, ms_CUdevice d)
{
    if (d < 0 || d >= ndev)
        return MS_CUDA_ERROR_INVALID_DEVICE;
    *bytes = capacity;
    return MS_CUDA_SUCCESS;
}

/* Device d sits on PCI bus d + 1 (what NVML, the test one too, is asked by). */
API R cuDeviceGetPCIBusId(char *bus, int len, ms_CUdevice d)
{
    if (!bus || len < 13 || d < 0 || d >= ndev)
        return MS_CUDA_ERROR_INVALID_VALUE;
    snprintf(bus, (size_t)len, "0000:%02x:00.0", d + 1);
    return MS_CUDA_SUCCESS;
}

/* For the test NVML (ms_test_libnvml.c): the bytes in use on device d, and its capacity. */
API uint64_t ms_test_cuda_used(int d, uint64_t *total)
{
    pthread_mutex_lock(&lock);
    setup();
    uint64_t u = d >= 0 && d < ndev ? devs[d].used : 0;
    pthread_mutex_unlock(&lock);
    if (total)
        *total = capacity;
    return u;
}

API R cuDevicePrimaryCtxRetain(ms_CUcontext *c, ms_CUdevice d)
{
    if (!initialized)
        return MS_CUDA_ERROR_NOT_INITIALIZED;
    if (d < 0 || d >= ndev)
        return MS_CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&lock);
    ctxs[d].used = ctxs[d].primary = 1;
    ctxs[d].dev = d;
    ctxs[d].refs++;
    pthread_mutex_unlock(&lock);
    *c = (ms_CUcontext)&ctxs[d];
    return MS_CUDA_SUCCESS;
}

API R cuDevicePrimaryCtxRelease_v2(ms_CUdevice d)
{
    if (d < 0 || d >= ndev)
        return MS_CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&lock);
    if (ctxs[d].refs > 0)
        ctxs[d].refs--;
    pthread_mutex_unlock(&lock);
    return MS_CUDA_SUCCESS;
}

API R cuCtxCreate_v2(ms_CUcontext *c, unsigned flags, ms_CUdevice d)
{
    (void)flags;
    if (!initialized)
        return MS_CUDA_ERROR_NOT_INITIALIZED;
    if (d < 0 || d >= ndev)
        return MS_CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&lock);
    for (int i = MAX_DEVICES; i < MAX_CTX; i++) {
        if (!ctxs[i].used) {
            ctxs[i] = (struct ctx){1, d, 0, 1};
            current = &ctxs[i];
            *c = (ms_CUcontext)&ctxs[i];
            pthread_mutex_unlock(&lock);
            return MS_CUDA_SUCCESS;
        }
    }
    pthread_mutex_unlock(&lock);
    return MS_CUDA_ERROR_OUT_OF_MEMORY;
}

/* Destroying a context frees the memory allocated in it. */
API R cuCtxDestroy_v2(ms_CUcontext c)
{
    struct ctx *x = (struct ctx *)c;
    if (x < ctxs + MAX_DEVICES || x >= ctxs + MAX_CTX || !x->used)
        return MS_CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < MAX_LIVE; i++)
        if (live[i].addr > 1 && live[i].ctx == x)
            block_release(&live[i]);
    x->used = 0;
    if (current == x)
        current = NULL;
    pthread_mutex_unlock(&lock);
    return MS_CUDA_SUCCESS;
}

API R cuCtxSetCurrent(ms_CUcontext c)
{
    current = (struct ctx *)c;
    return MS_CUDA_SUCCESS;
}

API R cuCtxGetCurrent(ms_CUcontext *c)
{
    *c = (ms_CUcontext)current;
    return MS_CUDA_SUCCESS;
}

API R cuCtxGetDevice(ms_CUdevice *d)
{
    if (!current || !current->used)
        return MS_CUDA_ERROR_INVALID_CONTEXT;
    *d = current->dev;
    return MS_CUDA_SUCCESS;
}

API R cuMemGetInfo_v2(size_t *free_b, size_t *total)
{
    if (!current || !current->used)
        return MS_CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&lock);
    *free_b = capacity - devs[current->dev].used;
    *total = capacity;
    pthread_mutex_unlock(&lock);
    return MS_CUDA_SUCCESS;
}

API R cuGetErrorName(ms_CUresult e, const char **s)
{
    switch (e) {
    case MS_CUDA_SUCCESS: *s = "CUDA_SUCCESS"; break;
    case MS_CUDA_ERROR_INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; break;
    case MS_CUDA_ERROR_OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case MS_CUDA_ERROR_INVALID_CONTEXT: *s = "CUDA_ERROR_INVALID_CONTEXT"; break;
    default: *s = "CUDA_ERROR_UNKNOWN"; break;
    }
    return MS_CUDA_SUCCESS;
}

/* ---- device memory ---- */

static R alloc_locked(ms_CUdeviceptr *dp, size_t n, int kind, int dev)
{
    if (!dp || n == 0)
        return MS_CUDA_ERROR_INVALID_VALUE;
    uintptr_t a;
    if (kind == K_MANAGED) {
        if (devs[dev].used + round_up(n, 512) > capacity)
            return MS_CUDA_ERROR_OUT_OF_MEMORY;
        void *p = raw_mmap(NULL, round_up(n, 4096), PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return MS_CUDA_ERROR_OUT_OF_MEMORY;
        a = (uintptr_t)p;
        devs[dev].used += round_up(n, 512);
    } else if (!(a = dev_alloc(dev, n))) {
        return MS_CUDA_ERROR_OUT_OF_MEMORY;
    }
    struct live *b = insert(a);
    if (!b)
        return MS_CUDA_ERROR_OUT_OF_MEMORY;
    b->size = n;
    b->dev = dev;
    b->kind = kind;
    b->ctx = current;
    *dp = a;
    return MS_CUDA_SUCCESS;
}

static R need_ctx(void)
{
    if (!initialized)
        return MS_CUDA_ERROR_NOT_INITIALIZED;
    return current && current->used ? MS_CUDA_SUCCESS : MS_CUDA_ERROR_INVALID_CONTEXT;
}

static R mem_alloc(ms_CUdeviceptr *dp, size_t n)
{
    R r = need_ctx();
    if (r)
        return r;
    LOCKED(alloc_locked(dp, n, K_DEVICE, current->dev));
}

API R cuMemAlloc_v2(ms_CUdeviceptr *dp, size_t n) { return mem_alloc(dp, n); }

/* What cuGetProcAddress hands out with MEMSCOPE_TEST_CUDA_PROC_ALIASES=1. */
static R alias_cuMemAlloc_v2(ms_CUdeviceptr *dp, size_t n) { return mem_alloc(dp, n); }

API R cuMemAllocPitch_v2(ms_CUdeviceptr *dp, size_t *pitch, size_t w, size_t h, unsigned elem)
{
    R r = need_ctx();
    if (r)
        return r;
    if (!pitch || (elem != 4 && elem != 8 && elem != 16))
        return MS_CUDA_ERROR_INVALID_VALUE;
    *pitch = round_up(w, 512);
    LOCKED(alloc_locked(dp, *pitch * h, K_DEVICE, current->dev));
}

API R cuMemAllocManaged(ms_CUdeviceptr *dp, size_t n, unsigned flags)
{
    (void)flags;
    R r = need_ctx();
    if (r)
        return r;
    LOCKED(alloc_locked(dp, n, K_MANAGED, current->dev));
}

static R free_locked(ms_CUdeviceptr p, int pending_ok)
{
    struct live *b = find(p);
    if (!b || (b->kind != K_DEVICE && b->kind != K_MANAGED && b->kind != K_ASYNC) ||
        (b->pending && !pending_ok))
        return MS_CUDA_ERROR_INVALID_VALUE;
    block_release(b);
    return MS_CUDA_SUCCESS;
}

API R cuMemFree_v2(ms_CUdeviceptr p)
{
    if (p == 0)
        return MS_CUDA_SUCCESS;
    LOCKED(free_locked(p, 0));
}

#ifndef MS_TEST_CUDA_OLD
API R cuMemGetAddressRange_v2(ms_CUdeviceptr *base, size_t *size, ms_CUdeviceptr p)
{
    pthread_mutex_lock(&lock);
    setup();
    struct live *b = find(p);
    if (b) {
        if (base)
            *base = b->addr;
        if (size)
            *size = b->size;
    }
    pthread_mutex_unlock(&lock);
    return b ? MS_CUDA_SUCCESS : MS_CUDA_ERROR_NOT_FOUND;
}
#endif

/* ---- streams and stream-ordered pools ---- */

API R cuStreamCreate(ms_CUstream *s, unsigned flags)
{
    (void)flags;
    R r = need_ctx();
    if (r)
        return r;
    pthread_mutex_lock(&lock);
    for (int i = 1; i < MAX_STREAMS; i++) {
        if (!streams[i].used) {
            streams[i] = (struct stream){1, current->dev};
            *s = (ms_CUstream)(uintptr_t)(0x5000 + i);
            pthread_mutex_unlock(&lock);
            return MS_CUDA_SUCCESS;
        }
    }
    pthread_mutex_unlock(&lock);
    return MS_CUDA_ERROR_OUT_OF_MEMORY;
}

/* Stream index of s: 0 for the default streams (NULL, legacy 1, per-thread 2), -1 if unknown. */
static int stream_index(ms_CUstream s)
{
    uintptr_t v = (uintptr_t)s;
    if (v <= 2)
        return 0;
    if (v > 0x5000 && v < 0x5000 + MAX_STREAMS && streams[v - 0x5000].used)
        return (int)(v - 0x5000);
    return -1;
}

/* Completes the frees queued on stream i (all streams when i < 0). Called with lock held. */
static void sync_locked(int i)
{
    for (size_t k = 0; k < MAX_LIVE; k++)
        if (live[k].addr > 1 && live[k].pending && (i < 0 || live[k].pending - 1 == i))
            block_release(&live[k]);
}

API R cuStreamSynchronize(ms_CUstream s)
{
    pthread_mutex_lock(&lock);
    int i = stream_index(s);
    if (i >= 0)
        sync_locked(i);
    pthread_mutex_unlock(&lock);
    return i >= 0 ? MS_CUDA_SUCCESS : MS_CUDA_ERROR_INVALID_HANDLE;
}

API R cuStreamDestroy_v2(ms_CUstream s)
{
    pthread_mutex_lock(&lock);
    int i = stream_index(s);
    if (i > 0) {
        sync_locked(i);
        streams[i].used = 0;
    }
    pthread_mutex_unlock(&lock);
    return i > 0 ? MS_CUDA_SUCCESS : MS_CUDA_ERROR_INVALID_HANDLE;
}

API R cuCtxSynchronize(void)
{
    pthread_mutex_lock(&lock);
    sync_locked(-1);
    pthread_mutex_unlock(&lock);
    return MS_CUDA_SUCCESS;
}

/* Pools: the handle is 0x7000 + device (default pools) or 0x7100 + device (created). */
API R cuDeviceGetDefaultMemPool(ms_CUmemoryPool *p, ms_CUdevice d)
{
    if (d < 0 || d >= ndev)
        return MS_CUDA_ERROR_INVALID_DEVICE;
    *p = (ms_CUmemoryPool)(uintptr_t)(0x7000 + d);
    return MS_CUDA_SUCCESS;
}

/* The device's current pool (this driver has one per device, its default one). */
#ifndef MS_TEST_CUDA_OLD
API R cuDeviceGetMemPool(ms_CUmemoryPool *p, ms_CUdevice d)
{
    return cuDeviceGetDefaultMemPool(p, d);
}
#endif

static int pool_device(ms_CUmemoryPool p);

/* A pool reserves device memory in 2 MiB chunks, as much as its blocks (live, or freed and not
 * yet synchronized) need, and gives back what it does not need at synchronization. */
#ifndef MS_TEST_CUDA_OLD
API R cuMemPoolGetAttribute(ms_CUmemoryPool p, unsigned attr, void *value)
{
    int d = pool_device(p);
    if (d < 0 || !value)
        return MS_CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    uint64_t used = devs[d].pool_used;
    pthread_mutex_unlock(&lock);
    if (attr == MS_CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)
        *(uint64_t *)value = round_up(used, GRANULARITY);
    else if (attr == MS_CU_MEMPOOL_ATTR_USED_MEM_CURRENT)
        *(uint64_t *)value = used;
    else
        return MS_CUDA_ERROR_INVALID_VALUE;
    return MS_CUDA_SUCCESS;
}
#endif

static int pool_device(ms_CUmemoryPool p)
{
    uintptr_t v = (uintptr_t)p;
    if (v >= 0x7000 && v < 0x7000 + (uintptr_t)ndev)
        return (int)(v - 0x7000);
    return -1;
}

static R alloc_async(ms_CUdeviceptr *dp, size_t n, int dev, ms_CUstream s)
{
    if (stream_index(s) < 0 || dev < 0)
        return MS_CUDA_ERROR_INVALID_VALUE;
    R r = alloc_locked(dp, n, K_DEVICE, dev);
    if (r == MS_CUDA_SUCCESS) {
        find(*dp)->kind = K_ASYNC;
        devs[dev].pool_used += round_up(n, 512);
    }
    return r;
}

static R free_async(ms_CUdeviceptr p, ms_CUstream s)
{
    int i = stream_index(s);
    struct live *b = find(p);
    if (i < 0 || !b || (b->kind != K_DEVICE && b->kind != K_ASYNC) || b->pending)
        return MS_CUDA_ERROR_INVALID_VALUE;
    b->pending = i + 1;
    if (i == 0)
        block_release(b); /* the default stream: this driver runs it synchronously */
    return MS_CUDA_SUCCESS;
}

API R cuMemAllocAsync(ms_CUdeviceptr *dp, size_t n, ms_CUstream s)
{
    R r = need_ctx();
    if (r)
        return r;
    LOCKED(alloc_async(dp, n, current->dev, s));
}
API R cuMemAllocAsync_ptsz(ms_CUdeviceptr *dp, size_t n, ms_CUstream s)
{
    return cuMemAllocAsync(dp, n, s);
}
API R cuMemAllocFromPoolAsync(ms_CUdeviceptr *dp, size_t n, ms_CUmemoryPool p, ms_CUstream s)
{
    R r = need_ctx();
    if (r)
        return r;
    LOCKED(alloc_async(dp, n, pool_device(p), s));
}
API R cuMemAllocFromPoolAsync_ptsz(ms_CUdeviceptr *dp, size_t n, ms_CUmemoryPool p,
                                   ms_CUstream s)
{
    return cuMemAllocFromPoolAsync(dp, n, p, s);
}
API R cuMemFreeAsync(ms_CUdeviceptr p, ms_CUstream s)
{
    LOCKED(free_async(p, s));
}
API R cuMemFreeAsync_ptsz(ms_CUdeviceptr p, ms_CUstream s)
{
    return cuMemFreeAsync(p, s);
}

/* ---- VMM ---- */

API R cuMemGetAllocationGranularity(size_t *g, const ms_CUmemAllocationProp *prop, int option)
{
    (void)prop;
    (void)option;
    *g = GRANULARITY;
    return MS_CUDA_SUCCESS;
}

static int handle_index(ms_CUmemGenericAllocationHandle h)
{
    if (h < 0x9000 || h >= 0x9000 + MAX_HANDLES || !handles[h - 0x9000].used)
        return -1;
    return (int)(h - 0x9000);
}

static void handle_drop(struct handle *x)
{
    if (x->released && x->mapped == 0) {
        close(x->fd);
        devs[x->dev].used -= x->size;
        x->used = 0;
    }
}

API R cuMemCreate(ms_CUmemGenericAllocationHandle *h, size_t n,
                  const ms_CUmemAllocationProp *prop, unsigned long long flags)
{
    (void)flags;
    if (!initialized)
        return MS_CUDA_ERROR_NOT_INITIALIZED;
    if (!h || !prop || prop->location.type != MS_CU_MEM_LOCATION_TYPE_DEVICE ||
        prop->location.id < 0 || prop->location.id >= ndev || n == 0 || n % GRANULARITY)
        return MS_CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    setup();
    int d = prop->location.id;
    R r = MS_CUDA_ERROR_OUT_OF_MEMORY;
    if (devs[d].used + n <= capacity) {
        for (int i = 0; i < MAX_HANDLES; i++) {
            if (handles[i].used)
                continue;
            int fd = (int)syscall(SYS_memfd_create, "ms-test-cuda", 0);
            if (fd < 0 || ftruncate(fd, (off_t)n) != 0) {
                if (fd >= 0)
                    close(fd);
                break;
            }
            handles[i] = (struct handle){1, d, fd, 0, 0, n};
            devs[d].used += n;
            *h = 0x9000 + (unsigned)i;
            r = MS_CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    return r;
}

/* The memory goes when it is released and no longer mapped. */
API R cuMemRelease(ms_CUmemGenericAllocationHandle h)
{
    pthread_mutex_lock(&lock);
    int i = handle_index(h);
    if (i >= 0 && !handles[i].released) {
        handles[i].released = 1;
        handle_drop(&handles[i]);
    }
    pthread_mutex_unlock(&lock);
    return i >= 0 ? MS_CUDA_SUCCESS : MS_CUDA_ERROR_INVALID_VALUE;
}

API R cuMemAddressReserve(ms_CUdeviceptr *p, size_t n, size_t align, ms_CUdeviceptr addr,
                          unsigned long long flags)
{
    (void)align;
    (void)flags;
    if (!p || n == 0 || n % GRANULARITY)
        return MS_CUDA_ERROR_INVALID_VALUE;
    void *v = raw_mmap((void *)(uintptr_t)addr, n, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (v == MAP_FAILED)
        return MS_CUDA_ERROR_OUT_OF_MEMORY;
    *p = (uintptr_t)v;
    return MS_CUDA_SUCCESS;
}

API R cuMemAddressFree(ms_CUdeviceptr p, size_t n)
{
    if (!p || n == 0)
        return MS_CUDA_ERROR_INVALID_VALUE;
    syscall(SYS_munmap, (void *)(uintptr_t)p, n);
    return MS_CUDA_SUCCESS;
}

/* Mapped ranges, to find the handle an unmap drops. */
static struct { uintptr_t addr; size_t size; int handle; } maps[MAX_HANDLES];

API R cuMemMap(ms_CUdeviceptr p, size_t n, size_t off, ms_CUmemGenericAllocationHandle h,
               unsigned long long flags)
{
    (void)flags;
    pthread_mutex_lock(&lock);
    int i = handle_index(h);
    R r = MS_CUDA_ERROR_INVALID_VALUE;
    if (i >= 0 && off + n <= handles[i].size && n % GRANULARITY == 0) {
        for (int k = 0; k < MAX_HANDLES; k++) {
            if (maps[k].addr)
                continue;
            void *v = raw_mmap((void *)(uintptr_t)p, n, PROT_NONE, MAP_SHARED | MAP_FIXED,
                               handles[i].fd, (off_t)off);
            if (v != MAP_FAILED) {
                maps[k].addr = p;
                maps[k].size = n;
                maps[k].handle = i;
                handles[i].mapped++;
                r = MS_CUDA_SUCCESS;
            }
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    return r;
}

typedef struct { ms_CUmemLocation_layout location; int flags; } ms_CUmemAccessDesc;

API R cuMemSetAccess(ms_CUdeviceptr p, size_t n, const ms_CUmemAccessDesc *desc, size_t count)
{
    if (!desc || count == 0)
        return MS_CUDA_ERROR_INVALID_VALUE;
    return mprotect((void *)(uintptr_t)p, n, desc->flags ? PROT_READ | PROT_WRITE : PROT_NONE)
               ? MS_CUDA_ERROR_INVALID_VALUE
               : MS_CUDA_SUCCESS;
}

API R cuMemUnmap(ms_CUdeviceptr p, size_t n)
{
    pthread_mutex_lock(&lock);
    R r = MS_CUDA_ERROR_INVALID_VALUE;
    for (int k = 0; k < MAX_HANDLES; k++) {
        if (maps[k].addr != p || maps[k].size != n)
            continue;
        raw_mmap((void *)(uintptr_t)p, n, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
        struct handle *x = &handles[maps[k].handle];
        x->mapped--;
        maps[k].addr = 0;
        handle_drop(x);
        r = MS_CUDA_SUCCESS;
        break;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

/* ---- pinned host memory ---- */

static R host_alloc(void **pp, size_t n)
{
    if (!pp || n == 0)
        return MS_CUDA_ERROR_INVALID_VALUE;
    void *p = raw_mmap(NULL, round_up(n, 4096), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return MS_CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&lock);
    setup();
    struct live *b = insert((uintptr_t)p);
    if (b) {
        b->size = n;
        b->kind = K_HOST;
    }
    pthread_mutex_unlock(&lock);
    *pp = p;
    return MS_CUDA_SUCCESS;
}

API R cuMemHostAlloc(void **pp, size_t n, unsigned flags)
{
    (void)flags;
    return host_alloc(pp, n);
}

API R cuMemAllocHost_v2(void **pp, size_t n) { return host_alloc(pp, n); }

static R host_drop(void *p, int kind)
{
    pthread_mutex_lock(&lock);
    setup();
    struct live *b = find((uintptr_t)p);
    R r = b && b->kind == kind ? MS_CUDA_SUCCESS : MS_CUDA_ERROR_INVALID_VALUE;
    if (r == MS_CUDA_SUCCESS)
        block_release(b);
    pthread_mutex_unlock(&lock);
    return r;
}

API R cuMemFreeHost(void *p) { return host_drop(p, K_HOST); }

API R cuMemHostRegister_v2(void *p, size_t n, unsigned flags)
{
    (void)flags;
    if (!p || n == 0)
        return MS_CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    setup();
    struct live *b = find((uintptr_t)p) ? NULL : insert((uintptr_t)p);
    if (b) {
        b->size = n;
        b->kind = K_REGISTERED;
    }
    pthread_mutex_unlock(&lock);
    return b ? MS_CUDA_SUCCESS : MS_CUDA_ERROR_INVALID_VALUE;
}

API R cuMemHostUnregister(void *p) { return host_drop(p, K_REGISTERED); }

/* ---- IPC: a handle names (pid, address, size, device) of the exporting process ---- */

struct ipc { uint64_t magic, pid, addr, size, dev; };

API R cuIpcGetMemHandle(ms_CUipcMemHandle *h, ms_CUdeviceptr p)
{
    pthread_mutex_lock(&lock);
    setup();
    struct live *b = find(p);
    R r = b && b->kind == K_DEVICE ? MS_CUDA_SUCCESS : MS_CUDA_ERROR_INVALID_VALUE;
    if (r == MS_CUDA_SUCCESS) {
        struct ipc x = {0x4d5349504321ull, (uint64_t)getpid(), b->addr, b->size, (uint64_t)b->dev};
        memset(h, 0, sizeof *h);
        memcpy(h->reserved, &x, sizeof x);
    }
    pthread_mutex_unlock(&lock);
    return r;
}

API R cuIpcOpenMemHandle_v2(ms_CUdeviceptr *dp, ms_CUipcMemHandle h, unsigned flags)
{
    (void)flags;
    struct ipc x;
    memcpy(&x, h.reserved, sizeof x);
    if (x.magic != 0x4d5349504321ull || x.dev >= (uint64_t)ndev)
        return MS_CUDA_ERROR_INVALID_VALUE;
    if (x.pid == (uint64_t)getpid())
        return MS_CUDA_ERROR_INVALID_CONTEXT; /* the driver refuses the exporter's own handles */
    pthread_mutex_lock(&lock);
    setup();
    /* imported memory belongs to the exporter: a new address, no capacity taken here */
    struct device *v = &devs[x.dev];
    uintptr_t a = v->cursor;
    v->cursor += round_up(x.size, 512);
    struct live *b = insert(a);
    if (b) {
        b->size = x.size;
        b->dev = (int)x.dev;
        b->kind = K_IPC;
    }
    pthread_mutex_unlock(&lock);
    *dp = a;
    return MS_CUDA_SUCCESS;
}

API R cuIpcCloseMemHandle(ms_CUdeviceptr p)
{
    pthread_mutex_lock(&lock);
    setup();
    struct live *b = find(p);
    R r = b && b->kind == K_IPC ? MS_CUDA_SUCCESS : MS_CUDA_ERROR_INVALID_VALUE;
    if (r == MS_CUDA_SUCCESS)
        b->addr = 1;
    pthread_mutex_unlock(&lock);
    return r;
}

/* ---- modules and launches (nothing runs) ---- */

API R cuModuleLoadData(void **mod, const void *image)
{
    (void)image;
    *mod = (void *)(uintptr_t)0x6000;
    return MS_CUDA_SUCCESS;
}

API R cuModuleGetFunction(ms_CUfunction *f, void *mod, const char *name)
{
    if (!f || !mod || !name || strlen(name) >= sizeof func_names[0])
        return MS_CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    int i;
    for (i = 0; i < nfuncs && strcmp(func_names[i], name); i++)
        ;
    if (i == nfuncs && nfuncs < MAX_FUNCS)
        strcpy(func_names[nfuncs++], name);
    pthread_mutex_unlock(&lock);
    if (i >= MAX_FUNCS)
        return MS_CUDA_ERROR_OUT_OF_MEMORY;
    *f = (ms_CUfunction)(uintptr_t)(0x8000 + i);
    return MS_CUDA_SUCCESS;
}

#ifndef MS_TEST_CUDA_OLD
API R cuFuncGetName(const char **name, ms_CUfunction f)
{
    uintptr_t v = (uintptr_t)f;
    if (!name || v < 0x8000 || v >= 0x8000 + (uintptr_t)nfuncs)
        return MS_CUDA_ERROR_INVALID_HANDLE;
    *name = func_names[v - 0x8000];
    return MS_CUDA_SUCCESS;
}
#endif

static R launch(ms_CUfunction f, ms_CUstream s)
{
    R r = need_ctx();
    if (r)
        return r;
    uintptr_t v = (uintptr_t)f;
    if (v < 0x8000 || v >= 0x8000 + (uintptr_t)nfuncs || stream_index(s) < 0)
        return MS_CUDA_ERROR_INVALID_VALUE;
    return MS_CUDA_SUCCESS;
}

API R cuLaunchKernel(ms_CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                     unsigned by, unsigned bz, unsigned shmem, ms_CUstream s, void **params,
                     void **extra)
{
    (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shmem, (void)params;
    (void)extra;
    return launch(f, s);
}

API R cuLaunchKernel_ptsz(ms_CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                          unsigned by, unsigned bz, unsigned shmem, ms_CUstream s,
                          void **params, void **extra)
{
    return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra);
}

#ifndef MS_TEST_CUDA_OLD
API R cuLaunchKernelEx(const ms_CUlaunchConfig *c, ms_CUfunction f, void **params, void **extra)
{
    (void)params, (void)extra;
    return c ? launch(f, c->hStream) : MS_CUDA_ERROR_INVALID_VALUE;
}
#endif

#ifndef MS_TEST_CUDA_OLD
API R cuLaunchKernelEx_ptsz(const ms_CUlaunchConfig *c, ms_CUfunction f, void **params,
                            void **extra)
{
    return cuLaunchKernelEx(c, f, params, extra);
}
#endif

API R cuLaunchCooperativeKernel(ms_CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                                ms_CUstream s, void **params)
{
    (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shmem, (void)params;
    return launch(f, s);
}

API R cuLaunchCooperativeKernel_ptsz(ms_CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                     unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                                     ms_CUstream s, void **params)
{
    return cuLaunchCooperativeKernel(f, gx, gy, gz, bx, by, bz, shmem, s, params);
}

/* ---- cuGetProcAddress: base name, version, flags -> the entry point of that ABI ---- */

API R cuGetProcAddress(const char *sym, void **pfn, int version, ms_cuuint64_t flags);
API R cuGetProcAddress_v2(const char *sym, void **pfn, int version, ms_cuuint64_t flags,
                          ms_CUdriverProcAddressQueryResult *status);

static const struct proc {
    const char *base;
    int version, ptsz;
    void *fn;
} procs[] = {
    {"cuInit", 2000, 0, (void *)cuInit},
    {"cuDriverGetVersion", 2020, 0, (void *)cuDriverGetVersion},
    {"cuDeviceGet", 2000, 0, (void *)cuDeviceGet},
    {"cuDeviceGetCount", 2000, 0, (void *)cuDeviceGetCount},
    {"cuDeviceGetPCIBusId", 4000, 0, (void *)cuDeviceGetPCIBusId},
    {"cuDeviceTotalMem", 3020, 0, (void *)cuDeviceTotalMem_v2},
    {"cuDevicePrimaryCtxRetain", 7000, 0, (void *)cuDevicePrimaryCtxRetain},
    {"cuDevicePrimaryCtxRelease", 11000, 0, (void *)cuDevicePrimaryCtxRelease_v2},
    {"cuCtxCreate", 3020, 0, (void *)cuCtxCreate_v2},
    {"cuCtxDestroy", 4000, 0, (void *)cuCtxDestroy_v2},
    {"cuCtxSetCurrent", 4000, 0, (void *)cuCtxSetCurrent},
    {"cuCtxGetCurrent", 4000, 0, (void *)cuCtxGetCurrent},
    {"cuCtxGetDevice", 2000, 0, (void *)cuCtxGetDevice},
    {"cuCtxSynchronize", 2000, 0, (void *)cuCtxSynchronize},
    {"cuMemGetInfo", 3020, 0, (void *)cuMemGetInfo_v2},
    {"cuGetErrorName", 6000, 0, (void *)cuGetErrorName},
    {"cuMemAlloc", 3020, 0, (void *)cuMemAlloc_v2},
    {"cuMemAllocPitch", 3020, 0, (void *)cuMemAllocPitch_v2},
    {"cuMemAllocManaged", 6000, 0, (void *)cuMemAllocManaged},
    {"cuMemFree", 3020, 0, (void *)cuMemFree_v2},
#ifndef MS_TEST_CUDA_OLD
    {"cuMemGetAddressRange", 3020, 0, (void *)cuMemGetAddressRange_v2},
#endif
    {"cuStreamCreate", 2000, 0, (void *)cuStreamCreate},
    {"cuStreamSynchronize", 2000, 0, (void *)cuStreamSynchronize},
    {"cuStreamDestroy", 4000, 0, (void *)cuStreamDestroy_v2},
    {"cuDeviceGetDefaultMemPool", 11020, 0, (void *)cuDeviceGetDefaultMemPool},
#ifndef MS_TEST_CUDA_OLD
    {"cuDeviceGetMemPool", 11020, 0, (void *)cuDeviceGetMemPool},
#endif
#ifndef MS_TEST_CUDA_OLD
    {"cuMemPoolGetAttribute", 11020, 0, (void *)cuMemPoolGetAttribute},
#endif
    {"cuMemAllocAsync", 11020, 0, (void *)cuMemAllocAsync},
    {"cuMemAllocAsync", 11020, 1, (void *)cuMemAllocAsync_ptsz},
    {"cuMemAllocFromPoolAsync", 11020, 0, (void *)cuMemAllocFromPoolAsync},
    {"cuMemAllocFromPoolAsync", 11020, 1, (void *)cuMemAllocFromPoolAsync_ptsz},
    {"cuMemFreeAsync", 11020, 0, (void *)cuMemFreeAsync},
    {"cuMemFreeAsync", 11020, 1, (void *)cuMemFreeAsync_ptsz},
    {"cuMemGetAllocationGranularity", 10020, 0, (void *)cuMemGetAllocationGranularity},
    {"cuMemCreate", 10020, 0, (void *)cuMemCreate},
    {"cuMemRelease", 10020, 0, (void *)cuMemRelease},
    {"cuMemAddressReserve", 10020, 0, (void *)cuMemAddressReserve},
    {"cuMemAddressFree", 10020, 0, (void *)cuMemAddressFree},
    {"cuMemMap", 10020, 0, (void *)cuMemMap},
    {"cuMemUnmap", 10020, 0, (void *)cuMemUnmap},
    {"cuMemSetAccess", 10020, 0, (void *)cuMemSetAccess},
    {"cuMemHostAlloc", 2020, 0, (void *)cuMemHostAlloc},
    {"cuMemAllocHost", 3020, 0, (void *)cuMemAllocHost_v2},
    {"cuMemFreeHost", 2000, 0, (void *)cuMemFreeHost},
    {"cuMemHostRegister", 6050, 0, (void *)cuMemHostRegister_v2},
    {"cuMemHostUnregister", 4000, 0, (void *)cuMemHostUnregister},
    {"cuIpcGetMemHandle", 4010, 0, (void *)cuIpcGetMemHandle},
    {"cuIpcOpenMemHandle", 11000, 0, (void *)cuIpcOpenMemHandle_v2},
    {"cuIpcCloseMemHandle", 4010, 0, (void *)cuIpcCloseMemHandle},
    {"cuModuleLoadData", 2000, 0, (void *)cuModuleLoadData},
    {"cuModuleGetFunction", 2000, 0, (void *)cuModuleGetFunction},
#ifndef MS_TEST_CUDA_OLD
    {"cuFuncGetName", 12030, 0, (void *)cuFuncGetName},
#endif
    {"cuLaunchKernel", 4000, 0, (void *)cuLaunchKernel},
    {"cuLaunchKernel", 7000, 1, (void *)cuLaunchKernel_ptsz},
#ifndef MS_TEST_CUDA_OLD
    {"cuLaunchKernelEx", 11060, 0, (void *)cuLaunchKernelEx},
    {"cuLaunchKernelEx", 11060, 1, (void *)cuLaunchKernelEx_ptsz},
#endif
    {"cuLaunchCooperativeKernel", 9000, 0, (void *)cuLaunchCooperativeKernel},
    {"cuLaunchCooperativeKernel", 9000, 1, (void *)cuLaunchCooperativeKernel_ptsz},
    {"cuGetProcAddress", 11030, 0, (void *)cuGetProcAddress},
#ifndef MS_TEST_CUDA_OLD
    {"cuGetProcAddress", 12000, 0, (void *)cuGetProcAddress_v2},
#endif
};

static R lookup(const char *sym, void **pfn, int version, ms_cuuint64_t flags, int *status)
{
    int ptsz = (flags & MS_CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    const struct proc *best = NULL;
    int known = 0;
    if (!sym || !pfn)
        return MS_CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof procs / sizeof procs[0]; i++) {
        const struct proc *p = &procs[i];
        if (strcmp(p->base, sym))
            continue;
        known = 1;
        if (p->version > version || (p->ptsz && !ptsz))
            continue;
        if (!best || p->ptsz > best->ptsz ||
            (p->ptsz == best->ptsz && p->version > best->version))
            best = p;
    }
    *pfn = NULL;
    if (!best) {
        *status = known ? MS_CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                        : MS_CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        return MS_CUDA_ERROR_NOT_FOUND;
    }
    *pfn = best->fn;
    if (best->fn == (void *)cuMemAlloc_v2 && env_u64("MEMSCOPE_TEST_CUDA_PROC_ALIASES", 0))
        *pfn = (void *)alias_cuMemAlloc_v2;
    *status = MS_CU_GET_PROC_ADDRESS_SUCCESS;
    return MS_CUDA_SUCCESS;
}

API R cuGetProcAddress(const char *sym, void **pfn, int version, ms_cuuint64_t flags)
{
    int status;
    return lookup(sym, pfn, version, flags, &status);
}

#ifndef MS_TEST_CUDA_OLD
API R cuGetProcAddress_v2(const char *sym, void **pfn, int version, ms_cuuint64_t flags,
                          ms_CUdriverProcAddressQueryResult *status)
{
    int st;
    R r = lookup(sym, pfn, version, flags, &st);
    if (status)
        *status = st;
    return r;
}
#endif

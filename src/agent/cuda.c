/* cuda.c: the CUDA driver API seen from the agent: device memory (cuMemAlloc & co., the
 * stream-ordered pools, VMM), pinned host memory, IPC imports, allocations that fail with
 * CUDA_ERROR_OUT_OF_MEMORY and, with --events=launch, kernel launches (docs/cuda.md).
 *
 * Everything above the driver ends in libcuda.so.1, which programs reach three ways; each is
 * covered without exporting any cu* symbol (a program probing dlsym(RTLD_DEFAULT, "cuInit") to
 * find out whether CUDA is present must see no difference):
 *   - dlopen + dlsym (cudart, also statically linked into NCCL, cuBLAS ...; PyTorch): the agent
 *     exports dlsym. Its entry is a few instructions of assembly that jump straight to the C
 *     library's dlsym unless the name starts with "cu" and the handle is not RTLD_NEXT, so the
 *     C library sees the program's own return address (RTLD_NEXT keeps its meaning); a "cu"
 *     name goes to cuda_dlsym(), which hands out the wrapper of a hooked function.
 *   - cuGetProcAddress / cuGetProcAddress_v2 by base name, version and flags (how cudart asks
 *     for ~440 entry points, including cuGetProcAddress itself): the wrappers of those two
 *     replace what the driver returns by the wrapper of the same ABI (variant_for()).
 *   - direct binding (-lcuda): at agent start, when the driver is already loaded, the GOT slots
 *     bound to the driver's functions are redirected to the wrappers (got_redirect, attach.c).
 *     NEEDSWORK: objects with DT_NEEDED libcuda.so.1 that are dlopen'ed later bind directly.
 * A wrapper calls the driver's function of its own ABI (found with dlsym in the driver that the
 * program loaded, never loaded by the agent itself) and records the call afterwards with the
 * time taken before it (a free is recorded only when it succeeded, so the order with a new
 * allocation at the same address is right); recording follows the rules of agent.c: no
 * allocation, no lock the program can hold. */
#include "agent.h"
#include "cuda_driver.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

void *(*ms_real_dlsym)(void *, const char *);

/* Newest driver API version whose ABIs this file knows: a cuGetProcAddress request above it is
 * wrapped only when the driver returns the very function memscope found by its exported name. */
#define KNOWN_CUDA_VERSION 13999

/* Every hooked entry point: exported name, base name, per-thread-default-stream variant, the
 * first version with this ABI. */
#define VARIANTS(X)                                                         \
    X(cuMemAlloc_v2, "cuMemAlloc", 0, 3020)                                 \
    X(cuMemAllocPitch_v2, "cuMemAllocPitch", 0, 3020)                       \
    X(cuMemAllocManaged, "cuMemAllocManaged", 0, 6000)                      \
    X(cuMemFree_v2, "cuMemFree", 0, 3020)                                   \
    X(cuMemAllocAsync, "cuMemAllocAsync", 0, 11020)                         \
    X(cuMemAllocAsync_ptsz, "cuMemAllocAsync", 1, 11020)                    \
    X(cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 0, 11020)         \
    X(cuMemAllocFromPoolAsync_ptsz, "cuMemAllocFromPoolAsync", 1, 11020)    \
    X(cuMemFreeAsync, "cuMemFreeAsync", 0, 11020)                           \
    X(cuMemFreeAsync_ptsz, "cuMemFreeAsync", 1, 11020)                      \
    X(cuMemCreate, "cuMemCreate", 0, 10020)                                 \
    X(cuMemRelease, "cuMemRelease", 0, 10020)                               \
    X(cuMemAddressReserve, "cuMemAddressReserve", 0, 10020)                 \
    X(cuMemAddressFree, "cuMemAddressFree", 0, 10020)                       \
    X(cuMemMap, "cuMemMap", 0, 10020)                                       \
    X(cuMemUnmap, "cuMemUnmap", 0, 10020)                                   \
    X(cuMemHostAlloc, "cuMemHostAlloc", 0, 2020)                            \
    X(cuMemAllocHost_v2, "cuMemAllocHost", 0, 3020)                         \
    X(cuMemFreeHost, "cuMemFreeHost", 0, 2000)                              \
    X(cuMemHostRegister_v2, "cuMemHostRegister", 0, 6050)                   \
    X(cuMemHostUnregister, "cuMemHostUnregister", 0, 4000)                  \
    X(cuIpcOpenMemHandle_v2, "cuIpcOpenMemHandle", 0, 11000)                \
    X(cuIpcCloseMemHandle, "cuIpcCloseMemHandle", 0, 4010)                  \
    X(cuLaunchKernel, "cuLaunchKernel", 0, 4000)                            \
    X(cuLaunchKernel_ptsz, "cuLaunchKernel", 1, 7000)                       \
    X(cuLaunchKernelEx, "cuLaunchKernelEx", 0, 11060)                       \
    X(cuLaunchKernelEx_ptsz, "cuLaunchKernelEx", 1, 11060)                  \
    X(cuLaunchCooperativeKernel, "cuLaunchCooperativeKernel", 0, 9000)      \
    X(cuLaunchCooperativeKernel_ptsz, "cuLaunchCooperativeKernel", 1, 9000) \
    X(cuGetProcAddress, "cuGetProcAddress", 0, 11030)                       \
    X(cuGetProcAddress_v2, "cuGetProcAddress", 0, 12000)

enum {
#define V_ENUM(name, base, ptsz, ver) V_##name,
    VARIANTS(V_ENUM)
#undef V_ENUM
        NVARIANTS
};

static const struct variant {
    const char *name, *base;
    int ptsz, version;
} variants[NVARIANTS] = {
#define V_DESC(name, base, ptsz, ver) {#name, base, ptsz, ver},
    VARIANTS(V_DESC)
#undef V_DESC
};

static const char *const variant_names[NVARIANTS] = {
#define V_NAME(name, base, ptsz, ver) #name,
    VARIANTS(V_NAME)
#undef V_NAME
};

/* The driver's function of each variant (set once), and the wrappers. */
static uintptr_t real_fn[NVARIANTS];
static uintptr_t wrap_fn[NVARIANTS];
#define REAL(name) ((ms_fn_##name *)real_fn[V_##name])

/* Helpers the wrappers call (not wrapped). */
static ms_fn_cuCtxGetDevice *drv_ctx_get_device;
static ms_fn_cuMemGetInfo_v2 *drv_mem_get_info;
static ms_fn_cuFuncGetName *drv_func_get_name;
typedef ms_CUresult ms_fn_cuMemGetAddressRange_v2(ms_CUdeviceptr *, size_t *, ms_CUdeviceptr);
static ms_fn_cuMemGetAddressRange_v2 *drv_addr_range;
static ms_fn_cuDeviceGetMemPool *drv_get_mem_pool;
static ms_fn_cuMemPoolGetAttribute *drv_pool_attr;

/* Nothing of CUDA is hooked until cuda_init() has run (an agent that cannot record never
 * hands out a wrapper), nor with MEMSCOPE_DEVICE=cpu. */
static int cuda_off = 1;
static int record_launches;          /* MEMSCOPE_EVENTS has launch */
static uint64_t device_mask = ~0ull; /* devices recorded (bit d: ordinal d); ordinals >= 64 all */
static int bind_lock;
static int driver_bound; /* the helpers and every variant were looked up in the driver */

/* ---- the dlsym entry ---- */

void *cuda_dlsym(void *handle, const char *name) __attribute__((visibility("hidden")));
void *cuda_dlsym_unresolved(void *handle, const char *name) __attribute__((visibility("hidden")));

/* dlsym(handle, name): rdi = handle, rsi = name. RTLD_NEXT is ((void *)-1). */
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, @function\n"
        "dlsym:\n"
        "    .cfi_startproc\n"
        "    endbr64\n" /* an indirect-branch target under CET (a NOP elsewhere) */
        "    cmpq $0, ms_real_dlsym(%rip)\n"
        "    je 2f\n"
        "    testq %rsi, %rsi\n"
        "    je 1f\n"
        "    cmpq $-1, %rdi\n"
        "    je 1f\n"
        "    cmpb $0x63, (%rsi)\n" /* 'c' */
        "    jne 1f\n"
        "    cmpb $0x75, 1(%rsi)\n" /* 'u' */
        "    je 3f\n"
        "1:  jmp *ms_real_dlsym(%rip)\n"
        "2:  jmp cuda_dlsym_unresolved\n"
        "3:  jmp cuda_dlsym\n"
        "    .cfi_endproc\n"
        ".size dlsym, .-dlsym\n");

/* dlsym before the agent found the C library's (a constructor that ran before the agent's). */
void *cuda_dlsym_unresolved(void *handle, const char *name)
{
    agent_tls.internal++;
    if (!ms_real_dlsym)
        ms_real_dlsym = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!ms_real_dlsym)
        ms_real_dlsym = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    agent_tls.internal--;
    if (!ms_real_dlsym)
        return NULL;
    return cuda_dlsym(handle, name);
}

static int variant_of_name(const char *name)
{
    for (int i = 0; i < NVARIANTS; i++)
        if (!strcmp(variant_names[i], name))
            return i;
    return -1;
}

static void redirect_all(void);

/* Looks every variant and helper up in the driver that defines fn (once). */
static void bind_driver(uintptr_t fn)
{
    if (__atomic_load_n(&driver_bound, __ATOMIC_ACQUIRE))
        return;
    int err = errno;
    agent_tls.internal++;
    spin_lock(&bind_lock);
    Dl_info di;
    void *h = NULL;
    if (!driver_bound && dladdr((void *)fn, &di) && di.dli_fname) {
        h = dlopen(di.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
        if (!h)
            agent_dl_forget_error();
    }
    if (h) {
        for (int i = 0; i < NVARIANTS; i++) {
            uintptr_t f = (uintptr_t)ms_real_dlsym(h, variant_names[i]);
            if (f)
                __atomic_compare_exchange_n(&real_fn[i], &(uintptr_t){0}, f, 0, __ATOMIC_RELEASE,
                                            __ATOMIC_RELAXED);
        }
        drv_ctx_get_device = (ms_fn_cuCtxGetDevice *)ms_real_dlsym(h, "cuCtxGetDevice");
        drv_mem_get_info = (ms_fn_cuMemGetInfo_v2 *)ms_real_dlsym(h, "cuMemGetInfo_v2");
        drv_func_get_name = (ms_fn_cuFuncGetName *)ms_real_dlsym(h, "cuFuncGetName");
        drv_addr_range =
            (ms_fn_cuMemGetAddressRange_v2 *)ms_real_dlsym(h, "cuMemGetAddressRange_v2");
        drv_get_mem_pool = (ms_fn_cuDeviceGetMemPool *)ms_real_dlsym(h, "cuDeviceGetMemPool");
        drv_pool_attr = (ms_fn_cuMemPoolGetAttribute *)ms_real_dlsym(h, "cuMemPoolGetAttribute");
        dlclose(h); /* RTLD_NOLOAD: only drops the reference just taken */
        __atomic_store_n(&driver_bound, 1, __ATOMIC_RELEASE);
    }
    spin_unlock(&bind_lock);
    agent_tls.internal--;
    errno = err;
    if (h)
        redirect_all(); /* objects that bind the driver directly, and dlopen from now on */
}

static int is_launch(int v)
{
    return v >= V_cuLaunchKernel && v <= V_cuLaunchCooperativeKernel_ptsz;
}

/* What to hand out for fn, the driver's function of variant v: its wrapper when fn is the
 * function the wrapper calls, else fn itself (not recorded, never wrong). */
static void *wrap(int v, void *fn, int trusted)
{
    if (!fn || v < 0 || cuda_off || (is_launch(v) && !record_launches))
        return fn;
    bind_driver((uintptr_t)fn);
    uintptr_t want = 0;
    if (!real_fn[v] && trusted) /* the driver lacks the export: take what it returned */
        __atomic_compare_exchange_n(&real_fn[v], &want, (uintptr_t)fn, 0, __ATOMIC_RELEASE,
                                    __ATOMIC_RELAXED);
    if (real_fn[v] == (uintptr_t)fn || (trusted && real_fn[v]))
        return (void *)wrap_fn[v];
    return fn;
}

void *cuda_dlsym(void *handle, const char *name)
{
    void *fn = ms_real_dlsym(handle, name);
    if (!fn || cuda_off)
        return fn;
    int v = variant_of_name(name);
    /* the exported name is the ABI: what the driver defines under it is what the wrapper calls */
    return v < 0 ? fn : wrap(v, fn, 0);
}

/* The variant cuGetProcAddress(base, version, flags) returns, or -1 (not hooked). */
static int variant_for(const char *base, int version, ms_cuuint64_t flags)
{
    int best = -1, ptsz = (flags & MS_CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    for (int pass = ptsz; pass >= 0 && best < 0; pass--)
        for (int i = 0; i < NVARIANTS; i++)
            if (variants[i].ptsz == pass && !strcmp(variants[i].base, base) &&
                variants[i].version <= version &&
                (best < 0 || variants[i].version > variants[best].version))
                best = i;
    return best;
}

static void *proc_result(const char *sym, void *fn, int version, ms_cuuint64_t flags)
{
    if (!sym || !fn || cuda_off || sym[0] != 'c' || sym[1] != 'u')
        return fn;
    int v = variant_for(sym, version, flags);
    if (v < 0)
        return fn;
    bind_driver((uintptr_t)fn);
    return wrap(v, fn, version <= KNOWN_CUDA_VERSION);
}

static ms_CUresult w_cuGetProcAddress(const char *sym, void **pfn, int version, ms_cuuint64_t flags)
{
    ms_CUresult r = REAL(cuGetProcAddress)(sym, pfn, version, flags);
    if (r == MS_CUDA_SUCCESS && pfn)
        *pfn = proc_result(sym, *pfn, version, flags);
    return r;
}

static ms_CUresult w_cuGetProcAddress_v2(const char *sym, void **pfn, int version,
                                         ms_cuuint64_t flags,
                                         ms_CUdriverProcAddressQueryResult *status)
{
    ms_CUresult r = REAL(cuGetProcAddress_v2)(sym, pfn, version, flags, status);
    if (r == MS_CUDA_SUCCESS && pfn)
        *pfn = proc_result(sym, *pfn, version, flags);
    return r;
}

/* ---- recording ---- */

#define CUDA_REC_MAX (1 + 2 + 14 * MS_VARINT_MAX + MS_TRACE_MAX_LABEL)

/* The current context's device as recorded: ordinal + 1, or 0 when there is none. */
static uint64_t current_device(void)
{
    ms_CUdevice d = -1;
    if (!drv_ctx_get_device)
        return 0;
    agent_tls.internal++;
    ms_CUresult r = drv_ctx_get_device(&d);
    agent_tls.internal--;
    return r == MS_CUDA_SUCCESS && d >= 0 ? (uint64_t)d + 1 : 0;
}

static int device_wanted(uint64_t dev)
{
    return dev == 0 || dev > 64 || (device_mask >> (dev - 1) & 1);
}

/* Writes one CUDA record of n integers v (v[stack_at] gets the stack id; -1: none) at time ns. */
static void record(int ext, uint64_t *v, int n, int stack_at, void *fp, uint64_t ns,
                   const char *str, size_t slen)
{
    struct tstate *t;
    struct stream *s = agent_enter(&t);
    if (!s)
        return;
    if (stack_at >= 0)
        v[stack_at] = agent.depth || agent.py_depth ? stacks_capture(t, s, fp) : 0;
    uint8_t *w = writer_reserve(t, s, CUDA_REC_MAX);
    if (w)
        writer_commit(s, ms_enc_ext(w, &s->enc, ext, ns ? ns : agent_now(), v, n, str, slen));
    agent_leave(t);
}

/* A memory call that succeeded (a free: its error in aux2 when it failed). */
static void record_mem3(int op, uint64_t dev, uint64_t addr, uint64_t size, uint64_t aux1,
                        uint64_t aux2, uint64_t aux3, void *fp, uint64_t ns)
{
    if (!agent_active() || !device_wanted(dev))
        return;
    uint64_t v[8] = {(uint64_t)op, dev, addr, size, 0, aux1, aux2, aux3};
    record(MS_EXT_CUDA_MEM, v, 8, 4, fp, ns, NULL, 0);
}

static void record_mem(int op, uint64_t dev, uint64_t addr, uint64_t size, uint64_t aux1,
                       uint64_t aux2, void *fp, uint64_t ns)
{
    record_mem3(op, dev, addr, size, aux1, aux2, 0, fp, ns);
}

static void alloc_done(ms_CUresult r, int op, uint64_t dev, uint64_t addr, uint64_t size,
                       uint64_t aux1, uint64_t aux2, void *fp);

/* A stream-ordered allocation: its pool (the device's current one when none was named) and the
 * bytes the pool has reserved from the device after it (0 when the driver cannot say). */
static void record_async(int op, ms_CUresult r, uint64_t dev, uint64_t addr, uint64_t size,
                         ms_CUstream st, ms_CUmemoryPool pool, void *fp)
{
    if (r != MS_CUDA_SUCCESS) {
        alloc_done(r, op, dev, addr, size, 0, 0, fp);
        return;
    }
    if (!agent_active() || !device_wanted(dev))
        return;
    uint64_t reserved = 0;
    agent_tls.internal++;
    if (!pool && drv_get_mem_pool && dev && drv_get_mem_pool(&pool, (ms_CUdevice)(dev - 1)))
        pool = NULL;
    if (pool && drv_pool_attr &&
        drv_pool_attr(pool, MS_CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved) != MS_CUDA_SUCCESS)
        reserved = 0;
    agent_tls.internal--;
    record_mem3(op, dev, addr, size, (uintptr_t)st, (uintptr_t)pool, reserved, fp, 0);
}

static void record_oom(int op, uint64_t dev, uint64_t size, void *fp)
{
    if (!agent_active() || !device_wanted(dev))
        return;
    size_t free_b = 0, total_b = 0;
    if (drv_mem_get_info) {
        agent_tls.internal++;
        if (drv_mem_get_info(&free_b, &total_b) != MS_CUDA_SUCCESS)
            free_b = total_b = 0;
        agent_tls.internal--;
    }
    uint64_t v[6] = {(uint64_t)op, dev, size, 0, free_b, total_b};
    record(MS_EXT_CUDA_OOM, v, 6, 3, fp, 0, NULL, 0);
}

/* Allocation results: recorded, or an OOM. */
static void alloc_done(ms_CUresult r, int op, uint64_t dev, uint64_t addr, uint64_t size,
                       uint64_t aux1, uint64_t aux2, void *fp)
{
    if (r == MS_CUDA_SUCCESS)
        record_mem(op, dev, addr, size, aux1, aux2, fp, 0);
    else if (r == MS_CUDA_ERROR_OUT_OF_MEMORY)
        record_oom(op, dev, size, fp);
}

/* Functions whose names were already written (CUDA_FUNC), per process image: open addressing
 * with CAS; when it is full a name is written with every launch of a new function. */
#define FUNC_SLOTS 8192
static uintptr_t func_seen[FUNC_SLOTS];

static int func_is_new(uintptr_t f)
{
    uint64_t h = (uint64_t)f * 0x9e3779b97f4a7c15ull;
    for (unsigned k = 0; k < 32; k++) {
        uintptr_t *slot = &func_seen[((h >> 51) + k) & (FUNC_SLOTS - 1)];
        uintptr_t cur = __atomic_load_n(slot, __ATOMIC_RELAXED);
        if (cur == f)
            return 0;
        if (cur == 0) {
            if (__atomic_compare_exchange_n(slot, &cur, f, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
                return 1;
            if (cur == f)
                return 0;
        }
    }
    return 1;
}

static void record_launch(int op, ms_CUfunction f, ms_CUstream st, unsigned gx, unsigned gy,
                          unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                          void *fp, uint64_t ns)
{
    if (!agent_active())
        return;
    uint64_t dev = current_device();
    if (!device_wanted(dev))
        return;
    if (f && func_is_new((uintptr_t)f)) {
        const char *name = NULL;
        if (drv_func_get_name) {
            agent_tls.internal++;
            if (drv_func_get_name(&name, f) != MS_CUDA_SUCCESS)
                name = NULL;
            agent_tls.internal--;
        }
        uint64_t fv[1] = {(uintptr_t)f};
        record(MS_EXT_CUDA_FUNC, fv, 1, -1, NULL, ns, name ? name : "",
               name ? strnlen(name, MS_TRACE_MAX_LABEL) : 0);
    }
    uint64_t v[12] = {(uint64_t)op, dev, (uintptr_t)f, (uintptr_t)st, gx, gy, gz,
                      bx,           by,  bz,           shmem,         0};
    record(MS_EXT_CUDA_LAUNCH, v, 12, 11, fp, ns, NULL, 0);
}

/* ---- the wrappers ---- */

#define FP __builtin_frame_address(0)

static ms_CUresult w_cuMemAlloc_v2(ms_CUdeviceptr *dp, size_t n)
{
    ms_CUresult r = REAL(cuMemAlloc_v2)(dp, n);
    alloc_done(r, MS_CU_MEM_ALLOC, current_device(), r ? 0 : *dp, n, 0, 0, FP);
    return r;
}

static ms_CUresult w_cuMemAllocPitch_v2(ms_CUdeviceptr *dp, size_t *pitch, size_t w, size_t h,
                                        unsigned elem)
{
    ms_CUresult r = REAL(cuMemAllocPitch_v2)(dp, pitch, w, h, elem);
    alloc_done(r, MS_CU_MEM_ALLOC_PITCH, current_device(), r ? 0 : *dp, r ? w * h : *pitch * h,
               r ? 0 : *pitch, h, FP);
    return r;
}

static ms_CUresult w_cuMemAllocManaged(ms_CUdeviceptr *dp, size_t n, unsigned flags)
{
    ms_CUresult r = REAL(cuMemAllocManaged)(dp, n, flags);
    alloc_done(r, MS_CU_MEM_ALLOC_MANAGED, current_device(), r ? 0 : *dp, n, flags, 0, FP);
    return r;
}

/* A free-like call: the time before it, the record after it. */
#define FREE_CALL(op, dev, addr, size, aux1, call)                        \
    do {                                                                  \
        uint64_t ns0 = agent_active() ? agent_now() : 0;                  \
        ms_CUresult r_ = call;                                            \
        if (ns0)                                                          \
            record_mem(op, dev, addr, size, aux1, (uint64_t)r_, FP, ns0); \
        return r_;                                                        \
    } while (0)

static ms_CUresult w_cuMemFree_v2(ms_CUdeviceptr p)
{
    FREE_CALL(MS_CU_MEM_FREE, current_device(), p, 0, 0, REAL(cuMemFree_v2)(p));
}

#define ASYNC_WRAPPERS(sfx)                                                                     \
    static ms_CUresult w_cuMemAllocAsync##sfx(ms_CUdeviceptr *dp, size_t n, ms_CUstream st)     \
    {                                                                                           \
        ms_CUresult r = REAL(cuMemAllocAsync##sfx)(dp, n, st);                                  \
        record_async(MS_CU_MEM_ALLOC_ASYNC, r, current_device(), r ? 0 : *dp, n, st, NULL, FP); \
        return r;                                                                               \
    }                                                                                           \
    static ms_CUresult w_cuMemAllocFromPoolAsync##sfx(ms_CUdeviceptr *dp, size_t n,             \
                                                      ms_CUmemoryPool pool, ms_CUstream st)     \
    {                                                                                           \
        ms_CUresult r = REAL(cuMemAllocFromPoolAsync##sfx)(dp, n, pool, st);                    \
        record_async(MS_CU_MEM_ALLOC_FROM_POOL_ASYNC, r, current_device(), r ? 0 : *dp, n, st,  \
                     pool, FP);                                                                 \
        return r;                                                                               \
    }                                                                                           \
    static ms_CUresult w_cuMemFreeAsync##sfx(ms_CUdeviceptr p, ms_CUstream st)                  \
    {                                                                                           \
        FREE_CALL(MS_CU_MEM_FREE_ASYNC, current_device(), p, 0, (uintptr_t)st,                  \
                  REAL(cuMemFreeAsync##sfx)(p, st));                                            \
    }
ASYNC_WRAPPERS()
ASYNC_WRAPPERS(_ptsz)

static ms_CUresult w_cuMemCreate(ms_CUmemGenericAllocationHandle *h, size_t n,
                                 const ms_CUmemAllocationProp *prop, unsigned long long flags)
{
    ms_CUresult r = REAL(cuMemCreate)(h, n, prop, flags);
    uint64_t dev =
        prop && prop->location.type == MS_CU_MEM_LOCATION_TYPE_DEVICE && prop->location.id >= 0
            ? (uint64_t)prop->location.id + 1
            : current_device();
    alloc_done(r, MS_CU_MEM_CREATE, dev, r ? 0 : *h, n, prop ? (uint64_t)prop->type : 0, 0, FP);
    return r;
}

static ms_CUresult w_cuMemRelease(ms_CUmemGenericAllocationHandle h)
{
    FREE_CALL(MS_CU_MEM_RELEASE, current_device(), h, 0, 0, REAL(cuMemRelease)(h));
}

static ms_CUresult w_cuMemAddressReserve(ms_CUdeviceptr *p, size_t n, size_t align,
                                         ms_CUdeviceptr want, unsigned long long flags)
{
    ms_CUresult r = REAL(cuMemAddressReserve)(p, n, align, want, flags);
    if (r == MS_CUDA_SUCCESS)
        record_mem(MS_CU_MEM_ADDRESS_RESERVE, current_device(), *p, n, align, want, FP, 0);
    return r;
}

static ms_CUresult w_cuMemAddressFree(ms_CUdeviceptr p, size_t n)
{
    FREE_CALL(MS_CU_MEM_ADDRESS_FREE, current_device(), p, n, 0, REAL(cuMemAddressFree)(p, n));
}

static ms_CUresult w_cuMemMap(ms_CUdeviceptr p, size_t n, size_t off,
                              ms_CUmemGenericAllocationHandle h, unsigned long long flags)
{
    ms_CUresult r = REAL(cuMemMap)(p, n, off, h, flags);
    if (r == MS_CUDA_SUCCESS)
        record_mem(MS_CU_MEM_MAP, current_device(), p, n, h, off, FP, 0);
    return r;
}

static ms_CUresult w_cuMemUnmap(ms_CUdeviceptr p, size_t n)
{
    FREE_CALL(MS_CU_MEM_UNMAP, current_device(), p, n, 0, REAL(cuMemUnmap)(p, n));
}

static ms_CUresult w_cuMemHostAlloc(void **pp, size_t n, unsigned flags)
{
    ms_CUresult r = REAL(cuMemHostAlloc)(pp, n, flags);
    alloc_done(r, MS_CU_MEM_HOST_ALLOC, 0, r ? 0 : (uintptr_t)*pp, n, flags, 0, FP);
    return r;
}

static ms_CUresult w_cuMemAllocHost_v2(void **pp, size_t n)
{
    ms_CUresult r = REAL(cuMemAllocHost_v2)(pp, n);
    alloc_done(r, MS_CU_MEM_ALLOC_HOST, 0, r ? 0 : (uintptr_t)*pp, n, 0, 0, FP);
    return r;
}

static ms_CUresult w_cuMemFreeHost(void *p)
{
    FREE_CALL(MS_CU_MEM_FREE_HOST, 0, (uintptr_t)p, 0, 0, REAL(cuMemFreeHost)(p));
}

static ms_CUresult w_cuMemHostRegister_v2(void *p, size_t n, unsigned flags)
{
    ms_CUresult r = REAL(cuMemHostRegister_v2)(p, n, flags);
    if (r == MS_CUDA_SUCCESS)
        record_mem(MS_CU_MEM_HOST_REGISTER, 0, (uintptr_t)p, n, flags, 0, FP, 0);
    return r;
}

static ms_CUresult w_cuMemHostUnregister(void *p)
{
    FREE_CALL(MS_CU_MEM_HOST_UNREGISTER, 0, (uintptr_t)p, 0, 0, REAL(cuMemHostUnregister)(p));
}

static ms_CUresult w_cuIpcOpenMemHandle_v2(ms_CUdeviceptr *dp, ms_CUipcMemHandle h, unsigned flags)
{
    ms_CUresult r = REAL(cuIpcOpenMemHandle_v2)(dp, h, flags);
    if (r == MS_CUDA_SUCCESS) {
        ms_CUdeviceptr base = 0;
        size_t size = 0;
        if (drv_addr_range) {
            agent_tls.internal++;
            if (drv_addr_range(&base, &size, *dp) != MS_CUDA_SUCCESS)
                size = 0;
            agent_tls.internal--;
        }
        record_mem(MS_CU_IPC_OPEN, current_device(), *dp, size, flags, 0, FP, 0);
    }
    return r;
}

static ms_CUresult w_cuIpcCloseMemHandle(ms_CUdeviceptr p)
{
    FREE_CALL(MS_CU_IPC_CLOSE, current_device(), p, 0, 0, REAL(cuIpcCloseMemHandle)(p));
}

#define LAUNCH_WRAPPERS(sfx)                                                                       \
    static ms_CUresult w_cuLaunchKernel##sfx(                                                      \
        ms_CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,          \
        unsigned bz, unsigned shmem, ms_CUstream st, void **params, void **extra)                  \
    {                                                                                              \
        uint64_t ns = agent_now();                                                                 \
        ms_CUresult r =                                                                            \
            REAL(cuLaunchKernel##sfx)(f, gx, gy, gz, bx, by, bz, shmem, st, params, extra);        \
        if (r == MS_CUDA_SUCCESS)                                                                  \
            record_launch(MS_CU_LAUNCH_KERNEL, f, st, gx, gy, gz, bx, by, bz, shmem, FP, ns);      \
        return r;                                                                                  \
    }                                                                                              \
    static ms_CUresult w_cuLaunchKernelEx##sfx(const ms_CUlaunchConfig *cfg, ms_CUfunction f,      \
                                               void **params, void **extra)                        \
    {                                                                                              \
        uint64_t ns = agent_now();                                                                 \
        ms_CUresult r = REAL(cuLaunchKernelEx##sfx)(cfg, f, params, extra);                        \
        if (r == MS_CUDA_SUCCESS && cfg)                                                           \
            record_launch(MS_CU_LAUNCH_KERNEL_EX, f, cfg->hStream, cfg->gridDimX, cfg->gridDimY,   \
                          cfg->gridDimZ, cfg->blockDimX, cfg->blockDimY, cfg->blockDimZ,           \
                          cfg->sharedMemBytes, FP, ns);                                            \
        return r;                                                                                  \
    }                                                                                              \
    static ms_CUresult w_cuLaunchCooperativeKernel##sfx(                                           \
        ms_CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,          \
        unsigned bz, unsigned shmem, ms_CUstream st, void **params)                                \
    {                                                                                              \
        uint64_t ns = agent_now();                                                                 \
        ms_CUresult r =                                                                            \
            REAL(cuLaunchCooperativeKernel##sfx)(f, gx, gy, gz, bx, by, bz, shmem, st, params);    \
        if (r == MS_CUDA_SUCCESS)                                                                  \
            record_launch(MS_CU_LAUNCH_COOPERATIVE, f, st, gx, gy, gz, bx, by, bz, shmem, FP, ns); \
        return r;                                                                                  \
    }
LAUNCH_WRAPPERS()
LAUNCH_WRAPPERS(_ptsz)

/* ---- start ---- */

/* MEMSCOPE_DEVICE: a comma list of cpu, cuda, cuda:N (msMemScope's --device); default all. */
static void parse_devices(const char *s)
{
    if (!s || !*s)
        return;
    int any_cuda = 0;
    uint64_t mask = 0;
    while (*s) {
        const char *e = strchr(s, ',');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        if (len == 4 && !memcmp(s, "cuda", 4)) {
            any_cuda = 1;
            mask = ~0ull;
        } else if (len > 5 && !memcmp(s, "cuda:", 5)) {
            unsigned d = 0;
            for (size_t i = 5; i < len && d < 64; i++)
                d = s[i] >= '0' && s[i] <= '9' ? d * 10 + (unsigned)(s[i] - '0') : 64;
            any_cuda = 1;
            if (d < 64)
                mask |= 1ull << d;
        }
        s += len + (e != NULL);
    }
    cuda_off = !any_cuda;
    device_mask = mask;
}

static void has_launch(const char *s)
{
    for (; s && *s;) {
        const char *e = strchr(s, ',');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        if (len == 6 && !memcmp(s, "launch", 6))
            record_launches = 1;
        s += len + (e != NULL);
    }
}

void cuda_after_fork_child(void)
{
    memset(func_seen, 0, sizeof func_seen); /* the child's trace has no names yet */
}

void cuda_init(void)
{
    wrap_fn[V_cuGetProcAddress] = (uintptr_t)&w_cuGetProcAddress;
    wrap_fn[V_cuGetProcAddress_v2] = (uintptr_t)&w_cuGetProcAddress_v2;
    /* one list: W() ends each item with its own ';' */
    /* clang-format off */
#define W(name) wrap_fn[V_##name] = (uintptr_t)&w_##name;
    W(cuMemAlloc_v2) W(cuMemAllocPitch_v2) W(cuMemAllocManaged) W(cuMemFree_v2)
    W(cuMemAllocAsync) W(cuMemAllocAsync_ptsz) W(cuMemAllocFromPoolAsync)
    W(cuMemAllocFromPoolAsync_ptsz) W(cuMemFreeAsync) W(cuMemFreeAsync_ptsz) W(cuMemCreate)
    W(cuMemRelease) W(cuMemAddressReserve) W(cuMemAddressFree) W(cuMemMap) W(cuMemUnmap)
    W(cuMemHostAlloc) W(cuMemAllocHost_v2) W(cuMemFreeHost) W(cuMemHostRegister_v2)
    W(cuMemHostUnregister) W(cuIpcOpenMemHandle_v2) W(cuIpcCloseMemHandle) W(cuLaunchKernel)
    W(cuLaunchKernel_ptsz) W(cuLaunchKernelEx) W(cuLaunchKernelEx_ptsz)
    W(cuLaunchCooperativeKernel) W(cuLaunchCooperativeKernel_ptsz);
#undef W
    /* clang-format on */
    cuda_off = 0;
    parse_devices(getenv(MS_ENV_DEVICE));
    has_launch(getenv(MS_ENV_EVENTS));
    if (cuda_off)
        return;
    /* A driver the program links directly is loaded already: redirect its callers' GOT slots. */
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (!h) {
        agent_dl_forget_error();
        return;
    }
    void *any = ms_real_dlsym(h, "cuGetProcAddress");
    dlclose(h);
    if (!any)
        return;
    bind_driver((uintptr_t)any); /* and redirect_all() */
}

/* ---- direct binding: GOT slots ---- */

static void *dlopen_hook(const char *file, int mode);

/* Redirects, in every loaded object but the driver and the agent, the GOT slots bound to the
 * driver's hooked functions to their wrappers, and the slots of dlopen to dlopen_hook, so that
 * an object loaded later (PyTorch's libcaffe2_nvrtc.so links libcuda.so.1) is redirected as soon
 * as it is loaded. Runs once the driver is bound: before that, a program's dlopen is untouched.
 * NEEDSWORK: an object that links the driver and is dlopen'ed before anything looked a driver
 * function up with dlsym (so before the driver is bound) binds directly. */
static void redirect_all(void)
{
    static int lock;
    static uintptr_t orig[NVARIANTS], repl[NVARIANTS];
    static const char *names[NVARIANTS];
    static uintptr_t dl_orig[2], dl_repl[2];
    static const char *const dl_names[2] = {"dlopen", "dlopen"};
    if (cuda_off || !driver_bound)
        return;
    int err = errno;
    agent_tls.internal++;
    spin_lock(&lock);
    int n = 0;
    for (int i = 0; i < NVARIANTS; i++) {
        if (!real_fn[i] || (is_launch(i) && !record_launches))
            continue;
        names[n] = variant_names[i];
        orig[n] = real_fn[i];
        repl[n] = wrap_fn[i];
        n++;
    }
    struct got_set set = {n, names, orig, repl,
                          real_fn[V_cuGetProcAddress_v2] ? real_fn[V_cuGetProcAddress_v2]
                                                         : orig[0]};
    if (n)
        got_redirect(&set);
    if (!dl_orig[0]) {
        dl_orig[0] = (uintptr_t)ms_real_dlsym(RTLD_NEXT, "dlopen");
        dl_orig[1] = (uintptr_t)dlvsym(RTLD_NEXT, "dlopen", "GLIBC_2.2.5");
        dl_repl[0] = dl_repl[1] = (uintptr_t)&dlopen_hook;
    }
    struct got_set dl = {dl_orig[1] && dl_orig[1] != dl_orig[0] ? 2 : 1, dl_names, dl_orig, dl_repl,
                         0};
    if (dl_orig[0])
        got_redirect(&dl);
    spin_unlock(&lock);
    agent_tls.internal--;
    errno = err;
}

/* What the program's dlopen slots call once the driver is bound: dlopen with the caller's
 * search path (attach.c), then the new objects' slots redirected. */
static void *dlopen_hook(const char *file, int mode)
{
    void *h = agent_dlopen_as_caller(file, mode, __builtin_return_address(0));
    if (h) {
        int err = errno;
        redirect_all();
        errno = err;
    }
    return h;
}

/* ---- NVML: what the GPU reports (docs/cuda.md) ---- */

/* NVML's types and calls (nvml.h), the few used here. */
typedef struct nvmlDevice_st *nvml_device;
struct nvml_memory {
    unsigned long long total, free, used;
};
struct nvml_process {
    unsigned int pid;
    unsigned long long used;
    unsigned int gi, ci;
};
static struct {
    int (*init)(void);
    int (*by_bus_id)(const char *, nvml_device *);
    int (*memory)(nvml_device, struct nvml_memory *);
    int (*processes)(nvml_device, unsigned int *, struct nvml_process *);
    ms_CUresult (*device_count)(int *);
    ms_CUresult (*bus_id)(char *, int, ms_CUdevice);
    int state; /* 0 not tried, 1 ready, -1 unavailable */
} nvml;
static int nvml_lock;

/* Loads NVML (never for a program whose driver memscope has not seen) and the driver calls
 * that map CUDA ordinals to NVML devices (by PCI bus id: CUDA_VISIBLE_DEVICES and the
 * enumeration orders differ). Called with nvml_lock held. */
static int nvml_ready(void)
{
    if (nvml.state)
        return nvml.state > 0;
    nvml.state = -1;
    Dl_info di;
    void *cu = NULL;
    if (real_fn[V_cuGetProcAddress_v2] && dladdr((void *)real_fn[V_cuGetProcAddress_v2], &di) &&
        di.dli_fname)
        cu = dlopen(di.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (!cu)
        return 0;
    nvml.device_count = (ms_CUresult(*)(int *))ms_real_dlsym(cu, "cuDeviceGetCount");
    nvml.bus_id =
        (ms_CUresult(*)(char *, int, ms_CUdevice))ms_real_dlsym(cu, "cuDeviceGetPCIBusId");
    dlclose(cu);
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return 0;
    nvml.init = (int (*)(void))ms_real_dlsym(h, "nvmlInit_v2");
    nvml.by_bus_id =
        (int (*)(const char *, nvml_device *))ms_real_dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2");
    nvml.memory =
        (int (*)(nvml_device, struct nvml_memory *))ms_real_dlsym(h, "nvmlDeviceGetMemoryInfo");
    nvml.processes = (int (*)(nvml_device, unsigned int *, struct nvml_process *))ms_real_dlsym(
        h, "nvmlDeviceGetComputeRunningProcesses_v3");
    if (!nvml.init || !nvml.by_bus_id || !nvml.memory || !nvml.device_count || !nvml.bus_id ||
        nvml.init() != 0)
        return 0; /* the library stays loaded: unloading NVML mid-run is not worth the risk */
    nvml.state = 1;
    return 1;
}

/* At a step and at exit: a CUDA_USAGE record per CUDA device of the process, with what NVML
 * reports: the process's device memory (0 when NVML does not list it), the device's used and
 * total bytes. Nothing when the program never reached the driver or NVML is absent. */
void cuda_sample_usage(void)
{
    if (cuda_off || !driver_bound || !agent_active())
        return;
    int err = errno;
    agent_tls.internal++;
    if (!spin_trylock(&nvml_lock)) { /* another thread samples now */
        agent_tls.internal--;
        return;
    }
    int n = 0;
    if (nvml_ready() && nvml.device_count(&n) == MS_CUDA_SUCCESS) {
        static struct nvml_process procs[256];
        unsigned int pid = (unsigned int)getpid();
        for (int d = 0; d < n && d < 64; d++) {
            char bus[64];
            if (!device_wanted((uint64_t)d + 1))
                continue;
            nvml_device dev;
            struct nvml_memory m;
            if (nvml.bus_id(bus, sizeof bus, d) != MS_CUDA_SUCCESS ||
                nvml.by_bus_id(bus, &dev) != 0 || nvml.memory(dev, &m) != 0)
                continue;
            uint64_t mine = 0;
            unsigned int np = 256;
            if (nvml.processes && nvml.processes(dev, &np, procs) == 0)
                for (unsigned int i = 0; i < np && i < 256; i++)
                    if (procs[i].pid == pid)
                        mine = procs[i].used;
            agent_tls.internal--;
            uint64_t v[4] = {(uint64_t)d + 1, mine, m.used, m.total};
            record(MS_EXT_CUDA_USAGE, v, 4, -1, NULL, 0, NULL, 0);
            agent_tls.internal++;
        }
    }
    spin_unlock(&nvml_lock);
    agent_tls.internal--;
    errno = err;
}

/* nvtx.c: NVTX (NVIDIA Tools Extension) ranges and marks as memscope's own RANGE and MARK
 * records, through NVTX's injection mechanism (docs/cuda.md).
 *
 * NVTX is header-only in the program (nvtx3/nvToolsExt.h, used by PyTorch's torch.cuda.nvtx,
 * cuDNN users, NCCL, ...). At its first call it loads the library named by NVTX_INJECTION64_PATH
 * and calls its InitializeInjectionNvtx2(); `memscope run` sets that variable to the agent itself
 * (unless the user set it: Nsight's injection then wins and memscope says so), so this library
 * is found already loaded. Initialization asks NVTX for its callback tables and fills the slots
 * of the calls below: from then on the program's nvtx* calls land here.
 *
 * Push/pop ranges (nvtxRangePushA/Ex, nvtxDomainRangePushEx) become RANGE_PUSH/RANGE_POP records,
 * marks (nvtxMarkA/Ex, nvtxDomainMarkEx) MARK records, on the calling thread. A range of a named
 * domain is named "<domain>::<message>". Start/end ranges (nvtxRangeStartA/Ex, which may end on
 * another thread) are marks "start: <message>" and "end" with their id. Messages are ASCII,
 * registered strings, or wide strings narrowed to ASCII ('?' outside it). No allocation: domains
 * and registered strings live in static tables (NVTX_MAX_* entries; beyond, the calls return an
 * empty handle, which names nothing).
 *
 * NVTX's memory extension (nvToolsExtMem.h: a framework's pools described as heaps and the
 * regions handed out in them) loads the same injection's InitializeInjectionNvtxExtension(),
 * which fills the extension's slots: heaps become memscope pool regions (POOL_RESERVE /
 * POOL_RELEASE), regions pool blocks (POOL_ALLOC / POOL_FREE), of the pool named after the
 * domain ("NVTX" for the default one), as MSTX's memory API feeds msMemScope's pool layer.
 * Only virtual-address heaps and regions are recorded (the only type NVTX defines). */
#include "agent.h"

#include <stddef.h>
#include <string.h>
#include <wchar.h>

/* NVTX's injection interface (nvtx3/nvtxDetail/nvtxTypes.h, nvToolsExt.h): stable ids. */
enum { NVTX_ETID_CALLBACKS = 1 };
enum { NVTX_CB_MODULE_CORE = 1, NVTX_CB_MODULE_CORE2 = 5 };
enum {
    CORE_MarkEx = 1,
    CORE_MarkA = 2,
    CORE_MarkW = 3,
    CORE_RangeStartEx = 4,
    CORE_RangeStartA = 5,
    CORE_RangeStartW = 6,
    CORE_RangeEnd = 7,
    CORE_RangePushEx = 8,
    CORE_RangePushA = 9,
    CORE_RangePushW = 10,
    CORE_RangePop = 11,
};
enum {
    CORE2_DomainMarkEx = 1,
    CORE2_DomainRangeStartEx = 2,
    CORE2_DomainRangeEnd = 3,
    CORE2_DomainRangePushEx = 4,
    CORE2_DomainRangePop = 5,
    CORE2_DomainRegisterStringA = 10,
    CORE2_DomainRegisterStringW = 11,
    CORE2_DomainCreateA = 12,
    CORE2_DomainCreateW = 13,
    CORE2_DomainDestroy = 14,
};
enum { MSG_ASCII = 1, MSG_UNICODE = 2, MSG_REGISTERED = 3 };

typedef void (*nvtx_fn)(void);
struct nvtx_callbacks {
    size_t struct_size;
    int (*GetModuleFunctionTable)(int module, nvtx_fn ***table, unsigned int *size);
};

/* nvtxEventAttributes_v2: the fields read here (version, size, ..., messageType, message). */
struct nvtx_attr {
    uint16_t version, size;
    uint32_t category;
    int32_t colorType;
    uint32_t color;
    int32_t payloadType, reserved0;
    uint64_t payload;
    int32_t messageType;
    const void *message;
};
_Static_assert(offsetof(struct nvtx_attr, message) == 40, "nvtxEventAttributes_v2 layout");

#define NVTX_MAX_DOMAINS 256
#define NVTX_MAX_STRINGS 4096
#define NVTX_NAME 128

struct nvtx_name {
    char s[NVTX_NAME];
};
static struct nvtx_name domains[NVTX_MAX_DOMAINS], strings[NVTX_MAX_STRINGS];
static unsigned ndomains, nstrings; /* atomic */
static __thread int push_depth;
static uint64_t next_range_id; /* atomic */

/* A slot of table t; NULL when the id is outside it. */
static struct nvtx_name *claim(struct nvtx_name *t, unsigned *n, unsigned max)
{
    unsigned i = __atomic_fetch_add(n, 1, __ATOMIC_RELAXED);
    return i < max ? &t[i] : NULL;
}

/* Copies a wide string as ASCII ('?' outside it). */
static void narrow(char *out, size_t len, const wchar_t *w)
{
    size_t i = 0;
    for (; w && w[i] && i + 1 < len; i++)
        out[i] = w[i] > 0 && w[i] < 128 ? (char)w[i] : '?';
    out[i] = 0;
}

static int in_table(const void *p, const struct nvtx_name *t, unsigned max)
{
    return (const char *)p >= (const char *)t && (const char *)p < (const char *)(t + max);
}

/* The message of an event as text in buf ("<domain>::" first for a named domain). */
static const char *message(const void *domain, const struct nvtx_attr *a, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = 0;
    if (domain && in_table(domain, domains, NVTX_MAX_DOMAINS)) {
        const char *d = ((const struct nvtx_name *)domain)->s;
        off = strnlen(d, NVTX_NAME);
        if (off + 3 < len) {
            memcpy(buf, d, off);
            memcpy(buf + off, "::", 3);
            off += 2;
        } else {
            off = 0;
        }
    }
    if (!a || a->size < offsetof(struct nvtx_attr, message) + sizeof(void *) || !a->message)
        return buf;
    if (a->messageType == MSG_ASCII) {
        size_t n = strnlen((const char *)a->message, len - off - 1);
        memcpy(buf + off, a->message, n);
        buf[off + n] = 0;
    } else if (a->messageType == MSG_UNICODE) {
        narrow(buf + off, len - off, (const wchar_t *)a->message);
    } else if (a->messageType == MSG_REGISTERED &&
               in_table(a->message, strings, NVTX_MAX_STRINGS)) {
        size_t n = strnlen(((const struct nvtx_name *)a->message)->s, len - off - 1);
        memcpy(buf + off, ((const struct nvtx_name *)a->message)->s, n);
        buf[off + n] = 0;
    }
    return buf;
}

/* ---- the callbacks ---- */

static void mark_ex(const struct nvtx_attr *a)
{
    char b[MS_TRACE_MAX_LABEL];
    memscope__mark(message(NULL, a, b, sizeof b));
}

static void mark_a(const char *m)
{
    memscope__mark(m ? m : "");
}

static void mark_w(const wchar_t *m)
{
    char b[MS_TRACE_MAX_LABEL];
    narrow(b, sizeof b, m);
    memscope__mark(b);
}

static int push_text(const char *m)
{
    memscope__range_push(m ? m : "");
    return push_depth++;
}

static int push_ex(const struct nvtx_attr *a)
{
    char b[MS_TRACE_MAX_LABEL];
    return push_text(message(NULL, a, b, sizeof b));
}

static int push_a(const char *m)
{
    return push_text(m);
}

static int push_w(const wchar_t *m)
{
    char b[MS_TRACE_MAX_LABEL];
    narrow(b, sizeof b, m);
    return push_text(b);
}

static int pop(void)
{
    if (push_depth == 0)
        return -1; /* NVTX: a pop without a push */
    memscope__range_pop();
    return --push_depth;
}

static uint64_t start_text(const char *m)
{
    uint64_t id = __atomic_add_fetch(&next_range_id, 1, __ATOMIC_RELAXED);
    char b[MS_TRACE_MAX_LABEL];
    size_t n = 0;
    memcpy(b, "start: ", 7);
    n = 7;
    size_t l = strnlen(m ? m : "", sizeof b - n - 1);
    memcpy(b + n, m ? m : "", l);
    b[n + l] = 0;
    memscope__mark(b);
    return id;
}

static uint64_t start_ex(const struct nvtx_attr *a)
{
    char b[MS_TRACE_MAX_LABEL - 8];
    return start_text(message(NULL, a, b, sizeof b));
}

static uint64_t start_a(const char *m)
{
    return start_text(m);
}

static uint64_t start_w(const wchar_t *m)
{
    char b[MS_TRACE_MAX_LABEL - 8];
    narrow(b, sizeof b, m);
    return start_text(b);
}

static void range_end(uint64_t id)
{
    (void)id;
    memscope__mark("end");
}

static void domain_mark(const void *d, const struct nvtx_attr *a)
{
    char b[MS_TRACE_MAX_LABEL];
    memscope__mark(message(d, a, b, sizeof b));
}

static uint64_t domain_start(const void *d, const struct nvtx_attr *a)
{
    char b[MS_TRACE_MAX_LABEL - 8];
    return start_text(message(d, a, b, sizeof b));
}

static void domain_end(const void *d, uint64_t id)
{
    (void)d;
    range_end(id);
}

static int domain_push(const void *d, const struct nvtx_attr *a)
{
    char b[MS_TRACE_MAX_LABEL];
    return push_text(message(d, a, b, sizeof b));
}

static int domain_pop(const void *d)
{
    (void)d;
    return pop();
}

static void *name_a(struct nvtx_name *t, unsigned *n, unsigned max, const char *s)
{
    struct nvtx_name *x = claim(t, n, max);
    if (x) {
        size_t l = strnlen(s ? s : "", NVTX_NAME - 1);
        memcpy(x->s, s ? s : "", l);
        x->s[l] = 0;
    }
    return x;
}

static void *name_w(struct nvtx_name *t, unsigned *n, unsigned max, const wchar_t *s)
{
    struct nvtx_name *x = claim(t, n, max);
    if (x)
        narrow(x->s, NVTX_NAME, s);
    return x;
}

static void *register_a(const void *d, const char *s)
{
    (void)d;
    return name_a(strings, &nstrings, NVTX_MAX_STRINGS, s);
}

static void *register_w(const void *d, const wchar_t *s)
{
    (void)d;
    return name_w(strings, &nstrings, NVTX_MAX_STRINGS, s);
}

static void *domain_create_a(const char *s)
{
    return name_a(domains, &ndomains, NVTX_MAX_DOMAINS, s);
}

static void *domain_create_w(const wchar_t *s)
{
    return name_w(domains, &ndomains, NVTX_MAX_DOMAINS, s);
}

static void domain_destroy(void *d)
{
    (void)d; /* its slot stays: the handle may still name ranges being written */
}

/* Fills the slots ids[i] of module m with fns[i] (the ids the table has). */
static int fill(const struct nvtx_callbacks *cb, int m, const int *ids, nvtx_fn const *fns, int n)
{
    nvtx_fn **table = NULL;
    unsigned int size = 0;
    if (!cb->GetModuleFunctionTable(m, &table, &size) || !table)
        return 0;
    for (int i = 0; i < n; i++)
        if ((unsigned)ids[i] < size && table[ids[i]])
            *table[ids[i]] = fns[i];
    return 1;
}

#define F(f) ((nvtx_fn)(void (*)(void))(f))

/* NVTX's entry point into an injection library: returns 1 when memscope took the calls. */
AGENT_API int InitializeInjectionNvtx2(const void *(*get_export_table)(uint32_t))
{
    if (!get_export_table || !agent.initialized)
        return 0;
    const struct nvtx_callbacks *cb = get_export_table(NVTX_ETID_CALLBACKS);
    if (!cb || cb->struct_size < sizeof *cb || !cb->GetModuleFunctionTable)
        return 0;
    static const int core_ids[] = {CORE_MarkEx,       CORE_MarkA,       CORE_MarkW,
                                   CORE_RangeStartEx, CORE_RangeStartA, CORE_RangeStartW,
                                   CORE_RangeEnd,     CORE_RangePushEx, CORE_RangePushA,
                                   CORE_RangePushW,   CORE_RangePop};
    const nvtx_fn core_fns[] = {F(mark_ex), F(mark_a),  F(mark_w),    F(start_ex),
                                F(start_a), F(start_w), F(range_end), F(push_ex),
                                F(push_a),  F(push_w),  F(pop)};
    static const int core2_ids[] = {CORE2_DomainMarkEx,          CORE2_DomainRangeStartEx,
                                    CORE2_DomainRangeEnd,        CORE2_DomainRangePushEx,
                                    CORE2_DomainRangePop,        CORE2_DomainRegisterStringA,
                                    CORE2_DomainRegisterStringW, CORE2_DomainCreateA,
                                    CORE2_DomainCreateW,         CORE2_DomainDestroy};
    const nvtx_fn core2_fns[] = {
        F(domain_mark), F(domain_start), F(domain_end),      F(domain_push),     F(domain_pop),
        F(register_a),  F(register_w),   F(domain_create_a), F(domain_create_w), F(domain_destroy)};
    int ok = fill(cb, NVTX_CB_MODULE_CORE, core_ids, core_fns, 11);
    ok &= fill(cb, NVTX_CB_MODULE_CORE2, core2_ids, core2_fns, 10);
    return ok;
}

/* ---- the memory extension (nvtx3/nvToolsExtMem.h, nvtxDetail/nvtxExtTypes.h) ---- */

enum { NVTX_EXT_MODULEID_MEM = 1, NVTX_EXT_COMPATID_MEM = 0x0102, NVTX_MEM_TYPE_VIRTUAL = 1 };
enum {
    MEM_HeapRegister = 0,
    MEM_HeapUnregister = 1,
    MEM_HeapReset = 2,
    MEM_RegionsRegister = 3,
    MEM_RegionsUnregister = 5
};
enum { REF_POINTER = 1, REF_HANDLE = 2 };

struct nvtx_ext_segment {
    size_t id, slots;
    intptr_t *fn;
};
struct nvtx_ext_module {
    uint16_t nvtx_ver, struct_size, module_id, compat_id;
    size_t nsegments;
    struct nvtx_ext_segment *segments;
    void *get_export;
    const void *ext_info;
};
struct nvtx_range_desc {
    size_t size;
    const void *ptr;
};
struct nvtx_heap_desc {
    uint16_t compat, struct_size;
    uint32_t reserved0, usage, type;
    size_t desc_size;
    const void *desc;
};
struct nvtx_regions {
    uint16_t compat, struct_size;
    uint32_t type;
    const void *heap;
    size_t count, elem_size;
    const void *elems;
    const void **handles_out;
};
struct nvtx_unregister {
    uint16_t compat, struct_size;
    uint32_t ref_type;
    size_t count, elem_size;
    const void *const *refs;
};

#define NVTX_MAX_HEAPS 1024
static struct nvtx_heap {
    const void *ptr;
    size_t size;
    char pool[NVTX_NAME];
} heaps[NVTX_MAX_HEAPS];
static unsigned nheaps; /* atomic */

/* The pool a domain's heaps and regions belong to. */
static const char *pool_of(const void *domain)
{
    if (domain && in_table(domain, domains, NVTX_MAX_DOMAINS))
        return ((const struct nvtx_name *)domain)->s;
    return "NVTX";
}

static int is_heap(const void *h)
{
    return (const char *)h >= (const char *)heaps &&
           (const char *)h < (const char *)(heaps + NVTX_MAX_HEAPS);
}

static const void *heap_register(const void *domain, const struct nvtx_heap_desc *d)
{
    if (!d || d->struct_size < sizeof *d || d->type != NVTX_MEM_TYPE_VIRTUAL || !d->desc ||
        d->desc_size < sizeof(struct nvtx_range_desc))
        return NULL;
    const struct nvtx_range_desc *r = d->desc;
    unsigned i = __atomic_fetch_add(&nheaps, 1, __ATOMIC_RELAXED);
    const char *pool = pool_of(domain);
    memscope__pool_reserve(pool, r->ptr, r->size);
    if (i >= NVTX_MAX_HEAPS)
        return NULL; /* recorded; its unregister cannot be */
    struct nvtx_heap *h = &heaps[i];
    h->ptr = r->ptr;
    h->size = r->size;
    size_t l = strnlen(pool, NVTX_NAME - 1);
    memcpy(h->pool, pool, l);
    h->pool[l] = 0;
    return h;
}

static void heap_unregister(const void *domain, const void *heap)
{
    (void)domain;
    if (is_heap(heap))
        memscope__pool_release(((const struct nvtx_heap *)heap)->pool,
                               ((const struct nvtx_heap *)heap)->ptr);
}

static void heap_reset(const void *domain, const void *heap)
{
    (void)domain;
    (void)heap; /* NEEDSWORK: the regions a reset frees are not listed by NVTX: they stay live */
}

static void regions_register(const void *domain, const struct nvtx_regions *b)
{
    if (!b || b->struct_size < sizeof *b || b->type != NVTX_MEM_TYPE_VIRTUAL || !b->elems ||
        b->elem_size < sizeof(struct nvtx_range_desc))
        return;
    const char *pool =
        is_heap(b->heap) ? ((const struct nvtx_heap *)b->heap)->pool : pool_of(domain);
    for (size_t i = 0; i < b->count; i++) {
        const struct nvtx_range_desc *r = (const void *)((const char *)b->elems + i * b->elem_size);
        memscope__pool_alloc(pool, r->ptr, r->size);
        if (b->handles_out)
            b->handles_out[i] = r->ptr; /* a region's handle is its address */
    }
}

static void regions_unregister(const void *domain, const struct nvtx_unregister *b)
{
    if (!b || b->struct_size < sizeof *b || !b->refs || b->elem_size < sizeof(void *) ||
        (b->ref_type != REF_POINTER && b->ref_type != REF_HANDLE))
        return;
    const char *pool = pool_of(domain);
    for (size_t i = 0; i < b->count; i++)
        memscope__pool_free(pool, *(const void *const *)((const char *)b->refs + i * b->elem_size));
}

/* NVTX's entry point into an injection library for an extension module: 1 when memscope took
 * the memory extension's calls, 0 for the other extensions (NVTX then disables them). */
AGENT_API int InitializeInjectionNvtxExtension(struct nvtx_ext_module *m)
{
    if (!m || !agent.initialized || m->module_id != NVTX_EXT_MODULEID_MEM ||
        m->compat_id != NVTX_EXT_COMPATID_MEM || m->nsegments < 1 || !m->segments ||
        !m->segments[0].fn || m->segments[0].slots <= MEM_RegionsUnregister)
        return 0;
    intptr_t *slot = m->segments[0].fn;
    slot[MEM_HeapRegister] = (intptr_t)&heap_register;
    slot[MEM_HeapUnregister] = (intptr_t)&heap_unregister;
    slot[MEM_HeapReset] = (intptr_t)&heap_reset;
    slot[MEM_RegionsRegister] = (intptr_t)&regions_register;
    slot[MEM_RegionsUnregister] = (intptr_t)&regions_unregister;
    return 1;
}

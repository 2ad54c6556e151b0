/* reader.c: bounded reader for memscope traces (see format.h and reader.h).
 *
 * Called by the store (trace -> database), the CLI and the fuzz target. Workload: files of up
 * to many GiB read sequentially once or twice; the file is mapped read-only and never copied. */
#include "reader.h"

#include "encode.h"
#include "unpack.h"
#include "common/ms_error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static void warn_once(struct ms_trace *t, const char *msg, uint64_t off)
{
    if (!t->warning[0])
        snprintf(t->warning, sizeof t->warning, "%s at byte %llu", msg, (unsigned long long)off);
}

static uint32_t rd32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static uint64_t rd64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static int cmp_chunk(const void *a, const void *b)
{
    const struct ms_trace_chunk_info *x = a, *y = b;
    if (x->thread_serial != y->thread_serial)
        return x->thread_serial < y->thread_serial ? -1 : 1;
    if (x->seq != y->seq)
        return x->seq < y->seq ? -1 : 1;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

/* Reads the chunk header at off into ci; returns 0, or -1 when it is not a plausible one. */
static int read_v2_chunk(const struct ms_trace *t, uint64_t off, struct ms_trace_chunk_info *ci)
{
    const uint8_t *c = t->data + off;
    uint32_t magic = rd32(c), size = rd32(c + 4), used = rd32(c + 20);
    if ((magic != MS_TRACE_CHUNK_MAGIC && magic != MS_TRACE_PACK_MAGIC) ||
        size < MS_TRACE_CHUNK_HEADER_SIZE || size > MS_TRACE_MAX_CHUNK)
        return -1;
    if (magic == MS_TRACE_CHUNK_MAGIC ? used > size - MS_TRACE_CHUNK_HEADER_SIZE
                                      : used > MS_PACK_MAX_RAW)
        return -1;
    ci->offset = off;
    ci->size = size;
    ci->tid = rd32(c + 8);
    ci->thread_serial = rd32(c + 12);
    ci->seq = rd32(c + 16);
    ci->used = used;
    ci->base_ns = rd64(c + 24);
    ci->packed = magic == MS_TRACE_PACK_MAGIC;
    return 0;
}

/* Indexes the chunks of a packed (version 2) file: chunks back to back, no alignment. After a
 * damaged chunk header the reader looks for the next plausible one, byte by byte. */
static int index_v2(struct ms_trace *t)
{
    size_t cap = t->size / MS_TRACE_CHUNK_HEADER_SIZE + 1, n = 0;
    t->chunks = calloc(cap, sizeof *t->chunks);
    if (!t->chunks)
        return MS_ENOMEM;
    uint64_t off = MS_TRACE_V2_HEADER_SIZE;
    int lost = 0;
    while (off + MS_TRACE_CHUNK_HEADER_SIZE <= t->size && n < cap) {
        struct ms_trace_chunk_info *ci = &t->chunks[n];
        if (read_v2_chunk(t, off, ci) < 0) {
            if (!lost)
                warn_once(t, "damaged chunk header", off);
            lost = 1;
            t->skipped_bytes++;
            off++;
            continue;
        }
        lost = 0;
        if (off + ci->size > t->size) {
            warn_once(t, "trace truncated inside a chunk", off);
            ci->size = (uint32_t)(t->size - off);
            if (!ci->packed && ci->used > ci->size - MS_TRACE_CHUNK_HEADER_SIZE)
                ci->used = ci->size - MS_TRACE_CHUNK_HEADER_SIZE;
        }
        off += ci->size;
        n++;
    }
    if (off < t->size && !lost) {
        warn_once(t, "trace truncated inside a chunk header", off);
        t->skipped_bytes += t->size - off;
    } else if (t->hdr.file_end > t->size) /* the packer writes the exact size */
        warn_once(t, "trace truncated at a chunk boundary", t->size);
    t->nchunks = n;
    qsort(t->chunks, n, sizeof *t->chunks, cmp_chunk);
    return 0;
}

/* Validates the header and indexes the chunks. */
static int index_trace(struct ms_trace *t)
{
    const uint8_t *d = t->data;
    struct ms_trace_file_header *h = &t->hdr;

    if (t->size < sizeof *h)
        return MS_ETRUNC;
    if (memcmp(d, MS_TRACE_MAGIC, 8) != 0)
        return MS_EFORMAT;
    memcpy(h, d, sizeof *h);
    if (h->version > MS_TRACE_MAX_VERSION)
        return MS_EVERSION;
    if (h->max_depth > MS_TRACE_MAX_DEPTH)
        h->max_depth = MS_TRACE_MAX_DEPTH;
    if (h->version == MS_TRACE_PACKED_VERSION) {
        if (h->header_size != MS_TRACE_V2_HEADER_SIZE || h->chunk_align != 1)
            return MS_EFORMAT;
        return index_v2(t);
    }
    if (h->version == 0 || h->header_size != MS_TRACE_HEADER_SIZE ||
        h->chunk_align != MS_TRACE_CHUNK_ALIGN)
        return MS_EFORMAT;

    uint64_t off = MS_TRACE_HEADER_SIZE;
    /* --trace-ring: the chunks before ring_start were dropped (a hole in the file); what comes
     * before the first whole chunk there is the tail of a dropped one */
    int dropped_tail = 0;
    if (h->ring_start > off && h->ring_start < t->size && h->ring_start % MS_TRACE_CHUNK_ALIGN == 0)
        off = h->ring_start, dropped_tail = 1;
    size_t cap = (t->size > off ? (t->size - off) / MS_TRACE_CHUNK_ALIGN : 0) + 1, n = 0;
    t->chunks = calloc(cap, sizeof *t->chunks);
    if (!t->chunks)
        return MS_ENOMEM;
    while (off + MS_TRACE_CHUNK_HEADER_SIZE <= t->size) {
        const uint8_t *c = d + off;
        uint32_t size = rd32(c + 4);
        if (rd32(c) != MS_TRACE_CHUNK_MAGIC || size < MS_TRACE_CHUNK_ALIGN ||
            size % MS_TRACE_CHUNK_ALIGN || size > MS_TRACE_MAX_CHUNK) {
            size_t span =
                t->size - off < MS_TRACE_CHUNK_ALIGN ? t->size - off : MS_TRACE_CHUNK_ALIGN;
            if (!dropped_tail && !all_zero(c, span)) {
                warn_once(t, "damaged chunk header", off);
                t->skipped_bytes += span;
            }
            off += MS_TRACE_CHUNK_ALIGN;
            continue;
        }
        struct ms_trace_chunk_info *ci = &t->chunks[n++];
        dropped_tail = 0;
        ci->offset = off;
        ci->size = size;
        if (off + size > t->size) {
            warn_once(t, "trace truncated inside a chunk", off);
            ci->size = (uint32_t)(t->size - off);
        }
        ci->tid = rd32(c + 8);
        ci->thread_serial = rd32(c + 12);
        ci->seq = rd32(c + 16);
        ci->used = rd32(c + 20);
        ci->base_ns = rd64(c + 24);
        if (ci->used > ci->size - MS_TRACE_CHUNK_HEADER_SIZE) {
            warn_once(t, "chunk claims more bytes than it holds", off);
            ci->used = ci->size - MS_TRACE_CHUNK_HEADER_SIZE;
        }
        off += size;
    }
    t->nchunks = n;
    qsort(t->chunks, n, sizeof *t->chunks, cmp_chunk);
    return 0;
}

int ms_trace_open_mem(struct ms_trace *t, const uint8_t *data, size_t len)
{
    memset(t, 0, sizeof *t);
    t->data = data;
    t->size = len;
    int rc = index_trace(t);
    if (rc < 0)
        ms_trace_release(t);
    return rc;
}

int ms_trace_open(struct ms_trace *t, const char *path)
{
    memset(t, 0, sizeof *t);
    /* non-blocking: a FIFO named like a trace must not block the reader (it is refused below) */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return MS_EFORMAT;
    }
    if ((size_t)st.st_size < sizeof(struct ms_trace_file_header)) {
        close(fd);
        return MS_ETRUNC;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED)
        return -e;
    t->data = p;
    t->size = (size_t)st.st_size;
    t->mapped = 1;
    int rc = index_trace(t);
    if (rc < 0)
        ms_trace_release(t);
    return rc;
}

void ms_trace_release(struct ms_trace *t)
{
    if (!t)
        return;
    if (t->mapped && t->data)
        munmap((void *)t->data, t->size);
    free(t->chunks);
    memset(t, 0, sizeof *t);
}

void ms_trace_cursor_release(struct ms_trace_cursor *c)
{
    free(c->own);
    c->own = NULL;
}

void ms_trace_cursor_init(struct ms_trace_cursor *c, const struct ms_trace *t, size_t chunk)
{
    const struct ms_trace_chunk_info *ci = &t->chunks[chunk];
    ms_trace_cursor_release(c);
    c->p = t->data + ci->offset + MS_TRACE_CHUNK_HEADER_SIZE;
    c->end = c->p + ci->used;
    c->prev_ns = ci->base_ns;
    c->prev_addr = 0;
    c->tid = ci->tid;
    c->thread_serial = ci->thread_serial;
    c->failed = 0;
    c->damaged_tail = 0;
    if (!ci->packed)
        return;
    /* NEEDSWORK: a reader merging all threads (the store) holds one decoded chunk per thread,
     * up to MS_PACK_MAX_RAW each: 1 GiB for 1000 threads that all made millions of events,
     * where a raw trace is only mapped. Decoding segment by segment would bound it. */
    size_t n = 0;
    c->own = malloc(ci->used ? ci->used : 1);
    if (c->own)
        n = ms_pack_decode(c->p, ci->size - MS_TRACE_CHUNK_HEADER_SIZE, ci->base_ns, c->own,
                           ci->used, &c->damaged_tail);
    else
        c->damaged_tail = MS_PACK_OOM;
    c->p = c->own;
    c->end = c->own + n;
}

static int get_ts(struct ms_trace_cursor *c, uint64_t *ns)
{
    uint64_t d;
    if (ms_get_varint(&c->p, c->end, &d))
        return -1;
    c->prev_ns += d;
    *ns = c->prev_ns;
    return 0;
}

/* Reads an address delta; unit is 1, or 16 for records with MS_REC_F_ALIGNED16. */
static int get_addr_unit(struct ms_trace_cursor *c, uint64_t *addr, uint64_t unit)
{
    uint64_t z;
    if (ms_get_varint(&c->p, c->end, &z))
        return -1;
    c->prev_addr += (uint64_t)ms_unzigzag(z) * unit;
    *addr = c->prev_addr;
    return 0;
}

static int get_addr(struct ms_trace_cursor *c, uint64_t *addr)
{
    return get_addr_unit(c, addr, 1);
}

/* Reads a length-prefixed byte string of at most cap bytes. */
static int get_bytes(struct ms_trace_cursor *c, size_t cap, const char **s, size_t *len)
{
    uint64_t n;
    if (ms_get_varint(&c->p, c->end, &n) || n > cap || n > (uint64_t)(c->end - c->p))
        return -1;
    *s = (const char *)c->p;
    *len = (size_t)n;
    c->p += n;
    return 0;
}

/* The CUDA records (format.h): their integers go to c->pcs (r->pcs, r->depth of them, in record
 * order after dts), the main ones also to r->flags (op), r->addr, r->size and r->stack_id, and
 * CUDA_FUNC's name to str1. */
static int decode_cuda(struct ms_trace_cursor *c, struct ms_record *r, struct ms_trace_cursor *sub,
                       int type, const uint8_t *after)
{
    /* integers after dts, and the positions of op, addr, size, stack, device (-1: none) */
    static const int8_t layout[5][6] = {
        {8, 0, 2, 3, 4, 1},     /* MEM: op device addr size stack aux1 aux2 aux3 */
        {6, 0, -1, 2, 3, 1},    /* OOM: op device size stack free total */
        {12, 0, -1, -1, 11, 1}, /* LAUNCH: op device func stream gx gy gz bx by bz shmem stack */
        {1, -1, 0, -1, -1, -1}, /* FUNC: func, then the name */
        {4, -1, -1, -1, -1, 0}, /* USAGE: device process_used device_used device_total */
    };
    const int8_t *l = layout[type - MS_EXT_CUDA_MEM];
    if (get_ts(sub, &r->ns))
        return -1;
    c->prev_ns = sub->prev_ns;
    for (int i = 0; i < l[0]; i++)
        if (ms_get_varint(&sub->p, sub->end, &c->pcs[i]))
            return -1;
    if (l[1] >= 0) {
        if (c->pcs[l[1]] == MS_CU_NONE || c->pcs[l[1]] >= MS_CU_OP_COUNT)
            return -1;
        r->flags = (uint32_t)c->pcs[l[1]];
    }
    if (l[5] >= 0 && c->pcs[l[5]] > UINT32_MAX)
        return -1; /* device */
    if (l[2] >= 0)
        r->addr = c->pcs[l[2]];
    if (l[3] >= 0)
        r->size = c->pcs[l[3]];
    if (l[4] >= 0) {
        if (c->pcs[l[4]] > UINT32_MAX)
            return -1;
        r->stack_id = (uint32_t)c->pcs[l[4]];
    }
    r->pcs = c->pcs;
    r->depth = (uint32_t)l[0];
    if (type == MS_EXT_CUDA_FUNC && get_bytes(sub, MS_TRACE_MAX_LABEL, &r->str1, &r->len1))
        return -1;
    c->p = after;
    return 0;
}

/* An extension record: every reader applies its leading dts; known types are decoded, unknown
 * ones are returned with the rest of their payload in str1. */
static int decode_ext(struct ms_trace_cursor *c, struct ms_record *r, int type)
{
    const char *payload;
    size_t plen;
    r->type = MS_REC_EXTENSION;
    r->fn = type;
    if (get_bytes(c, MS_TRACE_MAX_CHUNK, &payload, &plen))
        return -1;
    struct ms_trace_cursor sub = *c; /* decode the payload with the same delta state */
    const uint8_t *after = c->p;
    sub.p = (const uint8_t *)payload;
    sub.end = sub.p + plen;
    uint64_t v[3] = {0, 0, 0};
    int nint = 0, str = 0;
    switch (type) {
    case MS_EXT_STEP:
    case MS_EXT_OWNER_POP:
    case MS_EXT_RANGE_POP:
    case MS_EXT_PYRETURN: break;
    case MS_EXT_PYCALL: nint = 1; break;
    case MS_EXT_OWNER_PUSH:
    case MS_EXT_MARK:
    case MS_EXT_RANGE_PUSH: str = 1; break;
    case MS_EXT_ACCESS:
    case MS_EXT_POOL_ALLOC:
    case MS_EXT_POOL_RESERVE:
        nint = 3;
        str = 1;
        break;
    case MS_EXT_MMAP_RESERVE:
    case MS_EXT_MMAP_COMMIT: nint = 3; break; /* addr size stack */
    case MS_EXT_MMAP_DECOMMIT: nint = 2; break;
    case MS_EXT_EXEC: /* pid why str */
        nint = 2;
        str = 1;
        break;
    case MS_EXT_EXEC_FAILED: break;
    case MS_EXT_POOL_FREE:
    case MS_EXT_POOL_RELEASE:
        nint = 1;
        str = 1;
        break;
    case MS_EXT_PYFRAME:
        nint = 2;
        str = 1;
        break;
    case MS_EXT_PYSTACK: nint = 2; break; /* id, depth; then the pairs below */
    case MS_EXT_CUDA_MEM:
    case MS_EXT_CUDA_OOM:
    case MS_EXT_CUDA_LAUNCH:
    case MS_EXT_CUDA_FUNC:
    case MS_EXT_CUDA_USAGE: return decode_cuda(c, r, &sub, type, after);
    default: nint = -1; break;
    }
    if (get_ts(&sub, &r->ns))
        return -1;
    c->prev_ns = sub.prev_ns;
    if (nint < 0) { /* unknown: the caller may skip it */
        r->str1 = (const char *)sub.p;
        r->len1 = (size_t)(sub.end - sub.p);
        c->p = after;
        return 0;
    }
    for (int i = 0; i < nint; i++)
        if (ms_get_varint(&sub.p, sub.end, &v[i]))
            return -1;
    r->addr = v[0];
    r->size = v[1];
    if (type == MS_EXT_PYSTACK) {
        if (v[0] == 0 || v[0] > UINT32_MAX || v[1] > MS_TRACE_MAX_DEPTH)
            return -1;
        r->stack_id = (uint32_t)v[0];
        r->depth = (uint32_t)v[1];
        for (uint64_t i = 0; i < 2 * v[1]; i++)
            if (ms_get_varint(&sub.p, sub.end, &c->pcs[i]))
                return -1;
        r->pcs = c->pcs;
        c->p = after;
        return 0;
    }
    if (type == MS_EXT_PYFRAME) {
        if (v[0] == 0 || v[0] > UINT32_MAX || v[1] > INT32_MAX)
            return -1;
    }
    if (type == MS_EXT_ACCESS) {
        if (v[2] > 3)
            return -1;
        r->flags = (uint32_t)v[2];
    } else if (nint == 3) {
        if (v[2] > UINT32_MAX)
            return -1;
        r->stack_id = (uint32_t)v[2];
    }
    if (str && get_bytes(&sub, MS_TRACE_MAX_LABEL, &r->str1, &r->len1))
        return -1;
    c->p = after;
    return 0;
}

static int decode(struct ms_trace_cursor *c, struct ms_record *r)
{
    uint64_t v;
    int type = *c->p++;
    uint64_t unit = 1;
    memset(r, 0, sizeof *r);
    if (type >= MS_REC_EXTENSION)
        return decode_ext(c, r, type);
    if ((type & 0xf0) == (MS_REC_HEAP_ALLOC | MS_REC_F_ALIGNED16) ||
        type == (MS_REC_HEAP_FREE | MS_REC_F_ALIGNED16)) {
        type &= ~MS_REC_F_ALIGNED16;
        unit = 16;
    }
    if ((type & 0xf0) == MS_REC_HEAP_ALLOC || (type & 0xf8) == MS_REC_MMAP_ALLOC) {
        r->type = type & ((type & 0xf0) == MS_REC_HEAP_ALLOC ? 0xf0 : 0xf8);
        r->fn = type - r->type;
        if (r->type == MS_REC_HEAP_ALLOC && r->fn >= MS_FN_HEAP_COUNT)
            return -1;
        if (r->type == MS_REC_MMAP_ALLOC && r->fn > MS_FN_MREMAP)
            return -1;
        if (get_ts(c, &r->ns) || get_addr_unit(c, &r->addr, unit) ||
            ms_get_varint(&c->p, c->end, &r->size) || ms_get_varint(&c->p, c->end, &v) ||
            v > UINT32_MAX)
            return -1;
        r->stack_id = (uint32_t)v;
        return 0;
    }
    r->type = type;
    switch (type) {
    case MS_REC_HEAP_FREE: return get_ts(c, &r->ns) || get_addr_unit(c, &r->addr, unit) ? -1 : 0;
    case MS_REC_MUNMAP:
        return get_ts(c, &r->ns) || get_addr(c, &r->addr) || ms_get_varint(&c->p, c->end, &r->size)
                   ? -1
                   : 0;
    case MS_REC_LOST: return get_ts(c, &r->ns) || ms_get_varint(&c->p, c->end, &r->size) ? -1 : 0;
    case MS_REC_STACK: {
        uint64_t id, depth, pc;
        if (ms_get_varint(&c->p, c->end, &id) || id == 0 || id > UINT32_MAX ||
            ms_get_varint(&c->p, c->end, &depth) || depth > MS_TRACE_MAX_DEPTH)
            return -1;
        for (uint64_t i = 0; i < depth; i++) {
            if (ms_get_varint(&c->p, c->end, &v))
                return -1;
            pc = i ? c->pcs[i - 1] + (uint64_t)ms_unzigzag(v) : v;
            c->pcs[i] = pc;
        }
        r->stack_id = (uint32_t)id;
        r->depth = (uint32_t)depth;
        r->pcs = c->pcs;
        return 0;
    }
    case MS_REC_MODULE:
        if (ms_get_varint(&c->p, c->end, &r->bias) || ms_get_varint(&c->p, c->end, &r->lo) ||
            ms_get_varint(&c->p, c->end, &r->hi) || r->hi < r->lo)
            return -1;
        return get_bytes(c, MS_TRACE_MAX_PATH, &r->str1, &r->len1);
    case MS_REC_PROCESS:
        if (ms_get_varint(&c->p, c->end, &r->ppid) ||
            get_bytes(c, MS_TRACE_MAX_PATH, &r->str1, &r->len1))
            return -1;
        return get_bytes(c, MS_TRACE_MAX_CMDLINE, &r->str2, &r->len2);
    default: return -1;
    }
}

int ms_trace_cursor_next(struct ms_trace_cursor *c, struct ms_record *r)
{
    if (c->failed)
        return 0;
    if (c->p >= c->end) {
        if (!c->damaged_tail)
            return 0;
        c->failed = 1;
        return c->damaged_tail == MS_PACK_OOM ? MS_ENOMEM : MS_EFORMAT;
    }
    if (decode(c, r) < 0) {
        c->failed = 1;
        c->p = c->end;
        return MS_EFORMAT;
    }
    return 1;
}

size_t ms_trace_stream_init(struct ms_trace_stream *s, struct ms_trace *t, size_t first)
{
    size_t end = first;
    while (end < t->nchunks && t->chunks[end].thread_serial == t->chunks[first].thread_serial)
        end++;
    s->t = t;
    s->chunk = first;
    s->end = end;
    s->cur.own = NULL;
    if (first < end)
        ms_trace_cursor_init(&s->cur, t, first);
    return end;
}

void ms_trace_drop_chunk(const struct ms_trace *t, size_t k)
{
    if (!t->mapped || k >= t->nchunks)
        return;
    /* the whole pages inside the chunk (a packed chunk shares its first and last) */
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = (uintptr_t)(t->data + t->chunks[k].offset);
    uintptr_t hi = lo + t->chunks[k].size;
    lo = (lo + page - 1) & ~(page - 1);
    hi &= ~(page - 1);
    if (hi > lo)
        madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

int ms_trace_stream_next(struct ms_trace_stream *s, struct ms_record *r)
{
    while (s->chunk < s->end) {
        int rc = ms_trace_cursor_next(&s->cur, r);
        if (rc == 1)
            return 1;
        if (rc == MS_ENOMEM) { /* the chunk is fine: the reader must fail, not skip it */
            ms_trace_cursor_release(&s->cur);
            s->chunk = s->end;
            return MS_ENOMEM;
        }
        if (rc < 0) {
            struct ms_trace *t = (struct ms_trace *)s->t;
            t->damaged_chunks++;
            warn_once(t, "malformed record in chunk", t->chunks[s->chunk].offset);
        }
        ms_trace_drop_chunk(s->t, s->chunk); /* read: its pages leave the process */
        if (++s->chunk < s->end)
            ms_trace_cursor_init(&s->cur, s->t, s->chunk);
    }
    ms_trace_cursor_release(&s->cur);
    return 0;
}

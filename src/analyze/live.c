/* live.c: the live heap of a running process, read from its own trace (live.h).
 *
 * Called by the Python package (memscope._store.live_holders) when an OOMDetector warns or a
 * MemoryLeakDetector counts: rarely, from the traced process itself. Workload: one pass over
 * the trace so far (every record), the streams of all threads merged by time so that a block
 * freed on one thread and reused on another is matched in the order it happened; a map of the
 * live blocks; the sites of the stacks that hold live blocks resolved once each.
 * NEEDSWORK: each call reads the whole trace again; a long run's trace (millions of events)
 * costs seconds per call: keep the stream positions and the live map between calls.
 *
 * A record still being written is not seen (the reader stops at each chunk's committed
 * `used`), so the figures are those of the last committed records of each thread. mmap'ed
 * regions (MMAP_ALLOC) are not counted: the heap blocks are what a program's lines allocate. */
#include "live.h"
#include "analyze.h"
#include "leak_rule.h"

#include "common/grow.h"
#include "common/ms_error.h"
#include "common/u64map.h"
#include "trace/reader.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_OWNER_DEPTH 64 /* owner scopes nested per thread that are kept */
#define MAX_LABELS 4096    /* distinct owner labels kept; later ones count as "(other owners)" */
#define MAX_STREAMS 65536  /* threads of one trace */

struct block {
    int64_t size, ordinal;    /* ordinal: the allocation's number in the trace, from 0 */
    uint32_t stack_id, owner; /* owner: index + 1 into labels, 0 none */
};

struct stream {
    struct ms_trace_stream s;
    struct ms_record r; /* the pending timed record when has */
    int has;
    uint32_t owners[MAX_OWNER_DEPTH];
    int depth; /* may exceed MAX_OWNER_DEPTH: pops past the kept ones keep the top right */
};

struct pyframe {
    char *file, *func; /* one allocation: file NUL func */
};

struct live {
    struct ms_u64map blocks;   /* addr -> struct block */
    struct ms_u64map pystacks; /* stack id -> index + 1 into pyst */
    struct ms_u64map natstack; /* stack id -> first pc not in the agent or libc (uint64) */
    struct ms_u64map frames;   /* frame id -> index + 1 into fr */
    uint64_t **pyst;           /* each: depth, then (frame id, line) pairs */
    size_t npyst, apyst;
    struct pyframe *fr;
    size_t nfr, afr;
    char **labels;
    size_t nlabels, alabels;
    int64_t live, peak, allocations;
};

static void live_release(struct live *L)
{
    ms_u64map_release(&L->blocks);
    ms_u64map_release(&L->pystacks);
    ms_u64map_release(&L->natstack);
    ms_u64map_release(&L->frames);
    for (size_t i = 0; i < L->npyst; i++)
        free(L->pyst[i]);
    free(L->pyst);
    for (size_t i = 0; i < L->nfr; i++)
        free(L->fr[i].file);
    free(L->fr);
    for (size_t i = 0; i < L->nlabels; i++)
        free(L->labels[i]);
    free(L->labels);
}

/* Whether pc lies in the agent or the C library: not where the program asked for memory. */
static int runtime_pc(uint64_t pc)
{
    Dl_info di;
    if (!dladdr((void *)(uintptr_t)(pc - 1), &di) || !di.dli_fname)
        return 0;
    const char *b = strrchr(di.dli_fname, '/');
    b = b ? b + 1 : di.dli_fname;
    return !strncmp(b, "libmemscope", 11) || !strncmp(b, "libc.so", 7) || !strncmp(b, "libc-", 5) ||
           !strncmp(b, "libstdc++", 9);
}

/* The records that define things, in any order: stacks, Python frames. */
static int define(struct live *L, const struct ms_record *r)
{
    if (r->type == MS_REC_STACK && r->depth) {
        uint64_t pc = r->pcs[0];
        for (uint32_t i = 0; i < r->depth; i++)
            if (!runtime_pc(r->pcs[i])) {
                pc = r->pcs[i];
                break;
            }
        uint64_t *v = ms_u64map_put(&L->natstack, r->stack_id, NULL);
        if (!v)
            return MS_ENOMEM;
        *v = pc;
        return 0;
    }
    if (r->type != MS_REC_EXTENSION)
        return 0;
    if (r->fn == MS_EXT_PYSTACK) {
        uint64_t *p = malloc((1 + 2 * (size_t)r->depth) * sizeof *p);
        if (!p ||
            ms_grow((void **)&L->pyst, &L->apyst, L->npyst, sizeof *L->pyst, 64, MS_GROW_MAX) < 0) {
            free(p);
            return MS_ENOMEM;
        }
        p[0] = r->depth;
        memcpy(p + 1, r->pcs, 2 * (size_t)r->depth * sizeof *p);
        L->pyst[L->npyst++] = p;
        return ms_u64map_set32(&L->pystacks, r->stack_id, (uint32_t)L->npyst);
    }
    if (r->fn == MS_EXT_PYFRAME) {
        char *s = malloc(r->len1 + 2);
        if (!s || ms_grow((void **)&L->fr, &L->afr, L->nfr, sizeof *L->fr, 64, MS_GROW_MAX) < 0) {
            free(s);
            return MS_ENOMEM;
        }
        memcpy(s, r->str1, r->len1);
        s[r->len1] = s[r->len1 + 1] = 0;
        size_t flen = strnlen(s, r->len1); /* file NUL function */
        L->fr[L->nfr].file = s;
        L->fr[L->nfr].func = flen < r->len1 ? s + flen + 1 : s + r->len1;
        L->nfr++;
        return ms_u64map_set32(&L->frames, r->addr, (uint32_t)L->nfr);
    }
    return 0;
}

static int timed(const struct ms_record *r)
{
    return r->type == MS_REC_HEAP_ALLOC || r->type == MS_REC_HEAP_FREE ||
           (r->type == MS_REC_EXTENSION &&
            (r->fn == MS_EXT_OWNER_PUSH || r->fn == MS_EXT_OWNER_POP));
}

/* Advances stream s to its next timed record, defining what it passes. Returns 0 or an error. */
static int advance(struct live *L, struct stream *s)
{
    int rc;
    s->has = 0;
    while ((rc = ms_trace_stream_next(&s->s, &s->r)) == 1) {
        if (timed(&s->r)) {
            s->has = 1;
            return 0;
        }
        if ((rc = define(L, &s->r)) < 0)
            return rc;
    }
    return rc;
}

static uint32_t label_of(struct live *L, const char *str, size_t len)
{
    for (size_t i = 0; i < L->nlabels; i++)
        if (strlen(L->labels[i]) == len && !memcmp(L->labels[i], str, len))
            return (uint32_t)i + 1;
    if (L->nlabels >= MAX_LABELS || ms_grow((void **)&L->labels, &L->alabels, L->nlabels,
                                            sizeof *L->labels, 16, MAX_LABELS) < 0)
        return 0;
    char *c = malloc(len + 1);
    if (!c)
        return 0;
    memcpy(c, str, len);
    c[len] = 0;
    L->labels[L->nlabels++] = c;
    return (uint32_t)L->nlabels;
}

/* Applies the timed record of stream s. */
static int apply(struct live *L, struct stream *s)
{
    const struct ms_record *r = &s->r;
    if (r->type == MS_REC_EXTENSION) {
        if (r->fn == MS_EXT_OWNER_PUSH) {
            if (s->depth < MAX_OWNER_DEPTH)
                s->owners[s->depth] = label_of(L, r->str1, r->len1);
            s->depth++;
        } else if (s->depth > 0) {
            s->depth--;
        }
        return 0;
    }
    struct block b;
    if (ms_u64map_del(&L->blocks, r->addr, &b))
        L->live -= b.size;
    if (r->type == MS_REC_HEAP_FREE)
        return 0;
    struct block *nb = ms_u64map_put(&L->blocks, r->addr, NULL);
    if (!nb)
        return MS_ENOMEM;
    nb->size = (int64_t)r->size;
    nb->ordinal = L->allocations++;
    nb->stack_id = r->stack_id;
    nb->owner = s->depth > 0 && s->depth <= MAX_OWNER_DEPTH ? s->owners[s->depth - 1] : 0;
    L->live += nb->size;
    if (L->live > L->peak)
        L->peak = L->live;
    return 0;
}

/* The site of stack id into out: the innermost Python frame of the program's own code (else of
 * a library; memscope's own never), as site.c's rule; else the native frame past the agent and
 * the C library, named by dladdr ("function (module)" or "?? (module+0xoff)"). */
static void site_of(struct live *L, uint32_t id, char *out, size_t len)
{
    uint32_t pi, fi;
    snprintf(out, len, "(no stack)");
    if (ms_u64map_get32(&L->pystacks, id, &pi)) {
        const uint64_t *p = L->pyst[pi - 1];
        int best = 3;
        for (uint64_t k = 0; k < p[0] && best > 0; k++) {
            if (!ms_u64map_get32(&L->frames, p[1 + 2 * k], &fi) || !p[2 + 2 * k])
                continue;
            const struct pyframe *f = &L->fr[fi - 1];
            int kind = ms_py_file_kind(f->file, strlen(f->file));
            if (kind < 2 && kind < best) {
                best = kind;
                snprintf(out, len, "%s (%s:%llu)", f->func, f->file,
                         (unsigned long long)p[2 + 2 * k]);
            }
        }
        if (best < 3)
            return;
    }
    uint64_t *pc = ms_u64map_get(&L->natstack, id);
    Dl_info di;
    if (pc && dladdr((void *)(uintptr_t)(*pc - 1), &di) && di.dli_fname) {
        const char *b = strrchr(di.dli_fname, '/');
        b = b ? b + 1 : di.dli_fname;
        if (di.dli_sname)
            snprintf(out, len, "%s (%s)", di.dli_sname, b);
        else
            snprintf(out, len, "?? (%s+0x%llx)", b,
                     (unsigned long long)(*pc - (uint64_t)(uintptr_t)di.dli_fbase));
    } else if (pc) {
        snprintf(out, len, "?? (0x%llx)", (unsigned long long)*pc);
    }
}

static int cmp_holder(const void *a, const void *b)
{
    const struct ms_live_holder *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* Adds a block to the holder named name in *v (found by a linear search of the names: the
 * sites of live blocks are few hundred at most in the programs this serves; NEEDSWORK: a map
 * when that stops being true). */
static struct ms_live_holder *holder(struct ms_live_holder **v, size_t *n, size_t *cap,
                                     const char *name)
{
    for (size_t i = 0; i < *n; i++)
        if (!strcmp((*v)[i].name, name))
            return &(*v)[i];
    if (ms_grow((void **)v, cap, *n, sizeof **v, 16, MS_GROW_MAX) < 0)
        return NULL;
    struct ms_live_holder *h = &(*v)[(*n)++];
    memset(h, 0, sizeof *h);
    snprintf(h->name, sizeof h->name, "%s", name);
    return h;
}

/* Groups the live blocks by site and owner, and judges each site by the growth rule on tenths
 * of the allocations (leaks.c, part 4: the tenth of a block is that of its allocation's number
 * among all allocations so far; tenths 1..9 judged, the first the warm-up; "now" stands for the
 * peak). */
static int group(struct live *L, size_t max_sites, struct ms_live_report *out)
{
    struct ms_u64map site_idx; /* stack id -> index + 1 into out->sites */
    ms_u64map_init(&site_idx, sizeof(uint32_t), MS_U64MAP_MAX);
    size_t scap = 0, ocap = 0, pos = 0;
    uint64_t addr;
    void *val;
    int rc = 0;
    double aspan = L->allocations > 0 ? (double)L->allocations : 1;
    char name[512];
    while (ms_u64map_next(&L->blocks, &pos, &addr, &val)) {
        const struct block *b = val;
        struct ms_live_holder *h;
        uint32_t si;
        if (ms_u64map_get32(&site_idx, b->stack_id, &si)) {
            h = &out->sites[si - 1];
        } else {
            site_of(L, b->stack_id, name, sizeof name);
            if (!(h = holder(&out->sites, &out->nsites, &scap, name)) ||
                ms_u64map_set32(&site_idx, b->stack_id, (uint32_t)(h - out->sites) + 1) < 0) {
                rc = MS_ENOMEM;
                break;
            }
        }
        double fa = (double)b->ordinal / aspan;
        int ka = fa <= 0 ? 0 : fa >= 1 ? MS_LIVE_TENTHS - 1 : (int)(fa * MS_LIVE_TENTHS);
        h->bytes += b->size;
        h->blocks++;
        h->held[ka] += b->size;
        const char *on = b->owner ? L->labels[b->owner - 1] : "(no owner)";
        if (!(h = holder(&out->owners, &out->nowners, &ocap, on))) {
            rc = MS_ENOMEM;
            break;
        }
        h->bytes += b->size;
        h->blocks++;
        out->live_blocks++;
    }
    ms_u64map_release(&site_idx);
    if (rc)
        return rc;
    for (size_t i = 0; i < out->nsites; i++) {
        struct ms_live_holder *h = &out->sites[i];
        size_t rises;
        int small = 0;
        for (int k = 1; k < MS_LIVE_TENTHS; k++)
            h->held[k] += h->held[k - 1];
        h->leak = ms_leak_steady_growth(h->held, 0, MS_LIVE_TENTHS - 2, &rises);
        ms_leak_too_small(&h->leak, &small, h->held[MS_LIVE_TENTHS - 2] - h->held[0], L->peak);
        out->leaks += (size_t)h->leak;
    }
    if (out->nsites)
        qsort(out->sites, out->nsites, sizeof *out->sites, cmp_holder);
    if (out->nowners)
        qsort(out->owners, out->nowners, sizeof *out->owners, cmp_holder);
    out->sites_total = out->nsites;
    if (out->nsites > max_sites)
        out->nsites = max_sites;
    if (out->nowners > max_sites)
        out->nowners = max_sites;
    return 0;
}

int ms_live_read(const char *path, size_t max_sites, struct ms_live_report *out, char *err,
                 size_t errlen)
{
    struct ms_trace t;
    struct live L;
    struct stream *st = NULL;
    size_t ns = 0, ast = 0;
    memset(out, 0, sizeof *out);
    memset(&t, 0, sizeof t);
    memset(&L, 0, sizeof L);
    int rc = ms_trace_open(&t, path);
    if (rc < 0) {
        return ms_errf(err, errlen, rc, "%s: %s", path, ms_strerror(rc));
    }
    ms_u64map_init(&L.blocks, sizeof(struct block), MS_U64MAP_MAX);
    ms_u64map_init(&L.pystacks, sizeof(uint32_t), MS_U64MAP_MAX);
    ms_u64map_init(&L.natstack, sizeof(uint64_t), MS_U64MAP_MAX);
    ms_u64map_init(&L.frames, sizeof(uint32_t), MS_U64MAP_MAX);
    for (size_t i = 0; i < t.nchunks && rc == 0;) {
        if ((rc = ms_grow((void **)&st, &ast, ns, sizeof *st, 8, MAX_STREAMS)) < 0)
            break;
        memset(&st[ns], 0, sizeof st[ns]);
        i = ms_trace_stream_init(&st[ns].s, &t, i);
        rc = advance(&L, &st[ns++]);
    }
    while (rc == 0) {
        struct stream *m = NULL;
        for (size_t k = 0; k < ns; k++)
            if (st[k].has && (!m || st[k].r.ns < m->r.ns))
                m = &st[k];
        if (!m)
            break;
        if ((rc = apply(&L, m)) == 0)
            rc = advance(&L, m);
    }
    for (size_t k = 0; k < ns; k++)
        ms_trace_cursor_release(&st[k].s.cur);
    free(st);
    out->python = L.npyst > 0;
    if (rc == 0)
        rc = group(&L, max_sites, out);
    out->live_bytes = L.live;
    out->peak_live_bytes = L.peak;
    out->allocations = L.allocations;
    live_release(&L);
    ms_trace_release(&t);
    if (rc < 0) {
        snprintf(err, errlen, "%s: %s", path, ms_strerror(rc));
        ms_live_report_release(out);
    }
    return rc < 0 ? rc : 0;
}

void ms_live_report_release(struct ms_live_report *r)
{
    if (!r)
        return;
    free(r->sites);
    free(r->owners);
    memset(r, 0, sizeof *r);
}

/* api_tables.c: the viewer's queries over rows (api_internal.h): the blocks alive in a window
 * or at a time (/api/blocks) and the events of a window (/api/events), filtered, sorted and
 * paged by one pass with a bounded heap, and the ranges of a window (/api/ranges). */
#include "api_internal.h"

#include "common/ms_error.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void block_json(struct ms_view *v, struct ms_json *j, size_t i, const struct req *r,
                       int brief)
{
    int64_t origin = r->origin;
    const struct ms_vblock k_ = ms_view_block(&v->m, i), *k = &k_;
    char site[512];
    if (!brief)
        ms__vstack_site(v, k->stack_id, site, sizeof site);
    ms_json_begin_object(j, NULL);
    ms_json_int(j, "id", (long long)i);
    ms_json_int(j, "track", ms_vblock_track(k));
    ms_json_int(j, "size", k->size);
    ms_json_int(j, "alloc_ns", k->alloc_ns - origin);
    if (k->free_ns == INT64_MAX)
        ms_json_null(j, "free_ns");
    else
        ms_json_int(j, "free_ns", k->free_ns - origin);
    ms_json_int(j, "stack_id", k->stack_id);
    if (!brief) {
        ms_json_str(j, "site", site);
        char addr[24];
        snprintf(addr, sizeof addr, "0x%llx", (unsigned long long)k->addr);
        ms_json_str(j, "addr", addr);
    }
    uint32_t owner = ms_vblock_owner(k);
    ms_json_str(j, "owner", owner && owner < v->nowners ? v->owners[owner] : NULL);
    const struct ms_vaccess *ac = v->m.access.count ? ms_u64map_get(&v->m.access, i) : NULL;
    if (ac) {
        ms_json_begin_object(j, "access");
        ms_json_int(j, "first_ns", ac->first_ns - origin);
        ms_json_int(j, "last_ns", ac->last_ns - origin);
        ms_json_int(j, "max_gap_ns", ac->max_gap);
        ms_json_end_object(j);
        ms_json_int(j, "ineff", ms__vineff_flags(v, r, i));
    }
    ms_json_end_object(j);
}

/* A min-heap of (key, block index, aux): the cap largest keys of a pass. Ties go to the earlier
 * block (a larger index ranks lower), then the smaller aux, so that pages of one order never
 * overlap. */
struct hent {
    int64_t key;
    uint32_t idx;
    uint32_t aux; /* the events': 0 the allocation, 1 the free */
};

static int hless(const struct hent *x, const struct hent *y)
{
    return x->key < y->key ||
           (x->key == y->key && (x->idx > y->idx || (x->idx == y->idx && x->aux > y->aux)));
}

static void heap_push(struct hent *h, size_t *n, size_t cap, struct hent e)
{
    if (*n == cap) {
        if (!hless(&h[0], &e))
            return;
        h[0] = e;
        for (size_t p = 0;;) { /* sift down */
            size_t c = 2 * p + 1;
            if (c >= *n)
                break;
            if (c + 1 < *n && hless(&h[c + 1], &h[c]))
                c++;
            if (!hless(&h[c], &h[p]))
                break;
            struct hent t = h[p];
            h[p] = h[c], h[c] = t, p = c;
        }
        return;
    }
    size_t c = (*n)++;
    h[c] = e;
    while (c && hless(&h[c], &h[(c - 1) / 2])) { /* sift up */
        struct hent t = h[c];
        h[c] = h[(c - 1) / 2], h[(c - 1) / 2] = t, c = (c - 1) / 2;
    }
}

static int hent_desc(const void *a, const void *b)
{
    const struct hent *x = a, *y = b;
    return hless(y, x) ? -1 : hless(x, y) ? 1 : 0;
}

/* The stack ids whose native or Python text contains text (a set: values unused). */
static int stacks_matching(struct ms_view *v, const char *text, struct ms_u64map *set)
{
    sqlite3_stmt *st;
    if (!v->stext_ok && ms_stack_text_init(&v->stext, v->m.db) < 0)
        return MS_EDB;
    v->stext_ok = 1;
    if (sqlite3_prepare_v2(v->m.db, "SELECT id FROM stacks", -1, &st, NULL) != SQLITE_OK)
        return MS_EDB;
    int rc = 0;
    while (rc == 0 && sqlite3_step(st) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(st, 0);
        const char *c = ms_stack_text_c(&v->stext, id);
        int hit = c && strstr(c, text);
        const char *py = c && !hit ? ms_stack_text_py(&v->stext, id) : c;
        if (!py)
            rc = MS_ENOMEM;
        else if (!hit)
            hit = strstr(py, text) != NULL;
        if (hit && !ms_u64map_put(set, (uint64_t)id, NULL))
            rc = MS_ENOMEM;
    }
    sqlite3_finalize(st);
    return rc;
}

/* The filters of the Blocks and Events tables: track, min_size, max_size, addr, owner (text in
 * the owner's label), site (text in the stack), ineff=1 (only inefficient blocks). */
struct filter {
    int64_t track, min_size, max_size, only_ineff;
    int has_addr;
    uint64_t addr;           /* addr=: only the blocks at this address */
    unsigned char *owner_ok; /* per owner id, or NULL: any owner */
    const char *site;        /* non-empty, or NULL */
    struct ms_u64map sites;  /* the stacks that contain site */
};

static int filter_init(struct ms_view *v, struct req *r, struct filter *f)
{
    memset(f, 0, sizeof *f);
    ms_u64map_init(&f->sites, 1, MS_U64MAP_MAX);
    f->track = ms__vnum(r, "track", 0, 0, (int64_t)v->m.ntracks - 1);
    f->min_size = ms__vnum(r, "min_size", 0, 0, INT64_MAX);
    f->max_size = ms__vnum(r, "max_size", INT64_MAX, 0, INT64_MAX);
    f->only_ineff = ms__vnum(r, "ineff", 0, 0, 1);
    const char *owner = r->param(r->ctx, "owner"), *site = r->param(r->ctx, "site");
    const char *addr = r->param(r->ctx, "addr");
    if (addr && *addr) {
        char *end;
        errno = 0;
        f->addr = strtoull(addr, &end, 0);
        f->has_addr = 1;
        if (*end || errno || *addr == '-') {
            if (!r->bad[0])
                snprintf(r->bad, sizeof r->bad,
                         "parameter 'addr': expected an address (0x... or decimal)");
        }
    }
    if (r->bad[0])
        return MS_EINVAL;
    if (owner && *owner) {
        if (!(f->owner_ok = calloc(v->nowners + 1, 1)))
            return MS_ENOMEM;
        for (size_t o = 1; o < v->nowners; o++)
            f->owner_ok[o] = v->owners[o] && strstr(v->owners[o], owner) != NULL;
    }
    if (site && *site) {
        f->site = site;
        return stacks_matching(v, site, &f->sites);
    }
    return 0;
}

static void filter_release(struct filter *f)
{
    free(f->owner_ok);
    ms_u64map_release(&f->sites);
}

/* 1 when block i passes the filters other than the track (the alive set applies it). */
static int filter_pass(const struct ms_view *v, const struct req *r, const struct filter *f,
                       size_t i, const struct ms_vblock *k)
{
    uint32_t o = ms_vblock_owner(k);
    return k->size >= f->min_size && k->size <= f->max_size &&
           (!f->has_addr || k->addr == f->addr) &&
           (!f->owner_ok || f->owner_ok[o < v->nowners ? o : 0]) &&
           (!f->site || ms_u64map_get(&f->sites, k->stack_id)) &&
           (!f->only_ineff || ms__vineff_flags(v, r, i));
}

/* The blocks alive at some time in [t0, t1) (or at t) that pass the filters, with their count
 * and bytes, in the order sort (size, alloc, free or life, descending; order=asc reverses),
 * the rows [offset, offset + limit). */
int ms__vapi_blocks(struct ms_view *v, struct req *r, struct ms_json *j)
{
    const struct ms_view_model *m = &v->m;
    int64_t at = ms__vtnum(r, "t", INT64_MIN);
    int64_t a = ms__vtnum(r, "t0", m->t0);
    int64_t b = ms__vtnum(r, "t1", m->t1 + 1);
    int64_t limit = ms__vnum(r, "limit", 500, 1, MAX_ROWS);
    int64_t offset = ms__vnum(r, "offset", 0, 0, MAX_OFFSET);
    const char *sort = r->param(r->ctx, "sort"), *order = r->param(r->ctx, "order");
    const char *sites = r->param(r->ctx, "sites");
    if (sites && strcmp(sites, "map") && !r->bad[0])
        snprintf(r->bad, sizeof r->bad, "parameter 'sites': expected map");
    int key = !sort || !strcmp(sort, "size") ? 0
              : !strcmp(sort, "alloc")       ? 1
              : !strcmp(sort, "free")        ? 2
              : !strcmp(sort, "life")        ? 3
                                             : -1;
    if (key < 0 && !r->bad[0])
        snprintf(r->bad, sizeof r->bad, "parameter 'sort': expected size, alloc, free or life");
    if (order && strcmp(order, "asc") && strcmp(order, "desc") && !r->bad[0])
        snprintf(r->bad, sizeof r->bad, "parameter 'order': expected asc or desc");
    struct filter f;
    int rc = filter_init(v, r, &f);
    int asc = order && !strcmp(order, "asc");
    if (at != INT64_MIN)
        a = at, b = at + 1;
    size_t cap = (size_t)(offset + limit), n = 0;
    struct hent *h = rc == 0 ? malloc(cap * sizeof *h) : NULL;
    if (rc == 0 && !h)
        rc = MS_ENOMEM;
    if (rc == 0)
        rc = ms__valive_set(v, a, b, f.track);
    if (rc < 0) {
        filter_release(&f);
        free(h);
        return rc;
    }
    int64_t count = 0, bytes = 0;
    for (size_t q = 0; q < v->live_n; q++) {
        size_t i = v->live_idx[q];
        const struct ms_vblock k_ = ms_view_block(m, i), *k = &k_;
        if (!filter_pass(v, r, &f, i, k))
            continue;
        count++;
        bytes += k->size;
        int64_t kv = key == 0   ? k->size
                     : key == 1 ? k->alloc_ns
                     : key == 2 ? k->free_ns
                                : (k->free_ns == INT64_MAX ? m->t1 : k->free_ns) - k->alloc_ns;
        heap_push(h, &n, cap, (struct hent){asc ? -kv : kv, (uint32_t)i, 0});
    }
    qsort(h, n, sizeof *h, hent_desc);
    ms_json_begin_object(j, NULL);
    ms_json_int(j, "count", count);
    ms_json_int(j, "bytes", bytes);
    ms_json_int(j, "offset", offset);
    ms_json_begin_array(j, "blocks");
    for (size_t i = (size_t)offset; i < n; i++)
        block_json(v, j, h[i].idx, r, sites != NULL);
    ms_json_end_array(j);
    if (sites) { /* each stack of the rows once */
        char site[512], id[16];
        struct ms_u64map written;
        ms_u64map_init(&written, 1, MS_U64MAP_MAX);
        ms_json_begin_object(j, "sites");
        for (size_t i = (size_t)offset; i < n; i++) {
            uint32_t sid = ms_view_block(m, h[i].idx).stack_id;
            int isnew = 1; /* out of memory: a site written twice is still right */
            if (ms_u64map_put(&written, sid, &isnew) && !isnew)
                continue;
            ms__vstack_site(v, sid, site, sizeof site);
            snprintf(id, sizeof id, "%u", sid);
            ms_json_str(j, id, site);
        }
        ms_json_end_object(j);
        ms_u64map_release(&written);
    }
    ms_json_end_object(j);
    filter_release(&f);
    free(h);
    return 0;
}

/* The events (each block's allocation and free) in [t0, t1) whose blocks pass the filters,
 * of kind alloc, free or both (kind=all), with their count, in time order (order=desc
 * reverses), the rows [offset, offset + limit). */
int ms__vapi_events(struct ms_view *v, struct req *r, struct ms_json *j)
{
    const struct ms_view_model *m = &v->m;
    int64_t a = ms__vtnum(r, "t0", m->t0);
    int64_t b = ms__vtnum(r, "t1", m->t1 + 1);
    int64_t limit = ms__vnum(r, "limit", 500, 1, MAX_ROWS);
    int64_t offset = ms__vnum(r, "offset", 0, 0, MAX_OFFSET);
    const char *kind = r->param(r->ctx, "kind"), *order = r->param(r->ctx, "order");
    int want = !kind || !strcmp(kind, "all") ? 3
               : !strcmp(kind, "alloc")      ? 1
               : !strcmp(kind, "free")       ? 2
                                             : 0;
    if (!want && !r->bad[0])
        snprintf(r->bad, sizeof r->bad, "parameter 'kind': expected all, alloc or free");
    if (order && strcmp(order, "asc") && strcmp(order, "desc") && !r->bad[0])
        snprintf(r->bad, sizeof r->bad, "parameter 'order': expected asc or desc");
    struct filter f;
    int rc = filter_init(v, r, &f);
    int desc = order && !strcmp(order, "desc");
    size_t cap = (size_t)(offset + limit), n = 0;
    struct hent *h = rc == 0 ? malloc(cap * sizeof *h) : NULL;
    if (rc == 0 && !h)
        rc = MS_ENOMEM;
    /* every block with an event in [a, b): allocated before b, freed at or after a */
    if (rc == 0)
        rc = ms__valive_set(v, a > INT64_MIN ? a - 1 : a, b, f.track);
    if (rc < 0) {
        filter_release(&f);
        free(h);
        return rc;
    }
    int64_t count = 0;
    for (size_t q = 0; q < v->live_n; q++) {
        size_t i = v->live_idx[q];
        const struct ms_vblock k_ = ms_view_block(m, i), *k = &k_;
        if (!filter_pass(v, r, &f, i, k))
            continue;
        for (uint32_t e = 0; e < 2; e++) {
            int64_t ts = e ? k->free_ns : k->alloc_ns;
            if (!(want & (1u << e)) || ts < a || ts >= b)
                continue;
            count++;
            heap_push(h, &n, cap, (struct hent){desc ? ts : -ts, (uint32_t)i, e});
        }
    }
    qsort(h, n, sizeof *h, hent_desc);
    ms_json_begin_object(j, NULL);
    ms_json_int(j, "count", count);
    ms_json_int(j, "offset", offset);
    ms_json_begin_array(j, "events");
    char site[512], addr[24];
    for (size_t q = (size_t)offset; q < n; q++) {
        size_t i = h[q].idx;
        const struct ms_vblock k_ = ms_view_block(m, i), *k = &k_;
        const struct ms_vtrack *tr = &m->tracks[ms_vblock_track(k)];
        uint32_t owner = ms_vblock_owner(k);
        ms__vstack_site(v, k->stack_id, site, sizeof site);
        snprintf(addr, sizeof addr, "0x%llx", (unsigned long long)k->addr);
        ms_json_begin_object(j, NULL);
        ms_json_str(j, "kind", h[q].aux ? "free" : "alloc");
        ms_json_int(j, "ns", (h[q].aux ? k->free_ns : k->alloc_ns) - r->origin);
        ms_json_int(j, "block", (long long)i);
        ms_json_int(j, "size", k->size);
        ms_json_int(j, "pid", tr->pid);
        ms_json_str(j, "layer", tr->layer_name);
        ms_json_str(j, "addr", addr);
        ms_json_int(j, "stack_id", k->stack_id);
        ms_json_str(j, "site", site);
        ms_json_str(j, "owner", owner && owner < v->nowners ? v->owners[owner] : NULL);
        ms_json_end_object(j);
    }
    ms_json_end_array(j);
    ms_json_end_object(j);
    filter_release(&f);
    free(h);
    return 0;
}

#define MAX_RANGES 2000

static int hent_by_idx(const void *a, const void *b)
{
    const struct hent *x = a, *y = b;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

int ms__vapi_ranges(struct ms_view *v, struct req *r, struct ms_json *j)
{
    const struct ms_view_model *m = &v->m;
    int64_t a = ms__vtnum(r, "t0", m->t0);
    int64_t b = ms__vtnum(r, "t1", m->t1 + 1);
    int64_t n = ms__vnum(r, "n", 1000, 1, MAX_POINTS);
    if (r->bad[0])
        return MS_EINVAL;
    int64_t least = b > a ? (b - a) / n : 0;
    struct hent *h = malloc(MAX_RANGES * sizeof *h);
    if (!h)
        return MS_ENOMEM;
    size_t nh = 0;
    int64_t count = 0;
    for (size_t i = 0; i < m->nranges && m->ranges[i].start_ns < b; i++) {
        const struct ms_vrange *g = &m->ranges[i];
        int64_t end = g->end_ns == INT64_MAX ? m->t1 : g->end_ns;
        if (end <= a)
            continue;
        count++;
        if (end - g->start_ns >= least)
            heap_push(h, &nh, MAX_RANGES, (struct hent){end - g->start_ns, (uint32_t)i, 0});
    }
    if (nh > 1)
        qsort(h, nh, sizeof *h, hent_by_idx); /* back to start order: the index order */
    ms_json_begin_object(j, NULL);
    ms_json_int(j, "count", count);
    ms_json_begin_array(j, "ranges");
    for (size_t x = 0; x < nh; x++) {
        const struct ms_vrange *g = &m->ranges[h[x].idx];
        ms_json_begin_object(j, NULL);
        ms_json_str(j, "name", g->name);
        ms_json_int(j, "start_ns", g->start_ns - r->origin);
        if (g->end_ns == INT64_MAX)
            ms_json_null(j, "end_ns");
        else
            ms_json_int(j, "end_ns", g->end_ns - r->origin);
        ms_json_int(j, "depth", g->depth);
        ms_json_int(j, "process_id", g->process_id);
        ms_json_end_object(j);
    }
    ms_json_end_array(j);
    ms_json_end_object(j);
    free(h);
    return 0;
}

/* What a zoom asks, in one answer: [the series of [t0, t1) (as /api/series), the largest
 * blocks alive in it (as /api/blocks with the same parameters), its ranges (with ranges=1, as
 * /api/ranges; else null)]. */

/* model.c: loads the viewer's model of a run (model.h) from a memscope database: every block
 * with its lifetime, size, stack and owner, and each (process, layer)'s live bytes after each of
 * its events, plus the run's total. Called once when `memscope view` or `memscope report`
 * starts; a compact database's traces are replayed (ms_store_replay), a full one's events table
 * is read in id (time) order. */
#include "model.h"

#include "analyze/analyze.h"
#include "common/ns.h"
#include "common/db_ids.h"
#include "common/grow.h"
#include "common/ms_error.h"
#include "common/u64map.h"
#include "store/store.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HUGE ((uintptr_t)2 << 20) /* a huge page of x86-64 */

#define MAX_TRACKS MS_VIEW_MAX_TRACKS
#define MAX_OWNER ((1u << 24) - 1)

struct open_block {
    uint32_t idx, track;
    int64_t size;
};

struct loader {
    struct ms_view_model *m;
    struct ms_u64map open;   /* allocation_id -> struct open_block, of blocks not yet freed */
    struct ms_u64map owners; /* allocation_id -> owner id (uint32): the blocks table's, the
                                last a tag gave (a MALLOC row has the owner at that time) */
    struct ms_layer_set layers;
    int64_t live_total;
    size_t last_track;
    size_t events_hint; /* the events the database says it holds (meta event_count), or 0 */
    struct open_range {
        int64_t process_id, thread_id;
        size_t idx;  /* in m->ranges; SIZE_MAX: not kept (past the cap) */
    } * open_ranges; /* the ranges pushed and not yet popped, every thread's, in push order */
    size_t nopen, capopen;
    int rc;
};

/* Room for n elements of elem bytes in *a (capacity *cap) at once, before loading: no copy
 * while the array grows, and the memory in huge pages where the kernel gives them on request
 * (a 10M-event run faults a few hundred pages instead of a hundred thousand). Unused room
 * costs address space only. Failing is harmless: the array grows as it goes. */
static void reserve(void **a, size_t *cap, size_t n, size_t elem)
{
    if (*a || n == 0 || n > SIZE_MAX / elem / 2)
        return;
    size_t len = n * elem;
    void *p = malloc(len);
    if (!p)
        return;
#ifdef MADV_HUGEPAGE
    uintptr_t lo = ((uintptr_t)p + HUGE - 1) & ~(uintptr_t)(HUGE - 1);
    uintptr_t hi = ((uintptr_t)p + len) & ~(uintptr_t)(HUGE - 1);
    if (hi > lo)
        madvise((void *)lo, hi - lo, MADV_HUGEPAGE); /* advice only: its failure changes nothing */
#endif
    *a = p;
    *cap = n;
}

static int track_push(struct ms_vtrack *tr, int64_t ts, int64_t delta)
{
    if (ms_vline_push(&tr->own, ts, delta) < 0)
        return MS_ENOMEM;
    if (tr->own.last_live > tr->peak) {
        tr->peak = tr->own.last_live;
        tr->peak_ns = ts;
    }
    return 0;
}

/* The track of (process, layer), created on first use; -1 when there are too many. */
static long track_of(struct loader *L, int64_t process_id, int64_t layer)
{
    struct ms_view_model *m = L->m;
    if (L->last_track < m->ntracks && m->tracks[L->last_track].process_id == process_id &&
        m->tracks[L->last_track].layer == layer)
        return (long)L->last_track;
    for (size_t i = 1; i < m->ntracks; i++)
        if (m->tracks[i].process_id == process_id && m->tracks[i].layer == layer)
            return (long)(L->last_track = i);
    if (m->ntracks >= MAX_TRACKS)
        return -1;
    struct ms_vtrack *tr = &m->tracks[m->ntracks];
    memset(tr, 0, sizeof *tr);
    tr->line = &tr->own;
    tr->process_id = process_id;
    tr->layer = layer;
    tr->reserve = !ms__layer_selected(&L->layers, layer);
    m->any_reserve |= tr->reserve;
    return (long)(L->last_track = m->ntracks++);
}

static int on_malloc(struct loader *L, int64_t ts, int64_t proc, int64_t layer, int64_t addr,
                     int64_t size, int64_t stack_id, int64_t alloc_id, int64_t owner_id)
{
    struct ms_view_model *m = L->m;
    long t = track_of(L, proc, layer);
    if (t < 0)
        return 0; /* past MAX_TRACKS: not drawn (docs/viewer.md) */
    uint32_t tagged;
    if (alloc_id && ms_u64map_get32(&L->owners, (uint64_t)alloc_id, &tagged))
        owner_id = tagged;
    struct ms_vblock b = {
        .alloc_ns = ts,
        .free_ns = INT64_MAX,
        .size = size,
        .stack_id = stack_id > 0 && stack_id <= UINT32_MAX ? (uint32_t)stack_id : 0,
        .owner_track =
            (owner_id > 0 && owner_id <= MAX_OWNER ? (uint32_t)owner_id : 0) << 8 | (uint32_t)t,
        .addr = (uint64_t)addr};
    if (ms_vblocks_push(&m->blocks, &b) < 0)
        return MS_ENOMEM;
    if (alloc_id) {
        int isnew;
        struct open_block *o = ms_u64map_put(&L->open, (uint64_t)alloc_id, &isnew);
        if (!o)
            return MS_ENOMEM;
        *o = (struct open_block){(uint32_t)m->nblocks, (uint32_t)t, size};
    }
    m->nblocks++;
    struct ms_vtrack *tr = &m->tracks[t];
    tr->allocs++;
    tr->alloc_bytes += size;
    return track_push(tr, ts, size);
}

static int on_free(struct loader *L, int64_t ts, int64_t alloc_id)
{
    struct open_block o;
    if (!alloc_id || ms_u64map_del(&L->open, (uint64_t)alloc_id, &o) != 1)
        return 0; /* a free of nothing recorded */
    ms_vblocks_set_free(&L->m->blocks, o.idx, ts);
    return track_push(&L->m->tracks[o.track], ts, -o.size);
}

/* An ACCESS of a live block: its first, last and longest gap. */
static int on_access(struct loader *L, int64_t ts, int64_t alloc_id)
{
    const struct open_block *o = alloc_id ? ms_u64map_get(&L->open, (uint64_t)alloc_id) : NULL;
    if (!o)
        return 0; /* a block not recorded, or freed */
    int isnew;
    struct ms_vaccess *a = ms_u64map_put(&L->m->access, o->idx, &isnew);
    if (!a)
        return MS_ENOMEM;
    if (isnew) {
        *a = (struct ms_vaccess){ts, ts, 0};
        return 0;
    }
    if (ts - a->last_ns > a->max_gap)
        a->max_gap = ts - a->last_ns;
    a->last_ns = ts;
    return 0;
}

static int on_annotation(struct loader *L, int kind, int64_t ts, int64_t proc, const char *name,
                         size_t len)
{
    struct ms_view_model *m = L->m;
    if (kind == MS_KIND_STEP) {
        if (ms_grow((void **)&m->steps, &m->capsteps, m->nsteps, sizeof *m->steps, 64,
                    MS_GROW_MAX) < 0)
            return MS_ENOMEM;
        char num[32];
        snprintf(num, sizeof num, "%.*s", (int)(len < 31 ? len : 31), name ? name : "");
        m->steps[m->nsteps++] = (struct ms_vstep){proc, atoll(num), ts};
    } else if (kind == MS_KIND_MARK) {
        char head[32]; /* longer than the bookkeeping prefixes */
        snprintf(head, sizeof head, "%.*s", (int)(len < 31 ? len : 31), name ? name : "");
        if (ms_own_mark(head))
            return 0; /* memscope's bookkeeping (owner tags, the module log): not the user's */
        if (ms_grow((void **)&m->marks, &m->capmarks, m->nmarks, sizeof *m->marks, 64, 1u << 20) <
            0)
            return 0; /* more marks than a picture can show: the rest are not drawn */
        struct ms_vmark *k = &m->marks[m->nmarks++];
        k->process_id = proc;
        k->ts_ns = ts;
        snprintf(k->name, sizeof k->name, "%.*s", (int)(len < 63 ? len : 63), name ? name : "");
    }
    return 0;
}

/* A range push (start) or pop of thread (proc, thread): a pop ends the thread's latest open
 * range. */
static int on_range(struct loader *L, int start, int64_t ts, int64_t proc, int64_t thread,
                    const char *name, size_t len)
{
    struct ms_view_model *m = L->m;
    if (!start) {
        for (size_t i = L->nopen; i-- > 0;)
            if (L->open_ranges[i].process_id == proc && L->open_ranges[i].thread_id == thread) {
                if (L->open_ranges[i].idx != SIZE_MAX)
                    m->ranges[L->open_ranges[i].idx].end_ns = ts;
                memmove(&L->open_ranges[i], &L->open_ranges[i + 1],
                        (L->nopen - i - 1) * sizeof *L->open_ranges);
                L->nopen--;
                break;
            }
        return 0; /* a pop without a push: nothing to end */
    }
    uint32_t depth = 0;
    for (size_t i = 0; i < L->nopen; i++)
        depth += L->open_ranges[i].process_id == proc && L->open_ranges[i].thread_id == thread;
    if (ms_grow((void **)&L->open_ranges, &L->capopen, L->nopen, sizeof *L->open_ranges, 16,
                1u << 16) < 0)
        return 0; /* nested deeper than any picture shows: its pop ends the one below */
    size_t idx = SIZE_MAX;
    if (m->nranges < MS_VIEW_MAX_RANGES &&
        ms_grow((void **)&m->ranges, &m->capranges, m->nranges, sizeof *m->ranges, 64,
                MS_VIEW_MAX_RANGES) == 0) {
        struct ms_vrange *r = &m->ranges[idx = m->nranges++];
        *r = (struct ms_vrange){proc, ts, INT64_MAX, depth, ""};
        snprintf(r->name, sizeof r->name, "%.*s",
                 (int)(len < sizeof r->name ? len : sizeof r->name - 1), name ? name : "");
    } else {
        m->ranges_dropped++;
    }
    L->open_ranges[L->nopen++] = (struct open_range){proc, thread, idx};
    return 0;
}

static int on_row(struct loader *L, int kind, int64_t ts, int64_t proc, int64_t thread,
                  int64_t layer, int64_t addr, int64_t size, int64_t stack, int64_t alloc_id,
                  int64_t owner, const char *name, size_t len)
{
    struct ms_view_model *m = L->m;
    ts = ms_ns_clamp(ts); /* a hostile database's times: into the range api.c computes with */
    if (!m->events++)
        m->t0 = ts;
    if (ts > m->t1)
        m->t1 = ts;
    if (kind == MS_KIND_MALLOC && layer > 0)
        return on_malloc(L, ts, proc, layer, addr, size, stack, alloc_id, owner);
    if (kind == MS_KIND_FREE && layer > 0)
        return on_free(L, ts, alloc_id);
    if (kind == MS_KIND_ACCESS)
        return on_access(L, ts, alloc_id);
    if (kind == MS_KIND_RANGE_START || kind == MS_KIND_RANGE_END)
        return on_range(L, kind == MS_KIND_RANGE_START, ts, proc, thread, name, len);
    return on_annotation(L, kind, ts, proc, name, len);
}

static int on_replayed(void *ctx, const struct ms_store_row *r)
{
    struct loader *L = ctx;
    return on_row(L, r->kind, r->ts_ns, r->process_id, r->thread_id, r->layer,
                  r->has_addr ? r->addr : 0, r->has_size ? r->size : 0, r->stack_id,
                  r->allocation_id, r->owner_id, r->name, r->name_len);
}

static int read_events(struct loader *L, char *err, size_t errlen)
{
    sqlite3 *db = L->m->db;
    sqlite3_stmt *st;
    int has_name = ms__has_column(db, "events", "name");
    if (ms__prepare(db, &st,
                    "SELECT kind, ts_ns, process_id, layer, size, stack_id, allocation_id, %s, "
                    "addr, thread_id FROM events WHERE kind IN (" MS_SQL_MALLOC ", " MS_SQL_FREE
                    ", " MS_SQL_STEP ", " MS_SQL_MARK ", " MS_SQL_ACCESS ", " MS_SQL_RANGE_START
                    ", " MS_SQL_RANGE_END ") ORDER BY id",
                    has_name ? "name" : "NULL") != SQLITE_OK) {
        return ms_errf(err, errlen, MS_EDB, "events: %s", sqlite3_errmsg(db));
    }
    int rc = 0, s;
    while (rc == 0 && (s = sqlite3_step(st)) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 7);
        rc = on_row(L, sqlite3_column_int(st, 0), sqlite3_column_int64(st, 1),
                    sqlite3_column_int64(st, 2), sqlite3_column_int64(st, 9),
                    sqlite3_column_int64(st, 3), sqlite3_column_int64(st, 8),
                    sqlite3_column_int64(st, 4), sqlite3_column_int64(st, 5),
                    sqlite3_column_int64(st, 6), 0, name, name ? strlen(name) : 0);
    }
    if (rc == 0 && s != SQLITE_DONE) {
        snprintf(err, errlen, "events: %s", sqlite3_errmsg(db));
        rc = MS_EDB;
    }
    sqlite3_finalize(st);
    return rc;
}

/* The blocks table's owners (the last one a tag gave each block), before the events: only the
 * blocks with an owner take room. */
static int read_owners(struct loader *L, char *err, size_t errlen)
{
    sqlite3 *db = L->m->db;
    sqlite3_stmt *st;
    int rc = 0;
    if (sqlite3_prepare_v2(db,
                           "SELECT allocation_id, owner_id FROM blocks WHERE owner_id IS NOT "
                           "NULL",
                           -1, &st, NULL) != SQLITE_OK) {
        return ms_errf(err, errlen, MS_EDB, "blocks: %s", sqlite3_errmsg(db));
    }
    while (rc == 0 && sqlite3_step(st) == SQLITE_ROW) {
        int64_t owner = sqlite3_column_int64(st, 1);
        if (owner > 0 && owner <= MAX_OWNER)
            rc =
                ms_u64map_set32(&L->owners, (uint64_t)sqlite3_column_int64(st, 0), (uint32_t)owner);
    }
    sqlite3_finalize(st);
    if (rc)
        return ms_errf(err, errlen, rc, "blocks: %s", ms_strerror(rc));
    return rc;
}

/* The pools table (a database without one has no pools). */
static int read_pools(struct ms_view_model *m)
{
    sqlite3_stmt *st;
    if (!ms__has_column(m->db, "pools", "reserve_layer") ||
        sqlite3_prepare_v2(m->db,
                           "SELECT name, layer, reserve_layer FROM pools ORDER BY id LIMIT 64", -1,
                           &st, NULL) != SQLITE_OK)
        return 0;
    m->pools = calloc(64, sizeof *m->pools);
    if (!m->pools) {
        sqlite3_finalize(st);
        return MS_ENOMEM;
    }
    while (sqlite3_step(st) == SQLITE_ROW) {
        struct ms_vpool *p = &m->pools[m->npools++];
        const char *name = (const char *)sqlite3_column_text(st, 0);
        snprintf(p->name, sizeof p->name, "%s", name ? name : "?");
        p->layer = sqlite3_column_int64(st, 1);
        p->reserve_layer = sqlite3_column_int64(st, 2);
    }
    sqlite3_finalize(st);
    return 0;
}

/* Track 0, the total of the memory tracks: the one memory track's own changes when there is
 * one (most runs: no copy), else their changes merged in time order (on equal times, the
 * track created first). The memory tracks are finished (encoded) by then. */
static int build_total(struct ms_view_model *m)
{
    struct ms_vtrack *tot = &m->tracks[0];
    size_t mem[MAX_TRACKS], k = 0, n = 0;
    for (size_t i = 1; i < m->ntracks; i++)
        if (!m->tracks[i].reserve) {
            mem[k++] = i;
            n += m->tracks[i].own.n;
        }
    if (k == 1) {
        const struct ms_vtrack *one = &m->tracks[mem[0]];
        tot->line = &one->own;
        tot->peak = one->peak;
        tot->peak_ns = one->peak_ns;
        return 0;
    }
    struct ms_vcur *cur = malloc((k ? k : 1) * sizeof *cur);
    if (!cur)
        return MS_ENOMEM;
    size_t pos[MAX_TRACKS] = {0};
    int64_t prev[MAX_TRACKS] = {0}, next[MAX_TRACKS];
    for (size_t j = 0; j < k; j++) {
        ms_vcur_init(&cur[j], &m->tracks[mem[j]].own);
        next[j] = cur[j].line->n ? ms_vline_ts(&cur[j], 0) : 0;
    }
    int rc = 0;
    for (size_t done = 0; rc == 0 && done < n; done++) {
        size_t best = k;
        for (size_t j = 0; j < k; j++)
            if (pos[j] < cur[j].line->n && (best == k || next[j] < next[best]))
                best = j;
        int64_t live = ms_vline_live(&cur[best], pos[best]);
        int64_t delta = live - prev[best];
        prev[best] = live;
        rc = track_push(tot, next[best], delta);
        if (++pos[best] < cur[best].line->n)
            next[best] = ms_vline_ts(&cur[best], pos[best]);
    }
    free(cur);
    return rc;
}

/* The lifetime index (model.h: sorted, max_free). */
static int build_lifetime_index(struct ms_view_model *m)
{
    m->sorted = 1;
    int64_t prev = INT64_MIN;
    for (size_t i = 0; i < m->nblocks && m->sorted; i++) {
        int64_t t = ms_view_block(m, i).alloc_ns;
        m->sorted = t >= prev;
        prev = t;
    }
    size_t nc = (m->nblocks + MS_VIEW_CHUNK - 1) / MS_VIEW_CHUNK;
    m->max_free = malloc((nc ? nc : 1) * sizeof *m->max_free);
    if (!m->max_free)
        return MS_ENOMEM;
    for (size_t c = 0; c < nc; c++) {
        int64_t mx = INT64_MIN;
        for (size_t i = c * MS_VIEW_CHUNK; i < (c + 1) * MS_VIEW_CHUNK && i < m->nblocks; i++)
            mx = ms_vblocks_free_ns(&m->blocks, i) > mx ? ms_vblocks_free_ns(&m->blocks, i) : mx;
        m->max_free[c] = mx;
    }
    return 0;
}

int ms_view_alive(const struct ms_view_model *m, int64_t a, int64_t b,
                  int (*fn)(void *ctx, size_t i), void *ctx)
{
    size_t end = m->nblocks;
    if (m->sorted) { /* blocks from the first allocated at or after b on are not alive */
        size_t lo = 0, hi = m->nblocks;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (ms_view_block(m, mid).alloc_ns < b)
                lo = mid + 1;
            else
                hi = mid;
        }
        end = lo;
    }
    for (size_t c = 0; c * MS_VIEW_CHUNK < end; c++) {
        if (m->max_free[c] <= a)
            continue; /* every block of the chunk freed by a */
        size_t hi = (c + 1) * MS_VIEW_CHUNK < end ? (c + 1) * MS_VIEW_CHUNK : end;
        for (size_t i = c * MS_VIEW_CHUNK; i < hi; i++) {
            /* sorted: every block before end was allocated before b, none decoded */
            if (ms_vblocks_free_ns(&m->blocks, i) > a &&
                (m->sorted || ms_view_block(m, i).alloc_ns < b)) {
                int rc = fn(ctx, i);
                if (rc)
                    return rc;
            }
        }
    }
    return 0;
}

static int describe_tracks(struct ms_view_model *m, char *err, size_t errlen)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(m->db,
                           "SELECT (SELECT name FROM layers WHERE id = ?1), (SELECT pid FROM "
                           "processes WHERE id = ?2)",
                           -1, &st, NULL) != SQLITE_OK) {
        return ms_errf(err, errlen, MS_EDB, "layers: %s", sqlite3_errmsg(m->db));
    }
    snprintf(m->tracks[0].layer_name, sizeof m->tracks[0].layer_name, "all");
    for (size_t i = 1; i < m->ntracks; i++) {
        struct ms_vtrack *tr = &m->tracks[i];
        sqlite3_bind_int64(st, 1, tr->layer);
        sqlite3_bind_int64(st, 2, tr->process_id);
        if (sqlite3_step(st) == SQLITE_ROW) {
            const char *name = (const char *)sqlite3_column_text(st, 0);
            snprintf(tr->layer_name, sizeof tr->layer_name, "%s", name ? name : "?");
            tr->pid = sqlite3_column_int64(st, 1);
        }
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    return 0;
}

/* The events the database holds by its meta table (0 when it does not say): the blocks and
 * the changes of live bytes are at most as many. */
static size_t events_hint(sqlite3 *db)
{
    sqlite3_stmt *st;
    size_t n = 0;
    if (sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = 'event_count'", -1, &st, NULL) !=
        SQLITE_OK)
        return 0;
    if (sqlite3_step(st) == SQLITE_ROW) {
        sqlite3_int64 v = sqlite3_column_int64(st, 0);
        n = v > 0 && v < ((sqlite3_int64)1 << 34) ? (size_t)v : 0;
    }
    sqlite3_finalize(st);
    return n;
}

int ms_view_model_load(struct ms_view_model *m, const char *path, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    int rc = ms_analyze_open(path, 0, &m->db, err, errlen);
    if (rc < 0)
        return rc;
    struct loader L = {.m = m};
    ms_u64map_init(&m->access, sizeof(struct ms_vaccess), MS_U64MAP_MAX);
    struct ms_analyze_opts o;
    ms_analyze_opts_init(&o);
    ms_u64map_init(&L.open, sizeof(struct open_block), MS_U64MAP_MAX);
    ms_u64map_init(&L.owners, sizeof(uint32_t), MS_U64MAP_MAX);
    m->tracks = calloc(MAX_TRACKS, sizeof *m->tracks);
    if (!m->tracks) {
        rc = MS_ENOMEM;
        goto fail;
    }
    m->ntracks = 1; /* track 0: the total of every memory layer */
    m->tracks[0].process_id = -1;
    m->tracks[0].line = &m->tracks[0].own;
    if ((rc = ms__layer_set_load(m->db, &o, &L.layers)) < 0) {
        snprintf(err, errlen, "pools: %s", sqlite3_errmsg(m->db));
        goto fail;
    }
    if ((rc = read_owners(&L, err, errlen)) < 0)
        goto fail;
    L.events_hint = events_hint(m->db);
    /* a block per MALLOC: half the events when all are freed, all when none is */
    reserve((void **)&m->blocks.free_ns, &m->blocks.capfree, L.events_hint,
            sizeof *m->blocks.free_ns);
    if ((rc = read_pools(m)) < 0)
        goto fail;
    if ((rc = ms__vmodel_read_usage(m)) < 0) {
        snprintf(err, errlen, "usage samples: %s", ms_strerror(rc));
        goto fail;
    }
    if (ms_store_is_compact(m->db))
        rc = ms_store_replay(path, on_replayed, &L, err, errlen);
    else
        rc = read_events(&L, err, errlen);
    ms_u64map_release(&L.open);
    ms_u64map_release(&L.owners);
    free(L.open_ranges);
    L.open_ranges = NULL;
    ms__layer_set_release(&L.layers);
    if (rc == 0)
        rc = ms_vblocks_finish(&m->blocks);
    for (size_t i = 1; rc == 0 && i < m->ntracks; i++)
        rc = ms_vline_finish(&m->tracks[i].own);
    if (rc == 0)
        rc = build_total(m);
    if (rc == 0)
        rc = ms_vline_finish(&m->tracks[0].own);
    if (rc == 0)
        rc = build_lifetime_index(m);
    if (rc == 0)
        rc = describe_tracks(m, err, errlen);
    if (rc < 0)
        goto fail;
    m->total_peak = m->tracks[0].peak;
    m->total_peak_ns = m->tracks[0].peak_ns;
    ms_u64map_release(&L.open);
    return 0;
fail:
    if (!*err)
        snprintf(err, errlen, "%s", ms_strerror(rc));
    free(L.open_ranges);
    ms__layer_set_release(&L.layers);
    ms_u64map_release(&L.open);
    ms_u64map_release(&L.owners);
    ms_view_model_release(m);
    return rc;
}

void ms_view_model_release(struct ms_view_model *m)
{
    if (!m)
        return;
    for (size_t i = 0; m->tracks && i < m->ntracks; i++)
        ms_vline_release(&m->tracks[i].own);
    free(m->tracks);
    ms_vblocks_release(&m->blocks);
    free(m->max_free);
    free(m->pools);
    free(m->steps);
    free(m->marks);
    free(m->ranges);
    ms__vmodel_usage_release(m);
    ms_u64map_release(&m->access);
    sqlite3_close(m->db);
    memset(m, 0, sizeof *m);
}

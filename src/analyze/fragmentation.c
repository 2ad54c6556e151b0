/* fragmentation.c: `memscope analyze fragmentation`: how well custom pools use the regions
 * they reserve (memscope_pool_reserve/release, memscope_pool_alloc/free; docs/database.md,
 * "pools").
 *
 * Per pool, at each step end, at the pool's peak of used bytes and at the end of the run:
 * reserved bytes (live regions of pools.reserve_layer), used bytes (live blocks of
 * pools.layer), free bytes inside the regions, the largest free extent inside one region, and
 * the fragmentation (free - largest_free) / free (0 when nothing is free).
 *
 * Workload: two passes per pool over its blocks' allocation and free points in event order
 * (one UNION ALL query over blocks, sorted by SQLite), the first to find the peak, the second
 * to take the snapshots; a hash map of live blocks by address; each snapshot sorts the live
 * blocks by address. Memory: O(live blocks of the pool). A compact database keeps every blocks
 * row of a pool's layers: the same queries. */
#include "analyze.h"
#include "common/term_text.h"

#include "common/grow.h"
#include "common/ms_error.h"
#include "store/store.h"

#include <stdlib.h>
#include <string.h>

struct snap {
    char label[48];
    int64_t eid; /* taken after every point with event id <= eid */
    long long reserved, used, free, largest;
    int64_t ts;
};

struct extent {
    int64_t addr, size;
};

struct pool_state {
    struct ms_u64map used, regions; /* addr -> int64 size */
    long long used_bytes, reserved_bytes, peak_used;
    int64_t peak_eid;
};

static int by_addr(const void *a, const void *b)
{
    const struct extent *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int by_eid(const void *a, const void *b)
{
    const struct snap *x = a, *y = b;
    return x->eid < y->eid ? -1 : x->eid > y->eid;
}

static int collect(const struct ms_u64map *m, struct extent **out, size_t *n)
{
    *n = 0;
    *out = malloc((m->count + 1) * sizeof **out);
    if (!*out)
        return MS_ENOMEM;
    uint64_t key;
    void *val;
    for (size_t pos = 0; ms_u64map_next(m, &pos, &key, &val);)
        (*out)[(*n)++] = (struct extent){(int64_t)key, *(int64_t *)val};
    if (*n > 1)
        qsort(*out, *n, sizeof **out, by_addr);
    return 0;
}

int ms_pool_free_extents(const struct ms_u64map *used, const struct ms_u64map *regions,
                         long long *free_bytes, long long *largest)
{
    struct extent *blk = NULL, *reg = NULL;
    size_t nb, nr;
    if (collect(used, &blk, &nb) < 0 || collect(regions, &reg, &nr) < 0) {
        free(blk);
        return MS_ENOMEM;
    }
    struct snap s = {0}, *sn = &s;
    size_t b = 0;
    for (size_t r = 0; r < nr; r++) {
        int64_t lo = reg[r].addr, hi = reg[r].addr + reg[r].size, cur = lo;
        while (b > 0 && blk[b - 1].addr + blk[b - 1].size > lo)
            b--; /* a block may straddle two regions */
        for (; b < nb && blk[b].addr < hi; b++) {
            int64_t s = blk[b].addr, e = blk[b].addr + blk[b].size;
            if (e <= cur)
                continue;
            if (s > cur) {
                sn->free += s - cur;
                if (s - cur > sn->largest)
                    sn->largest = s - cur;
            }
            cur = e < hi ? e : hi;
        }
        if (hi > cur) {
            sn->free += hi - cur;
            if (hi - cur > sn->largest)
                sn->largest = hi - cur;
        }
    }
    free(blk);
    free(reg);
    *free_bytes = sn->free;
    *largest = sn->largest;
    return 0;
}

/* Fills the free bytes and the largest free extent inside the live regions. */
static int take(struct pool_state *ps, struct snap *sn)
{
    sn->reserved = ps->reserved_bytes;
    sn->used = ps->used_bytes;
    return ms_pool_free_extents(&ps->used, &ps->regions, &sn->free, &sn->largest);
}

/* Replays the pool's points in event order; takes the snapshots (sorted by eid) on the way. */
static int replay(sqlite3 *db, int layer, int rlayer, struct pool_state *ps, struct snap *snaps,
                  size_t nsnaps)
{
    ms_u64map_init(&ps->used, sizeof(int64_t), MS_U64MAP_MAX);
    ms_u64map_init(&ps->regions, sizeof(int64_t), MS_U64MAP_MAX);
    ps->used_bytes = ps->reserved_bytes = ps->peak_used = 0;
    ps->peak_eid = 0;
    const char *q = "SELECT alloc_event_id, 0, layer, addr, size FROM blocks "
                    "WHERE layer IN (?1, ?2) "
                    "UNION ALL SELECT free_event_id, 1, layer, addr, size FROM blocks "
                    "WHERE layer IN (?1, ?2) AND free_event_id IS NOT NULL ORDER BY 1, 2";
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, q, -1, &st, NULL) != SQLITE_OK)
        return MS_EDB;
    sqlite3_bind_int(st, 1, layer);
    sqlite3_bind_int(st, 2, rlayer);
    int rc = 0, r;
    size_t next = 0;
    while (!rc && (r = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t eid = sqlite3_column_int64(st, 0);
        while (!rc && next < nsnaps && snaps[next].eid < eid)
            rc = take(ps, &snaps[next++]);
        int isfree = sqlite3_column_int(st, 1);
        int reserve = sqlite3_column_int(st, 2) == rlayer;
        int64_t addr = sqlite3_column_int64(st, 3), size = sqlite3_column_int64(st, 4);
        struct ms_u64map *m = reserve ? &ps->regions : &ps->used;
        long long *total = reserve ? &ps->reserved_bytes : &ps->used_bytes;
        int64_t *old = ms_u64map_get(m, addr);
        if (old) { /* the free, or a block replaced without a free (docs/database.md) */
            *total -= *old;
            ms_u64map_del(m, addr, NULL);
        }
        if (!isfree) {
            int64_t *v = ms_u64map_put(m, addr, NULL);
            if (!v) {
                rc = MS_ENOMEM;
                break;
            }
            *v = size;
            *total += size;
            if (!reserve && ps->used_bytes > ps->peak_used) {
                ps->peak_used = ps->used_bytes;
                ps->peak_eid = eid;
            }
        }
    }
    if (!rc && r != SQLITE_DONE)
        rc = MS_EDB;
    sqlite3_finalize(st);
    while (!rc && next < nsnaps)
        rc = take(ps, &snaps[next++]);
    ms_u64map_release(&ps->used);
    ms_u64map_release(&ps->regions);
    return rc;
}

static double frag(const struct snap *s)
{
    return s->free > 0 ? (double)(s->free - s->largest) / (double)s->free : 0.0;
}

/* The snapshot points of one pool: step ends, its peak, the end. */
static int points(sqlite3 *db, int64_t peak_eid, struct snap **out, size_t *n)
{
    size_t cap = 16;
    *n = 0;
    *out = malloc(cap * sizeof **out);
    if (!*out)
        return MS_ENOMEM;
    int nproc = 0;
    sqlite3_stmt *st;
    if (ms__has_column(db, "steps", "end_event_id")) {
        if (sqlite3_prepare_v2(db, "SELECT COUNT(DISTINCT process_id) FROM steps", -1, &st, NULL) ==
                SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW)
            nproc = sqlite3_column_int(st, 0);
        sqlite3_finalize(st);
        if (sqlite3_prepare_v2(db,
                               "SELECT s.step, p.pid, s.end_event_id FROM steps s JOIN processes "
                               "p ON p.id = s.process_id WHERE s.end_event_id IS NOT NULL "
                               "ORDER BY s.end_event_id",
                               -1, &st, NULL) != SQLITE_OK)
            return MS_EDB;
        while (sqlite3_step(st) == SQLITE_ROW) {
            if (*n + 2 >= cap) {
                if (cap > (1u << 22)) {
                    sqlite3_finalize(st);
                    return MS_ELIMIT;
                }
                struct snap *t = realloc(*out, (cap *= 2) * sizeof *t);
                if (!t) {
                    sqlite3_finalize(st);
                    return MS_ENOMEM;
                }
                *out = t;
            }
            struct snap *s = &(*out)[(*n)++];
            memset(s, 0, sizeof *s);
            if (nproc > 1)
                snprintf(s->label, sizeof s->label, "pid %d step %d", sqlite3_column_int(st, 1),
                         sqlite3_column_int(st, 0));
            else
                snprintf(s->label, sizeof s->label, "step %d", sqlite3_column_int(st, 0));
            s->eid = sqlite3_column_int64(st, 2);
        }
        sqlite3_finalize(st);
    }
    struct snap *s = &(*out)[(*n)++];
    memset(s, 0, sizeof *s);
    snprintf(s->label, sizeof s->label, "peak used");
    s->eid = peak_eid;
    s = &(*out)[(*n)++];
    memset(s, 0, sizeof *s);
    snprintf(s->label, sizeof s->label, "end");
    s->eid = INT64_MAX;
    /* Stable by eid: a step end at the peak's event id stays before "peak used". */
    for (size_t i = 1; i < *n; i++) {
        struct snap t = (*out)[i];
        size_t k = i;
        while (k > 0 && by_eid(&(*out)[k - 1], &t) > 0) {
            (*out)[k] = (*out)[k - 1];
            k--;
        }
        (*out)[k] = t;
    }
    return 0;
}

static void snap_times(sqlite3 *db, struct snap *s, size_t n)
{
    sqlite3_stmt *st;
    /* A snapshot's event is a STEP, a pool block's MALLOC (the peak) or the last event: a
     * compact database, without MALLOC rows, has the MALLOC's time in blocks and the last
     * event's in meta. */
    const char *q = ms_store_is_compact(db)
                        ? "SELECT COALESCE((SELECT ts_ns FROM events WHERE id = ?1), (SELECT "
                          "alloc_ns FROM blocks WHERE alloc_event_id = ?1), (SELECT CAST(value "
                          "AS INTEGER) FROM meta WHERE key = 'last_event_ns'))"
                        : "SELECT ts_ns FROM events WHERE id <= ? ORDER BY id DESC LIMIT 1";
    if (sqlite3_prepare_v2(db, q, -1, &st, NULL) != SQLITE_OK)
        return;
    for (size_t i = 0; i < n; i++) {
        sqlite3_bind_int64(st, 1, s[i].eid);
        s[i].ts = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
}

/* The pools table holds at most the converter's MAX_POOLS (1024) rows. */
#define MAX_POOLS_SHOWN 4096

/* One pool's answer. */
struct pool_result {
    char *name;
    int layer, rlayer;
    long long peak_used;
    struct snap *snaps;
    size_t n;
};

struct fresult {
    struct pool_result *v;
    size_t n, cap;
};

static void fresult_free(struct fresult *r)
{
    for (size_t i = 0; i < r->n; i++) {
        free(r->v[i].name);
        free(r->v[i].snaps);
    }
    free(r->v);
}

/* Every pool's rows (those of o->layer when given), into r; writes nothing. */
static int compute(struct ms_actx *x, struct fresult *r)
{
    sqlite3 *db = x->db;
    if (!ms__has_column(db, "pools", "reserve_layer"))
        return 0; /* a database from before pools: none */
    sqlite3_stmt *pst = NULL;
    if (sqlite3_prepare_v2(db, "SELECT name, layer, reserve_layer FROM pools ORDER BY id", -1, &pst,
                           NULL) != SQLITE_OK) {
        snprintf(x->err, x->errlen, "fragmentation: %s", sqlite3_errmsg(db));
        return MS_EDB;
    }
    int rc = 0, src;
    while (!rc && (src = sqlite3_step(pst)) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(pst, 0);
        int layer = sqlite3_column_int(pst, 1), rlayer = sqlite3_column_int(pst, 2);
        if (x->o->layer > 0 && x->o->layer != layer && x->o->layer != rlayer)
            continue;
        if ((rc = ms_grow((void **)&r->v, &r->cap, r->n, sizeof *r->v, 8, MAX_POOLS_SHOWN)) < 0)
            break;
        struct pool_result *pr = &r->v[r->n];
        *pr = (struct pool_result){.layer = layer, .rlayer = rlayer};
        if (!(pr->name = strdup(name ? name : ""))) {
            rc = MS_ENOMEM;
            break;
        }
        r->n++;
        struct pool_state ps;
        if ((rc = replay(db, layer, rlayer, &ps, NULL, 0)) < 0 ||
            (rc = points(db, ps.peak_eid, &pr->snaps, &pr->n)) < 0 ||
            (rc = replay(db, layer, rlayer, &ps, pr->snaps, pr->n)) < 0)
            break;
        snap_times(db, pr->snaps, pr->n);
        pr->peak_used = ps.peak_used;
    }
    if (!rc && src != SQLITE_DONE)
        rc = MS_EDB;
    if (rc) /* before the finalize, which clears the connection's message */
        snprintf(x->err, x->errlen, "fragmentation: %s",
                 rc == MS_EDB ? sqlite3_errmsg(db) : ms_strerror(rc));
    sqlite3_finalize(pst);
    return rc;
}

static void render_json(struct ms_actx *x, const struct fresult *r)
{
    struct ms_json j;
    ms_json_init(&j, x->out);
    ms_json_begin_object(&j, NULL);
    ms_json_str(&j, "analysis", "fragmentation");
    ms_json_begin_array(&j, "pools");
    for (size_t p = 0; p < r->n; p++) {
        const struct pool_result *pr = &r->v[p];
        ms_json_begin_object(&j, NULL);
        ms_json_str(&j, "name", pr->name);
        ms_json_int(&j, "layer", pr->layer);
        ms_json_int(&j, "reserve_layer", pr->rlayer);
        ms_json_int(&j, "peak_used", pr->peak_used);
        ms_json_begin_array(&j, "rows");
        for (size_t i = 0; i < pr->n; i++) {
            const struct snap *sn = &pr->snaps[i];
            ms_json_begin_object(&j, NULL);
            ms_json_str(&j, "label", sn->label);
            ms_json_int(&j, "ts_ns", sn->ts);
            ms_json_int(&j, "reserved", sn->reserved);
            ms_json_int(&j, "used", sn->used);
            ms_json_int(&j, "free", sn->free);
            ms_json_int(&j, "largest_free", sn->largest);
            ms_json_double(&j, "fragmentation", frag(sn));
            ms_json_end_object(&j);
        }
        ms_json_end_array(&j);
        ms_json_end_object(&j);
    }
    ms_json_end_array(&j);
    ms_json_end_object(&j);
    ms_json_finish(&j);
}

static void render_text(struct ms_actx *x, const struct fresult *r)
{
    FILE *out = x->out;
    if (!r->n) {
        fprintf(out,
                "No pools%s: the program reported none (memscope_pool_reserve, "
                "memscope_pool_alloc).\n",
                x->o->layer > 0 ? " on that layer" : "");
        return;
    }
    for (size_t p = 0; p < r->n; p++) {
        const struct pool_result *pr = &r->v[p];
        fprintf(out, "%sPool '%s': peak used %lld B.\n", p ? "\n" : "", ms_term_text(pr->name),
                pr->peak_used);
        fprintf(out, "  %-16s %14s %14s %14s %14s %13s\n", "moment", "reserved", "used", "free",
                "largest free", "fragmentation");
        for (size_t i = 0; i < pr->n; i++) {
            const struct snap *sn = &pr->snaps[i];
            fprintf(out, "  %-16s %14lld %14lld %14lld %14lld %13.4f\n", sn->label, sn->reserved,
                    sn->used, sn->free, sn->largest, frag(sn));
        }
    }
    fprintf(out, "\nfree = bytes of the reserved regions not covered by live blocks; "
                 "fragmentation = (free - largest free) / free.\n");
}

/* Computed whole first, then written: a failure writes nothing (analyze.h's contract). */
int ms_analyze_fragmentation(struct ms_actx *x)
{
    struct fresult r = {0};
    int rc = compute(x, &r);
    if (rc == 0)
        (x->o->json ? render_json : render_text)(x, &r);
    fresult_free(&r);
    return rc;
}

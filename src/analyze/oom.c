/* oom.c: `memscope analyze oom`: for every allocation the CUDA driver refused with
 * CUDA_ERROR_OUT_OF_MEMORY (an OOM_TRIGGER row, docs/cuda.md), what was live at that moment:
 * the driver's own free/total, the bytes this process had on that device by layer and by owner,
 * the call sites holding them, how much of each pool of the process (memscope.h pools, PyTorch's
 * allocator) was reserved but not allocated then (fragmentation), and the largest and most recent live blocks (the OOM_TOP_ALLOC and
 * OOM_RECENT_ALLOC rows the conversion wrote after the trigger, msMemScope's --analysis=oom:K).
 *
 * Computed first (one struct per OOM, from SQL over blocks: alloc_event_id before the trigger,
 * not freed before it), then rendered as text or JSON. */
#include "analyze.h"
#include "common/term_text.h"
#include "common/db_ids.h"

#include "common/ms_error.h"
#include "common/grow.h"

#include <stdlib.h>
#include <string.h>

#define MAX_OOMS 1000

struct oom_group { /* a layer, an owner or a call site */
    char *name;
    int64_t bytes, blocks;
};

struct oom_block {
    int64_t alloc_id, addr, size;
    char *layer, *site;
};

struct oom_report {
    int64_t event_id, ts_ns, process_id, pid, req_size, dev_free, dev_total;
    char *device, *func, *exe;
    int64_t live_bytes, live_blocks;
    struct oom_group *layers, *owners, *sites, *pools; /* pools: bytes = reserved - allocated */
    size_t nlayers, nowners, nsites, npools;
    struct oom_block *top, *recent;
    size_t ntop, nrecent;
};

/* The live-at-the-trigger condition over blocks b, with ?1 = trigger event id, ?2 = its time,
 * ?3 = its process. */
#define LIVE_AT                                                                 \
    "b.process_id = ?3 AND b.alloc_event_id < ?1 AND (b.free_event_id > ?1 OR " \
    "(b.free_event_id IS NULL AND (b.free_ns IS NULL OR b.free_ns > ?2)))"
/* The device memory layers of the trigger's device (?4: its Device Id). Pools carved from that
 * memory (memscope.h, NVTX, PyTorch's allocator) are reported apart, not added to it. */
#define DEVICE_LAYERS "b.layer IN (SELECT id FROM layers WHERE device = ?4 AND event_type = 'HAL')"

static char *dup_text(sqlite3_stmt *st, int col)
{
    const char *s = (const char *)sqlite3_column_text(st, col);
    return strdup(s ? s : "");
}

/* Runs sql (bound as above) and collects (name, bytes, blocks) rows; names from column 0
 * (site: a stack id to describe). */
static int groups(sqlite3 *db, const char *sql, const struct oom_report *r, int site,
                  struct oom_group **out, size_t *n)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        return MS_EDB;
    sqlite3_bind_int64(st, 1, r->event_id);
    sqlite3_bind_int64(st, 2, r->ts_ns);
    sqlite3_bind_int64(st, 3, r->process_id);
    sqlite3_bind_text(st, 4, r->device, -1, SQLITE_STATIC);
    int rc = 0, s = SQLITE_DONE;
    size_t cap = *n;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        if (ms_grow((void **)out, &cap, *n, sizeof **out, 16, MS_GROW_MAX) < 0) {
            rc = MS_ENOMEM;
            break;
        }
        char buf[1024];
        if (site && sqlite3_column_type(st, 0) != SQLITE_NULL)
            ms_stack_site(db, sqlite3_column_int64(st, 0), buf, sizeof buf);
        else
            snprintf(buf, sizeof buf, "%s",
                     sqlite3_column_text(st, 0) ? (const char *)sqlite3_column_text(st, 0)
                     : site                     ? "(no stack)"
                                                : "(none)");
        (*out)[*n] = (struct oom_group){strdup(buf), sqlite3_column_int64(st, 1),
                                        sqlite3_column_int64(st, 2)};
        if (!(*out)[*n].name) {
            rc = MS_ENOMEM;
            break;
        }
        (*n)++;
    }
    if (rc == 0 && s != SQLITE_DONE)
        rc = MS_EDB; /* the caller reads the reason before the finalize below clears it */
    sqlite3_finalize(st);
    return rc;
}

/* The OOM_TOP_ALLOC (MS_KIND_OOM_TOP) or OOM_RECENT_ALLOC rows that follow trigger r. */
static int detail_rows(sqlite3 *db, const struct oom_report *r, int kind, struct oom_block **out,
                       size_t *n)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(
            db,
            "SELECT e.allocation_id, e.addr, e.size, l.name, e.stack_id FROM events e "
            "JOIN layers l ON l.id = e.layer WHERE e.id > ?1 AND e.kind = ?2 AND "
            "e.id < COALESCE((SELECT min(id) FROM events WHERE id > ?1 AND kind NOT "
            "IN (" MS_SQL_OOM_RECENT ", " MS_SQL_OOM_TOP ")), 1 << 62) "
            "ORDER BY e.id",
            -1, &st, NULL) != SQLITE_OK)
        return MS_EDB;
    sqlite3_bind_int64(st, 1, r->event_id);
    sqlite3_bind_int(st, 2, kind);
    int rc = 0, s = SQLITE_DONE;
    size_t cap = *n;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        if (ms_grow((void **)out, &cap, *n, sizeof **out, 16, MS_GROW_MAX) < 0) {
            rc = MS_ENOMEM;
            break;
        }
        char site[1024] = "(no stack)";
        if (sqlite3_column_type(st, 4) != SQLITE_NULL)
            ms_stack_site(db, sqlite3_column_int64(st, 4), site, sizeof site);
        (*out)[*n] = (struct oom_block){sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1),
                                        sqlite3_column_int64(st, 2), dup_text(st, 3), strdup(site)};
        (*n)++;
        if (!(*out)[*n - 1].layer || !(*out)[*n - 1].site) {
            rc = MS_ENOMEM;
            break;
        }
    }
    if (rc == 0 && s != SQLITE_DONE)
        rc = MS_EDB;
    sqlite3_finalize(st);
    return rc;
}

static int compute(sqlite3 *db, struct oom_report *r)
{
    int rc = groups(db,
                    "SELECT l.name, sum(b.size), count(*) FROM blocks b JOIN layers l ON "
                    "l.id = b.layer WHERE " LIVE_AT " AND " DEVICE_LAYERS
                    " GROUP BY b.layer ORDER BY 2 DESC, 1",
                    r, 0, &r->layers, &r->nlayers);
    for (size_t i = 0; i < r->nlayers; i++) {
        r->live_bytes += r->layers[i].bytes;
        r->live_blocks += r->layers[i].blocks;
    }
    if (rc == 0)
        rc = groups(db,
                    "SELECT o.label, sum(b.size), count(*) FROM blocks b LEFT JOIN owners o ON "
                    "o.id = b.owner_id WHERE " LIVE_AT " AND " DEVICE_LAYERS
                    " GROUP BY b.owner_id ORDER BY 2 DESC, 1",
                    r, 0, &r->owners, &r->nowners);
    if (rc == 0)
        rc = groups(db,
                    "SELECT b.stack_id, sum(b.size), count(*) FROM blocks b WHERE " LIVE_AT
                    " AND " DEVICE_LAYERS " GROUP BY b.stack_id ORDER BY 2 DESC, 1",
                    r, 1, &r->sites, &r->nsites);
    if (rc == 0)
        rc = groups(db,
                    "SELECT p.name, COALESCE((SELECT sum(b.size) FROM blocks b WHERE b.layer = "
                    "p.reserve_layer AND " LIVE_AT "), 0) - COALESCE((SELECT sum(b.size) FROM "
                    "blocks b WHERE b.layer = p.layer AND " LIVE_AT "), 0), "
                    "(SELECT count(*) FROM blocks b WHERE b.layer = p.reserve_layer AND " LIVE_AT
                    ") FROM pools p ORDER BY p.id",
                    r, 0, &r->pools, &r->npools);
    if (rc == 0)
        rc = detail_rows(db, r, MS_KIND_OOM_TOP, &r->top, &r->ntop);
    if (rc == 0)
        rc = detail_rows(db, r, MS_KIND_OOM_RECENT, &r->recent, &r->nrecent);
    return rc;
}

static void release(struct oom_report *r)
{
    struct oom_group *gs[] = {r->layers, r->owners, r->sites, r->pools};
    size_t ns[] = {r->nlayers, r->nowners, r->nsites, r->npools};
    for (size_t k = 0; k < 4; k++) {
        for (size_t i = 0; i < ns[k]; i++)
            free(gs[k][i].name);
        free(gs[k]);
    }
    for (size_t i = 0; i < r->ntop; i++)
        free(r->top[i].layer), free(r->top[i].site);
    for (size_t i = 0; i < r->nrecent; i++)
        free(r->recent[i].layer), free(r->recent[i].site);
    free(r->top);
    free(r->recent);
    free(r->device);
    free(r->func);
    free(r->exe);
}

/* ---- rendering ---- */

static void text_groups(FILE *out, const char *title, const struct oom_group *g, size_t n, int top)
{
    if (!n)
        return;
    fprintf(out, "  %s:\n", title);
    for (size_t i = 0; i < n && (int)i < top; i++) {
        char b[32];
        ms_human_bytes(b, sizeof b, g[i].bytes);
        fprintf(out, "    %12s in %6lld block%s  %s\n", b, (long long)g[i].blocks,
                g[i].blocks == 1 ? " " : "s", ms_term_text(g[i].name));
    }
}

static void text_blocks(FILE *out, const char *title, const struct oom_block *b, size_t n)
{
    if (!n)
        return;
    fprintf(out, "  %s:\n", title);
    for (size_t i = 0; i < n; i++) {
        char s[32];
        ms_human_bytes(s, sizeof s, b[i].size);
        fprintf(out, "    %12s  0x%016llx  %-12s %s\n", s, (unsigned long long)b[i].addr,
                ms_term_text(b[i].layer), ms_term_text(b[i].site));
    }
}

static void oom_text(FILE *out, const struct oom_report *r, size_t i, size_t n, int64_t t0, int top)
{
    char req[32], used[32], total[32], live[32];
    ms_human_bytes(req, sizeof req, r->req_size);
    ms_human_bytes(total, sizeof total, r->dev_total);
    ms_human_bytes(used, sizeof used, r->dev_total - r->dev_free);
    ms_human_bytes(live, sizeof live, r->live_bytes);
    fprintf(out,
            "OOM %zu of %zu: %s of %s failed on device %s, process %lld %s, at +%.6f s "
            "(event %lld)\n",
            i + 1, n, r->func, req, r->device, (long long)r->pid, ms_term_text(r->exe),
            (double)(r->ts_ns - t0) / 1e9, (long long)r->event_id);
    if (r->dev_total)
        fprintf(out, "  the driver: %s of %s in use on the device\n", used, total);
    fprintf(out, "  live in this process on device %s: %s in %lld blocks", r->device, live,
            (long long)r->live_blocks);
    if (r->dev_total && r->dev_total > r->dev_free) {
        char other[32];
        int64_t o = r->dev_total - r->dev_free - r->live_bytes;
        ms_human_bytes(other, sizeof other, o > 0 ? o : 0);
        fprintf(out, " (%s of the device's used memory is not this process's recorded blocks)",
                other);
    }
    fputc('\n', out);
    text_groups(out, "by layer", r->layers, r->nlayers, top);
    text_groups(out, "by owner", r->owners, r->nowners, top);
    text_groups(out, "by call site", r->sites, r->nsites, top);
    for (size_t k = 0; k < r->npools; k++) {
        char b[32];
        ms_human_bytes(b, sizeof b, r->pools[k].bytes);
        fprintf(out, "  pool %s: %s reserved but not allocated (in %lld regions)\n",
                ms_term_text(r->pools[k].name), b, (long long)r->pools[k].blocks);
    }
    text_blocks(out, "largest live blocks (OOM_TOP_ALLOC)", r->top, r->ntop);
    text_blocks(out, "most recent live blocks (OOM_RECENT_ALLOC)", r->recent, r->nrecent);
}

static void json_groups(struct ms_json *j, const char *key, const struct oom_group *g, size_t n,
                        int top)
{
    ms_json_begin_array(j, key);
    for (size_t i = 0; i < n && (int)i < top; i++) {
        ms_json_begin_object(j, NULL);
        ms_json_str(j, "name", g[i].name);
        ms_json_int(j, "bytes", g[i].bytes);
        ms_json_int(j, "blocks", g[i].blocks);
        ms_json_end_object(j);
    }
    ms_json_end_array(j);
}

static void json_blocks(struct ms_json *j, const char *key, const struct oom_block *b, size_t n)
{
    ms_json_begin_array(j, key);
    for (size_t i = 0; i < n; i++) {
        ms_json_begin_object(j, NULL);
        ms_json_int(j, "allocation_id", b[i].alloc_id);
        ms_json_int(j, "addr", b[i].addr);
        ms_json_int(j, "size", b[i].size);
        ms_json_str(j, "layer", b[i].layer);
        ms_json_str(j, "site", b[i].site);
        ms_json_end_object(j);
    }
    ms_json_end_array(j);
}

static void oom_json(struct ms_json *j, const struct oom_report *r, int top)
{
    ms_json_begin_object(j, NULL);
    ms_json_int(j, "event_id", r->event_id);
    ms_json_int(j, "ts_ns", r->ts_ns);
    ms_json_int(j, "process_id", r->process_id);
    ms_json_int(j, "pid", r->pid);
    ms_json_str(j, "exe", r->exe);
    ms_json_str(j, "device", r->device);
    ms_json_str(j, "func", r->func);
    ms_json_int(j, "req_size", r->req_size);
    ms_json_int(j, "device_free", r->dev_free);
    ms_json_int(j, "device_total", r->dev_total);
    ms_json_int(j, "live_bytes", r->live_bytes);
    ms_json_int(j, "live_blocks", r->live_blocks);
    json_groups(j, "layers", r->layers, r->nlayers, top);
    json_groups(j, "owners", r->owners, r->nowners, top);
    json_groups(j, "sites", r->sites, r->nsites, top);
    json_groups(j, "pools_reserved_unallocated", r->pools, r->npools, top);
    json_blocks(j, "top", r->top, r->ntop);
    json_blocks(j, "recent", r->recent, r->nrecent);
    ms_json_end_object(j);
}

/* The result: the OOMs in event order (the first MAX_OOMS), or none with old set for a database
 * from before device memory. */
struct oresult {
    struct oom_report *v;
    size_t n, cap;
    int old;
};

static void oresult_free(struct oresult *r)
{
    for (size_t i = 0; i < r->n; i++)
        release(&r->v[i]);
    free(r->v);
}

/* Every OOM's report, into r; writes nothing. 0, or a negative code with x->err set. */
static int compute_all(struct ms_actx *x, struct oresult *r)
{
    sqlite3 *db = x->db;
    if (!ms__has_column(db, "events", "attr") || !ms__has_column(db, "layers", "device")) {
        r->old = 1;
        return 0;
    }
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(
            db,
            "SELECT e.id, e.ts_ns, e.process_id, p.pid, p.exe, l.device, e.func, "
            "e.size, CAST(json_extract(e.attr, '$.device_free') AS INTEGER), "
            "CAST(json_extract(e.attr, '$.device_total') AS INTEGER) FROM events e "
            "JOIN processes p ON p.id = e.process_id JOIN layers l ON l.id = e.layer "
            "WHERE e.kind = " MS_SQL_OOM " ORDER BY e.id LIMIT 1001",
            -1, &st, NULL) != SQLITE_OK)
        return ms_errf(x->err, x->errlen, MS_EDB, "oom: cannot read the database: %s",
                       sqlite3_errmsg(db));
    int rc = 0, s = SQLITE_DONE;
    while (rc == 0 && (s = sqlite3_step(st)) == SQLITE_ROW) {
        if (r->n == MAX_OOMS)
            break; /* the first thousand: later ones repeat the story */
        if (ms_grow((void **)&r->v, &r->cap, r->n, sizeof *r->v, 16, MAX_OOMS) < 0) {
            rc = MS_ENOMEM;
            break;
        }
        struct oom_report *o = &r->v[r->n++];
        memset(o, 0, sizeof *o);
        o->event_id = sqlite3_column_int64(st, 0);
        o->ts_ns = sqlite3_column_int64(st, 1);
        o->process_id = sqlite3_column_int64(st, 2);
        o->pid = sqlite3_column_int64(st, 3);
        const char *exe = (const char *)sqlite3_column_text(st, 4);
        const char *slash = exe ? strrchr(exe, '/') : NULL;
        o->exe = strdup(slash ? slash + 1 : exe ? exe : "?");
        o->device = sqlite3_column_type(st, 5) == SQLITE_NULL ? NULL : dup_text(st, 5);
        o->func = dup_text(st, 6);
        o->req_size = sqlite3_column_int64(st, 7);
        o->dev_free = sqlite3_column_int64(st, 8);
        o->dev_total = sqlite3_column_int64(st, 9);
        if (!o->exe || !o->func || (sqlite3_column_type(st, 5) != SQLITE_NULL && !o->device))
            rc = MS_ENOMEM;
        if (rc == 0)
            rc = compute(db, o);
    }
    if (rc == 0 && s != SQLITE_ROW && s != SQLITE_DONE)
        rc = MS_EDB; /* a row that could not be read: never "no OOM recorded" */
    /* before the finalize, which clears the connection's message */
    if (rc)
        rc = ms_errf(x->err, x->errlen, rc, "oom: %s",
                     rc == MS_ENOMEM ? "out of memory" : sqlite3_errmsg(db));
    sqlite3_finalize(st);
    return rc;
}

static void render_text(struct ms_actx *x, const struct oresult *r)
{
    if (r->old) {
        fprintf(x->out, "no OOM recorded (this database predates device memory)\n");
        return;
    }
    if (r->n == 0) {
        fprintf(x->out, "no OOM recorded\n");
        return;
    }
    int64_t t0 = ms__run_start_ns(x->db);
    for (size_t i = 0; i < r->n; i++)
        oom_text(x->out, &r->v[i], i, r->n, t0, x->o->top);
}

static void render_json(struct ms_actx *x, const struct oresult *r)
{
    if (r->old) {
        fprintf(x->out, "{\"ooms\": []}\n");
        return;
    }
    struct ms_json j;
    ms_json_init(&j, x->out);
    ms_json_begin_object(&j, NULL);
    ms_json_begin_array(&j, "ooms");
    for (size_t i = 0; i < r->n; i++)
        oom_json(&j, &r->v[i], x->o->top);
    ms_json_end_array(&j);
    ms_json_end_object(&j);
    ms_json_finish(&j);
}

/* Computed whole first, then written: a failure writes nothing (analyze.h's contract). */
int ms_analyze_oom(struct ms_actx *x)
{
    struct oresult r = {0};
    int rc = ms__actx_computed(x, compute_all(x, &r));
    if (rc == 0)
        (x->o->json ? render_json : render_text)(x, &r);
    oresult_free(&r);
    return rc;
}

/* api.c: the viewer's queries (api.h): loading, stacks, the summary, series, owners, analyses
 * and the routing (api_request.c: a request's parameters and time window; api_tables.c:
 * blocks, events and ranges). Workload: one request at a time from one browser; each
 * answer is at most one pass over the model's blocks (tens of millions: tens of milliseconds)
 * plus SQL lookups of the few hundred stacks it names, cached across requests. Parameters come
 * from the network: every number is parsed strictly and bounded. */
#include "api_internal.h"

#include "analyze/analyze.h"
#include "common/grow.h"
#include "common/ms_error.h"
#include "pin.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STACK_TEXT_MAX 65536

/* ---- Loading -------------------------------------------------------------------------------- */

static int load_owners(struct ms_view *v, char *err, size_t errlen)
{
    sqlite3_stmt *st;
    sqlite3 *db = v->m.db;
    if (sqlite3_prepare_v2(db, "SELECT id, label FROM owners WHERE id > 0 AND id < 16777216", -1,
                           &st, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "owners: %s", sqlite3_errmsg(db));
        return MS_EDB;
    }
    size_t cap = 0;
    int rc = 0;
    while (rc == 0 && sqlite3_step(st) == SQLITE_ROW) {
        size_t id = (size_t)sqlite3_column_int64(st, 0);
        const char *label = (const char *)sqlite3_column_text(st, 1);
        if (ms_grow((void **)&v->owners, &cap, id, sizeof *v->owners, 64, 1u << 24) < 0) {
            rc = MS_ENOMEM;
            break;
        }
        for (size_t i = v->nowners; i <= id; i++)
            v->owners[i] = NULL;
        if (id >= v->nowners)
            v->nowners = id + 1;
        free(v->owners[id]);
        if (!(v->owners[id] = strdup(label ? label : "")))
            rc = MS_ENOMEM;
    }
    sqlite3_finalize(st);
    if (rc)
        snprintf(err, errlen, "owners: %s", ms_strerror(rc));
    return rc;
}

static void load_command(struct ms_view *v)
{
    sqlite3_stmt *st;
    v->command[0] = 0;
    if (sqlite3_prepare_v2(v->m.db, "SELECT value FROM meta WHERE key = 'command_line'", -1, &st,
                           NULL) != SQLITE_OK)
        return;
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
        snprintf(v->command, sizeof v->command, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
}

/* Rewrites the first name in err as path: a message says the name the user gave. */
static void name_back(char *err, size_t errlen, const char *name, const char *path)
{
    char *at = strstr(err, name);
    if (!at)
        return;
    char rest[512];
    snprintf(rest, sizeof rest, "%s", at + strlen(name));
    snprintf(at, errlen - (size_t)(at - err), "%s%s", path, rest);
}

int ms_view_open(struct ms_view *v, const char *path, char *err, size_t errlen)
{
    memset(v, 0, sizeof *v);
    ms_u64map_init(&v->stack_idx, sizeof(uint32_t), 1u << 24);
    ms_u64map_init(&v->site_idx, sizeof(uint32_t), 1u << 24);
    ms_u64map_init(&v->frames_idx, sizeof(uint32_t), 1u << 24);
    ms_u64map_init(&v->flame_kids, sizeof(uint32_t), MS_U64MAP_MAX);
    /* the file opened now is the one read whenever the analyses ask, whatever is at path then */
    char pinned[64];
    v->fd = ms_view_pin(path, pinned, sizeof pinned);
    if (!(v->path = strdup(v->fd >= 0 ? pinned : path))) {
        ms_view_release(v);
        snprintf(err, errlen, "%s", ms_strerror(MS_ENOMEM));
        return MS_ENOMEM;
    }
    int rc = ms_view_model_load(&v->m, v->path, err, errlen);
    if (rc == 0)
        rc = load_owners(v, err, errlen);
    if (rc < 0) {
        if (v->fd >= 0)
            name_back(err, errlen, pinned, path);
        ms_view_release(v);
        return rc;
    }
    load_command(v);
    sqlite3_stmt *st; /* whether there is a Python call trace to draw */
    if (sqlite3_prepare_v2(v->m.db, "SELECT count(*) FROM python_trace", -1, &st, NULL) ==
        SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW)
            v->python_calls = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    return 0;
}

void ms_view_release(struct ms_view *v)
{
    if (!v)
        return;
    if (v->stext_ok) /* before the model closes the database */
        ms_stack_text_release(&v->stext);
    v->stext_ok = 0;
    ms_site_reader_release(v->site_reader);
    free(v->site_reader);
    v->site_reader = NULL;
    ms_view_model_release(&v->m);
    for (size_t i = 0; i < v->ntexts; i++)
        free(v->texts[i]);
    free(v->texts);
    for (size_t i = 0; i < v->nsites; i++)
        free(v->sites[i]);
    free(v->sites);
    ms_u64map_release(&v->site_idx);
    for (size_t i = 0; i < v->nowners; i++)
        free(v->owners[i]);
    free(v->owners);
    free(v->live_idx);
    free(v->path);
    v->path = NULL;
    if (v->fd >= 0)
        close(v->fd);
    v->fd = -1;
    for (size_t i = 0; i < sizeof v->analysis / sizeof *v->analysis; i++)
        free(v->analysis[i]);
    ms_u64map_release(&v->stack_idx);
    for (size_t i = 0; i < v->nframes; i++)
        free(v->frames[i].f);
    free(v->frames);
    ms_u64map_release(&v->frames_idx);
    free(v->flame_nodes);
    ms_u64map_release(&v->flame_kids);
    memset(v, 0, sizeof *v);
}

/* ---- Stacks --------------------------------------------------------------------------------- */

/* The cached text of a stack: its C lines (innermost first), a '\x1f' line, then its Python
 * lines (innermost first). "" for no stack or when out of memory. One reader of the stack tree
 * for all lookups: a flame graph of thousands of stacks asks thousands. */
const char *ms__vstack_text(struct ms_view *v, uint32_t id)
{
    uint32_t i;
    if (!id)
        return "";
    if (ms_u64map_get32(&v->stack_idx, id, &i))
        return v->texts[i];
    if (!v->stext_ok && ms_stack_text_init(&v->stext, v->m.db) < 0)
        return "";
    v->stext_ok = 1;
    const char *c0 = ms_stack_text_c(&v->stext, id);
    char *c = c0 ? strdup(c0) : NULL; /* the Python text comes from the same reader */
    const char *py = ms_stack_text_py(&v->stext, id);
    size_t lc = c ? strnlen(c, STACK_TEXT_MAX) : 0, lp = py ? strnlen(py, STACK_TEXT_MAX) : 0;
    char *t = malloc(lc + lp + 8);
    if (t) {
        size_t n = 0;
        memcpy(t + n, c ? c : "", lc), n += lc;
        if (n && t[n - 1] != '\n')
            t[n++] = '\n';
        t[n++] = '\x1f';
        t[n++] = '\n';
        memcpy(t + n, py ? py : "", lp), n += lp;
        t[n] = 0;
    }
    free(c);
    if (!t ||
        ms_grow((void **)&v->texts, &v->captexts, v->ntexts, sizeof *v->texts, 256, 1u << 24) < 0 ||
        ms_u64map_set32(&v->stack_idx, id, (uint32_t)v->ntexts) < 0) {
        free(t);
        return "";
    }
    v->texts[v->ntexts++] = t;
    return t;
}

static void site_cached(struct ms_view *v, uint32_t id, char *out, size_t len);

/* A stack's call site (ms_stack_site: the analyses' rule), cached. Writes at most len bytes. */
void ms__vstack_site(struct ms_view *v, uint32_t id, char *out, size_t len)
{
    if (id && v->seen_stacks)
        ms_u64map_put(v->seen_stacks, id, NULL); /* out of memory: the report lacks a stack */
    site_cached(v, id, out, len);
}

/* ms__vstack_site without naming the stack to a report (sites summed over many stacks). */
static void site_cached(struct ms_view *v, uint32_t id, char *out, size_t len)
{
    if (!id) {
        snprintf(out, len, "(no stack)");
        return;
    }
    uint32_t i;
    if (ms_u64map_get32(&v->site_idx, id, &i)) {
        snprintf(out, len, "%s", v->sites[i]);
        return;
    }
    if (!v->site_reader && (v->site_reader = malloc(sizeof *v->site_reader)))
        ms_site_reader_init(v->site_reader, v->m.db);
    if (!v->site_reader || ms_site_reader_site(v->site_reader, id, out, len) < 0) {
        snprintf(out, len, "(no stack)"); /* not cached: asked again next time */
        ms_oom_note();                    /* a command (report) fails at its end: ms_oom_seen */
        return;
    }
    char *copy = strdup(out);
    if (!copy ||
        ms_grow((void **)&v->sites, &v->capsites, v->nsites, sizeof *v->sites, 256, 1u << 24) < 0 ||
        ms_u64map_set32(&v->site_idx, id, (uint32_t)v->nsites) < 0) {
        free(copy); /* not cached: asked again next time */
        return;
    }
    v->sites[v->nsites++] = copy;
}

/* ---- Answers -------------------------------------------------------------------------------- */

static void track_json(struct ms_json *j, const struct ms_vtrack *tr, size_t id, int64_t origin)
{
    ms_json_int(j, "id", (long long)id);
    ms_json_int(j, "process_id", tr->process_id);
    ms_json_int(j, "pid", tr->pid);
    ms_json_int(j, "layer", tr->layer);
    ms_json_str(j, "layer_name", tr->layer_name);
    ms_json_bool(j, "reserve", tr->reserve);
    ms_json_int(j, "peak_bytes", tr->peak);
    ms_json_int(j, "peak_ns", tr->peak_ns - origin);
    ms_json_int(j, "final_bytes", tr->line->last_live);
    ms_json_int(j, "allocs", tr->allocs);
    ms_json_int(j, "alloc_bytes", tr->alloc_bytes);
}

/* Top sites by bytes of the blocks that pass keep(), largest first, at most top. */

static int by_bytes_desc(const void *a, const void *b)
{
    const struct site_sum *x = a, *y = b;
    return x->bytes < y->bytes   ? 1
           : x->bytes > y->bytes ? -1
                                 : (x->stack > y->stack) - (x->stack < y->stack);
}

/* Sums the selected blocks by stack into a sorted array (caller frees); NULL when out of memory. */
struct site_sum *ms__vsum_by_stack(struct ms_view *v, int mode, int64_t a, int64_t b, int64_t track,
                                   size_t *n, int64_t *total)
{
    struct ms_u64map sums;
    ms_u64map_init(&sums, sizeof(struct site_sum), MS_U64MAP_MAX);
    *total = 0;
    if (mode == 0 && ms__valive_set(v, a, a + 1, track) < 0)
        return NULL;
    size_t count = mode == 0 ? v->live_n : v->m.nblocks;
    for (size_t q = 0; q < count; q++) {
        const struct ms_vblock k_ = ms_view_block(&v->m, mode == 0 ? v->live_idx[q] : q), *k = &k_;
        int take = mode == 0 ||
                   (mode == 1 ? k->alloc_ns >= a && k->alloc_ns < b : k->free_ns == INT64_MAX);
        if (!take || (mode != 0 && !ms__vin_track(v, k, track)))
            continue;
        struct site_sum *s = ms_u64map_put(&sums, k->stack_id, NULL);
        if (!s) {
            ms_u64map_release(&sums);
            return NULL;
        }
        s->stack = k->stack_id;
        s->bytes += k->size;
        s->blocks++;
        *total += k->size;
    }
    struct site_sum *out = malloc((sums.count ? sums.count : 1) * sizeof *out);
    size_t pos = 0, m = 0;
    uint64_t key;
    void *val;
    while (out && ms_u64map_next(&sums, &pos, &key, &val))
        out[m++] = *(struct site_sum *)val;
    ms_u64map_release(&sums);
    if (out)
        qsort(out, m, sizeof *out, by_bytes_desc);
    *n = m;
    return out;
}

/* One call site's share of a sum by stack: its largest stack, bytes, blocks, stacks. */
struct site_row {
    char *site;
    uint32_t stack;
    size_t first; /* the position of its largest stack in the sum by stack */
    int64_t bytes, blocks, stacks;
};

static int by_site_text(const void *a, const void *b)
{
    const struct site_row *x = a, *y = b;
    int c = strcmp(x->site, y->site);
    return c ? c : (x->first > y->first) - (x->first < y->first);
}

static int by_site_bytes(const void *a, const void *b)
{
    const struct site_row *x = a, *y = b;
    return x->bytes < y->bytes   ? 1
           : x->bytes > y->bytes ? -1
                                 : (x->first > y->first) - (x->first < y->first);
}

/* The n sums by stack s (largest first) merged by call site (ms_stack_site, the analyses'
 * rule), largest first; *n becomes the number of sites. The caller frees each row's site and
 * the array; NULL when out of memory. */
static struct site_row *sum_by_site(struct ms_view *v, const struct site_sum *s, size_t *n)
{
    struct site_row *rows = calloc(*n ? *n : 1, sizeof *rows);
    for (size_t i = 0; rows && i < *n; i++) {
        char site[512];
        site_cached(v, s[i].stack, site, sizeof site);
        rows[i] = (struct site_row){strdup(site), s[i].stack, i, s[i].bytes, s[i].blocks, 1};
        if (!rows[i].site) {
            for (size_t k = 0; k < i; k++)
                free(rows[k].site);
            free(rows);
            rows = NULL;
        }
    }
    if (!rows)
        return NULL;
    qsort(rows, *n, sizeof *rows, by_site_text);
    size_t m = 0;
    for (size_t i = 0; i < *n; i++) {
        if (m && !strcmp(rows[m - 1].site, rows[i].site)) { /* the first is the largest */
            rows[m - 1].bytes += rows[i].bytes;
            rows[m - 1].blocks += rows[i].blocks;
            rows[m - 1].stacks++;
            free(rows[i].site);
        } else {
            rows[m++] = rows[i];
        }
    }
    qsort(rows, m, sizeof *rows, by_site_bytes);
    *n = m;
    return rows;
}

static int summary(struct ms_view *v, struct req *r, struct ms_json *j)
{
    (void)r;
    const struct ms_view_model *m = &v->m;
    ms_json_begin_object(j, NULL);
    ms_json_str(j, "command", v->command);
    char origin[32];
    snprintf(origin, sizeof origin, "%lld", (long long)m->t0);
    ms_json_str(j, "origin_ns", origin); /* every other time is ns from here */
    ms_json_int(j, "t0", 0);
    ms_json_int(j, "t1", m->t1 - m->t0);
    ms_json_int(j, "events", (long long)m->events);
    ms_json_int(j, "blocks", (long long)m->nblocks);
    ms_json_int(j, "peak_bytes", m->total_peak);
    ms_json_int(j, "peak_ns", m->total_peak_ns - m->t0);
    int64_t leaked = 0, nleaked = 0;
    for (size_t i = 0; i < m->nblocks; i++) {
        if (ms_vblocks_free_ns(&m->blocks, i) != INT64_MAX)
            continue; /* freed: not decoded */
        struct ms_vblock k = ms_view_block(m, i);
        if (!m->tracks[ms_vblock_track(&k)].reserve) {
            leaked += k.size;
            nleaked++;
        }
    }
    ms_json_int(j, "leaked_bytes", leaked);
    ms_json_int(j, "python_calls", v->python_calls);
    /* the threads of the Python call trace, most calls first (the page draws one or all) */
    ms_json_begin_array(j, "python_threads");
    sqlite3_stmt *pt;
    if (v->python_calls &&
        sqlite3_prepare_v2(m->db,
                           "SELECT \"Process Id\", \"Thread Id\", count(*) FROM python_trace "
                           "GROUP BY 1, 2 ORDER BY 3 DESC, 1, 2 LIMIT 256",
                           -1, &pt, NULL) == SQLITE_OK) {
        while (sqlite3_step(pt) == SQLITE_ROW) {
            ms_json_begin_object(j, NULL);
            ms_json_int(j, "pid", sqlite3_column_int64(pt, 0));
            ms_json_int(j, "tid", sqlite3_column_int64(pt, 1));
            ms_json_int(j, "calls", sqlite3_column_int64(pt, 2));
            ms_json_end_object(j);
        }
        sqlite3_finalize(pt);
    }
    ms_json_end_array(j);
    ms_json_int(j, "accessed_blocks", (long long)v->m.access.count);
    ms_json_int(j, "ranges", (long long)(v->m.nranges + v->m.ranges_dropped));
    ms_json_int(j, "leaked_blocks", nleaked);
    /* what the recording says went wrong: events the agent could not record, a trace that
     * stopped or was damaged */
    /* a sampled run (docs/production.md, "Sampling"): its figures are estimates, which the page
     * says first among the warnings; sampling_bytes for the page's own use (0: exact) */
    struct ms_sampling smp;
    ms_sampling_read(m->db, &smp);
    ms_json_int(j, "sampling_bytes", (long long)smp.bytes);
    ms_json_begin_array(j, "warnings");
    if (smp.bytes) {
        char note[128];
        ms_sampling_note(&smp, note, sizeof note);
        ms_json_str(j, NULL, note);
    }
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(m->db,
                           "SELECT pid, exe, lost_events, stopped_errno, damage FROM processes "
                           "WHERE lost_events > 0 OR stopped_errno != 0 OR damage IS NOT NULL "
                           "ORDER BY id LIMIT 100",
                           -1, &st, NULL) == SQLITE_OK) {
        while (sqlite3_step(st) == SQLITE_ROW) {
            char w[1024];
            const char *exe = (const char *)sqlite3_column_text(st, 1);
            const char *damage = (const char *)sqlite3_column_text(st, 4);
            long long lost = sqlite3_column_int64(st, 2);
            int stopped = sqlite3_column_int(st, 3);
            int n = snprintf(w, sizeof w, "process %lld (%.300s)",
                             (long long)sqlite3_column_int64(st, 0), exe ? exe : "?");
            if (lost)
                n += snprintf(w + n, sizeof w - (size_t)n, "; %lld events not recorded", lost);
            if (stopped)
                n += snprintf(w + n, sizeof w - (size_t)n, "; recording stopped: %s",
                              strerror(stopped));
            if (damage)
                snprintf(w + n, sizeof w - (size_t)n, "; damaged trace: %.400s", damage);
            ms_json_str(j, NULL, w);
        }
        sqlite3_finalize(st);
    }
    ms_json_end_array(j);
    ms_json_begin_array(j, "tracks");
    for (size_t i = 0; i < m->ntracks; i++) {
        ms_json_begin_object(j, NULL);
        track_json(j, &m->tracks[i], i, m->t0);
        ms_json_end_object(j);
    }
    ms_json_end_array(j);
    ms_json_begin_array(j, "pools");
    for (size_t i = 0; i < m->npools; i++)
        ms_json_str(j, NULL, m->pools[i].name);
    ms_json_end_array(j);
    ms_json_begin_array(j, "steps");
    for (size_t i = 0; i < m->nsteps; i++) {
        ms_json_begin_object(j, NULL);
        ms_json_int(j, "process_id", m->steps[i].process_id);
        ms_json_int(j, "step", m->steps[i].step);
        ms_json_int(j, "ts_ns", m->steps[i].ts_ns - m->t0);
        ms_json_end_object(j);
    }
    ms_json_end_array(j);
    ms_json_begin_array(j, "marks");
    for (size_t i = 0; i < m->nmarks && i < MAX_ROWS; i++) {
        ms_json_begin_object(j, NULL);
        ms_json_int(j, "process_id", m->marks[i].process_id);
        ms_json_int(j, "ts_ns", m->marks[i].ts_ns - m->t0);
        ms_json_str(j, "name", m->marks[i].name);
        ms_json_end_object(j);
    }
    ms_json_end_array(j);
    /* the sites of what was live at the peak, and of what was never freed: one row per call
     * site, as the analyses merge them (its largest stack for the stack panel) */
    for (int mode = 0; mode < 3; mode += 2) {
        size_t n;
        int64_t total;
        struct site_sum *s = ms__vsum_by_stack(v, mode, m->total_peak_ns, 0, 0, &n, &total);
        struct site_row *rows = s ? sum_by_site(v, s, &n) : NULL;
        free(s);
        if (!rows)
            return MS_ENOMEM;
        ms_json_begin_array(j, mode == 0 ? "peak_sites" : "leak_sites");
        for (size_t i = 0; i < n && i < 10; i++) {
            if (v->seen_stacks && rows[i].stack) /* a report carries the stacks it names */
                ms_u64map_put(v->seen_stacks, rows[i].stack, NULL);
            ms_json_begin_object(j, NULL);
            ms_json_int(j, "stack_id", rows[i].stack);
            ms_json_str(j, "site", rows[i].site);
            ms_json_int(j, "bytes", rows[i].bytes);
            ms_json_int(j, "blocks", rows[i].blocks);
            ms_json_int(j, "stacks", rows[i].stacks);
            ms_json_end_object(j);
        }
        ms_json_end_array(j);
        for (size_t i = 0; i < n; i++)
            free(rows[i].site);
        free(rows);
    }
    ms_json_end_object(j);
    return 0;
}

static int series(struct ms_view *v, struct req *r, struct ms_json *j)
{
    const struct ms_view_model *m = &v->m;
    int64_t a = ms__vtnum(r, "t0", m->t0);
    int64_t b = ms__vtnum(r, "t1", m->t1 + 1);
    int64_t n = ms__vnum(r, "n", 1000, 1, MAX_POINTS);
    if (r->bad[0])
        return MS_EINVAL;
    if (b <= a)
        b = a + 1;
    ms_json_begin_object(j, NULL);
    ms_json_int(j, "t0", a - r->origin);
    ms_json_int(j, "t1", b - r->origin);
    int64_t step = (b - a + n - 1) / n;
    if (step < 1)
        step = 1;
    ms_json_begin_array(j, "t");
    for (int64_t t = a; t < b; t += step)
        ms_json_int(j, NULL, t - r->origin);
    ms_json_end_array(j);
    /* each bucket's min and max in one pass; a track that is another's alias (the total of a
     * single memory layer) reuses its numbers */
    size_t nb = (size_t)((b - a + step - 1) / step);
    int64_t *mn = malloc(nb * 2 * sizeof *mn), *mx = mn ? mn + nb : NULL;
    if (!mn)
        return MS_ENOMEM;
    const struct ms_vline *done = NULL;        /* the changes mn and mx were computed for */
    struct ms_vcur *cur = malloc(sizeof *cur); /* 4 KiB: off the server thread's stack */
    if (!cur) {
        free(mn);
        return MS_ENOMEM;
    }
    ms_json_begin_array(j, "tracks");
    for (size_t i = 0; i < m->ntracks; i++) {
        const struct ms_vtrack *tr = &m->tracks[i];
        if (tr->line != done) {
            ms_vcur_init(cur, tr->line);
            size_t q = 0;
            for (int64_t t = a; t < b && q < nb; t += step, q++)
                ms_vline_minmax(cur, t, t + step < b ? t + step : b, &mn[q], &mx[q]);
            done = tr->line;
        }
        ms_json_begin_object(j, NULL);
        ms_json_int(j, "id", (long long)i);
        for (int k = 0; k < 2; k++) {
            ms_json_begin_array(j, k ? "max" : "min");
            for (size_t q = 0; q < nb; q++)
                ms_json_int(j, NULL, k ? mx[q] : mn[q]);
            ms_json_end_array(j);
        }
        ms_json_end_object(j);
    }
    ms_json_end_array(j);
    ms__vapi_usage_series(m, a, b, step, nb, j);
    ms_json_end_object(j);
    free(cur);
    free(mn);
    return 0;
}

/* One block of an answer; brief (sites=map): without its site and address, which the answer's
 * "sites" map gives by stack id (the lifetime chart's 2000 blocks share a few sites). */
static int by_owner_desc(const void *a, const void *b)
{
    const int64_t *x = a, *y = b;
    return x[1] < y[1] ? 1 : x[1] > y[1] ? -1 : (x[0] > y[0]) - (x[0] < y[0]);
}

/* Live bytes at t by owner label (the breakdown). */
static int owners(struct ms_view *v, struct req *r, struct ms_json *j)
{
    const struct ms_view_model *m = &v->m;
    int64_t at = ms__vtnum(r, "t", m->total_peak_ns);
    int64_t track = ms__vnum(r, "track", 0, 0, (int64_t)m->ntracks - 1);
    if (r->bad[0])
        return MS_EINVAL;
    size_t no = v->nowners ? v->nowners : 1;
    int64_t(*sum)[3] = calloc(no, sizeof *sum); /* owner id, bytes, blocks */
    if (!sum)
        return MS_ENOMEM;
    int64_t total = 0;
    if (ms__valive_set(v, at, at + 1, track) < 0) {
        free(sum);
        return MS_ENOMEM;
    }
    for (size_t q = 0; q < v->live_n; q++) {
        const struct ms_vblock k_ = ms_view_block(m, v->live_idx[q]), *k = &k_;
        size_t o = ms_vblock_owner(k) < no ? ms_vblock_owner(k) : 0;
        sum[o][0] = (int64_t)o;
        sum[o][1] += k->size;
        sum[o][2]++;
        total += k->size;
    }
    qsort(sum, no, sizeof *sum, by_owner_desc);
    ms_json_begin_object(j, NULL);
    ms_json_int(j, "t", at - r->origin);
    ms_json_int(j, "total", total);
    ms_json_begin_array(j, "owners");
    for (size_t i = 0; i < no && sum[i][1] > 0; i++) {
        ms_json_begin_object(j, NULL);
        size_t o = (size_t)sum[i][0];
        ms_json_str(j, "owner", o && v->owners[o] ? v->owners[o] : "(no owner)");
        ms_json_int(j, "bytes", sum[i][1]);
        ms_json_int(j, "blocks", sum[i][2]);
        ms_json_end_object(j);
    }
    ms_json_end_array(j);
    ms_json_end_object(j);
    free(sum);
    return 0;
}

/* The ranges overlapping [t0, t1) that last at least (t1 - t0) / n (a pixel of a chart n
 * pixels wide), at most MAX_RANGES of them in start order (the longest when more), with how
 * many overlap the window in all. */
static int window(struct ms_view *v, struct req *r, struct ms_json *j)
{
    const char *with_ranges = r->param(r->ctx, "ranges");
    if (with_ranges && strcmp(with_ranges, "1")) {
        snprintf(r->bad, sizeof r->bad, "parameter 'ranges': expected 1");
        return MS_EINVAL;
    }
    ms_json_begin_array(j, NULL);
    int rc = series(v, r, j);
    if (rc == 0)
        rc = ms__vapi_blocks(v, r, j);
    if (rc == 0 && with_ranges)
        rc = ms__vapi_ranges(v, r, j);
    else if (rc == 0)
        ms_json_null(j, NULL);
    ms_json_end_array(j);
    return rc;
}

/* What a cursor move asks, in one answer: [the blocks live at t (as /api/blocks?t), the owners
 * at t, the flame graph live at t (with mode=live, else null), the pool's allocator state at t
 * (with pool=N, else null)]. The server answers one request after another anyway, and each
 * browser round trip costs more than these answers (all from one pass over the blocks live
 * at t, which the alive set keeps). */
static int at(struct ms_view *v, struct req *r, struct ms_json *j)
{
    if (!r->param(r->ctx, "t")) {
        snprintf(r->bad, sizeof r->bad, "parameter 't': required");
        return MS_EINVAL;
    }
    ms_json_begin_array(j, NULL);
    int rc = ms__vapi_blocks(v, r, j);
    if (rc == 0)
        rc = owners(v, r, j);
    if (rc == 0 && r->param(r->ctx, "mode"))
        rc = ms__vapi_flame(v, r, j);
    else if (rc == 0)
        ms_json_null(j, NULL);
    if (rc == 0 && r->param(r->ctx, "pool"))
        rc = ms__vapi_segments(v, r, j);
    else if (rc == 0)
        ms_json_null(j, NULL);
    ms_json_end_array(j);
    return rc;
}

static void lines_json(struct ms_json *j, const char *key, const char *p, const char *end)
{
    char buf[2048];
    ms_json_begin_array(j, key);
    while (p < end) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        size_t l = e ? (size_t)(e - p) : (size_t)(end - p);
        if (l) {
            snprintf(buf, sizeof buf, "%.*s", (int)l, p);
            ms_json_str(j, NULL, buf);
        }
        p = e ? e + 1 : end;
    }
    ms_json_end_array(j);
}

static int stack(struct ms_view *v, struct req *r, struct ms_json *j)
{
    int64_t id = ms__vnum(r, "id", -1, 0, UINT32_MAX);
    if (id < 0 && !r->bad[0])
        snprintf(r->bad, sizeof r->bad, "parameter 'id' is required");
    if (r->bad[0])
        return MS_EINVAL;
    const char *t = ms__vstack_text(v, (uint32_t)id);
    const char *sep = strchr(t, '\x1f');
    ms_json_begin_object(j, NULL);
    ms_json_int(j, "id", id);
    if (sep) {
        lines_json(j, "c", t, sep);
        lines_json(j, "py", sep + 2, sep + 2 + strlen(sep + 2));
    } else {
        ms_json_begin_array(j, "c");
        ms_json_end_array(j);
        ms_json_begin_array(j, "py");
        ms_json_end_array(j);
    }
    ms_json_end_object(j);
    return 0;
}

/* The analyses memscope analyze runs, by name and one-line summary. */
static int analyses(struct ms_view *v, struct req *r, struct ms_json *j)
{
    (void)v, (void)r;
    ms_json_begin_object(j, NULL);
    ms_json_begin_array(j, "analyses");
    for (const struct ms_analysis *a = ms_analyses; a->name; a++) {
        ms_json_begin_object(j, NULL);
        ms_json_str(j, "name", a->name);
        ms_json_str(j, "summary", a->summary);
        ms_json_end_object(j);
    }
    ms_json_end_array(j);
    ms_json_end_object(j);
    return 0;
}

/* The text report of analysis name with options o (its reason when it fails), a string the
 * caller frees; NULL when out of memory. */
static char *analysis_text(struct ms_view *v, const char *name, const struct ms_analyze_opts *o)
{
    char *text = NULL, err[512] = "";
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    int rc = ms_analyze_run_list(v->path, name, o, f, err, sizeof err);
    if (rc < 0) {
        rewind(f);
        fprintf(f, "%s: %s\n", name, err[0] ? err : ms_strerror(rc));
    }
    if (fclose(f) != 0 || !text) {
        free(text);
        return NULL;
    }
    return text;
}

/* The text report of one analysis with its default options (memscope analyze NAME RUN.db),
 * computed once per server; compare with steps=A,B compares those two steps of the run (as
 * `memscope analyze compare --steps A,B`), computed each time. An analysis that fails answers
 * its reason as its text. */
static int analysis(struct ms_view *v, struct req *r, struct ms_json *j)
{
    const char *name = r->param(r->ctx, "name"), *steps = r->param(r->ctx, "steps");
    size_t i = 0;
    for (; name && ms_analyses[i].name; i++)
        if (!strcmp(ms_analyses[i].name, name))
            break;
    if (!name || !ms_analyses[i].name || i >= sizeof v->analysis / sizeof *v->analysis) {
        snprintf(r->bad, sizeof r->bad, "parameter 'name': expected an analysis (/api/analyses)");
        return MS_EINVAL;
    }
    struct ms_analyze_opts o;
    ms_analyze_opts_init(&o);
    if (steps) {
        int a, b, end = 0;
        if (strcmp(name, "compare") || sscanf(steps, "%d,%d%n", &a, &b, &end) != 2 || steps[end] ||
            a < 1 || b < 1 || a == b) {
            snprintf(r->bad, sizeof r->bad,
                     "parameter 'steps': expected two steps A,B, with name=compare");
            return MS_EINVAL;
        }
        o.step_a = a, o.step_b = b;
        char *text = analysis_text(v, name, &o);
        if (!text)
            return MS_ENOMEM;
        ms_json_begin_object(j, NULL);
        ms_json_str(j, "name", name);
        ms_json_str(j, "text", text);
        ms_json_end_object(j);
        free(text);
        return 0;
    }
    if (!v->analysis[i] && !(v->analysis[i] = analysis_text(v, name, &o)))
        return MS_ENOMEM;
    ms_json_begin_object(j, NULL);
    ms_json_str(j, "name", name);
    ms_json_str(j, "text", v->analysis[i]);
    ms_json_end_object(j);
    return 0;
}

static const struct {
    const char *path;
    int (*fn)(struct ms_view *, struct req *, struct ms_json *);
} routes[] = {
    {"/api/summary", summary},
    {"/api/series", series},
    {"/api/blocks", ms__vapi_blocks},
    {"/api/events", ms__vapi_events},
    {"/api/at", at},
    {"/api/window", window},
    {"/api/ranges", ms__vapi_ranges},
    {"/api/flame", ms__vapi_flame},
    {"/api/owners", owners},
    {"/api/stack", stack},
    {"/api/analyses", analyses},
    {"/api/analysis", analysis},
    {"/api/segments", ms__vapi_segments},
    {"/api/pytrace", ms__vapi_pytrace},
};

int ms_view_api(struct ms_view *v, const char *path, ms_view_param_fn param, void *ctx, char **body,
                size_t *len)
{
    *body = NULL;
    *len = 0;
    FILE *f = open_memstream(body, len);
    if (!f)
        return 500;
    struct req r;
    ms__vreq_init(&r, param, ctx, v->m.t0);
    struct ms_json j;
    ms_json_init(&j, f);
    int status = 404, rc = 0;
    for (size_t i = 0; i < sizeof routes / sizeof *routes; i++)
        if (!strcmp(path, routes[i].path)) {
            rc = routes[i].fn(v, &r, &j);
            status = rc == 0 ? 200 : rc == MS_EINVAL ? 400 : 500;
            break;
        }
    if (status != 200) {
        /* a failed answer may have written part of its document: start again */
        fflush(f);
        rewind(f);
        ms_json_init(&j, f);
        ms_json_begin_object(&j, NULL);
        ms_json_str(&j, "error",
                    status == 404   ? "no such query"
                    : status == 400 ? r.bad
                                    : ms_strerror(rc));
        ms_json_end_object(&j);
    }
    ms_json_finish(&j);
    long end = ftell(f);
    if (fclose(f) != 0 || !*body) {
        free(*body);
        *body = NULL;
        return 500;
    }
    *len = end >= 0 ? (size_t)end : *len;
    return status;
}

/* decompose.c: `memscope analyze decompose`: what the live memory is made of, by owner.
 *
 * The owner tree (msMemScope decompose, reference §4.5; Insight's breakdown, §5): the blocks
 * live at one moment -- a time (--at NS), the end of a step in every process that has it
 * (--step N), or by default the peak of live bytes over the analysed layers -- grouped by
 * layer, then by owner split on '@' into levels; a node's size is the sum over the live blocks
 * whose owner starts with its levels. Blocks without owner go to "(no owner)".
 * And live bytes per owner over time: at each step end (STEP events), else at ten evenly
 * spaced times, plus each owner's own peak.
 *
 * Workload: one scan of the memory events in id order, each joined to its block for the owner
 * (a primary-key lookup), then one GROUP BY over blocks for the tree. Memory: one counter per
 * owner per sample point, and the tree. */
#include "store/stack_text.h"
#include "common/term_text.h"
#include "analyze.h"
#include "common/db_ids.h"

#include "common/ms_error.h"
#include "common/grow.h"
#include "store/store.h"

#include <stdlib.h>
#include <string.h>

#define MAX_LEVELS 20 /* Insight's maximum tree depth; deeper levels stay joined in the last */
#define NSAMPLES 10

struct node {
    char *name;
    long long bytes, count;
    struct node *kids;
    size_t nkids, capkids;
};

static void node_release(struct node *n)
{
    for (size_t i = 0; i < n->nkids; i++)
        node_release(&n->kids[i]);
    free(n->kids);
    free(n->name);
}

static struct node *node_child(struct node *n, const char *name, size_t len)
{
    for (size_t i = 0; i < n->nkids; i++)
        if (strlen(n->kids[i].name) == len && !memcmp(n->kids[i].name, name, len))
            return &n->kids[i];
    if (n->nkids == n->capkids &&
        ms_grow((void **)&n->kids, &n->capkids, n->nkids, sizeof *n->kids, 4, MS_GROW_MAX) < 0)
        return NULL;
    struct node *c = &n->kids[n->nkids];
    memset(c, 0, sizeof *c);
    if (!(c->name = strndup(name, len)))
        return NULL;
    n->nkids++;
    return c;
}

/* Adds count blocks of bytes under layer, then each sep-separated level of owner ('@' for
 * owner strings, '\n' for stacks). */
static int tree_add_sep(struct node *root, const char *layer, const char *owner, int sep,
                        long long count, long long bytes)
{
    root->bytes += bytes;
    root->count += count;
    struct node *n = node_child(root, layer, strlen(layer));
    if (!n)
        return MS_ENOMEM;
    n->bytes += bytes;
    n->count += count;
    if (!owner)
        owner = "(no owner)";
    const char *p = owner;
    for (int level = 1; *p || p == owner; level++) {
        const char *at = level < MAX_LEVELS ? strchr(p, sep) : NULL;
        size_t len = at ? (size_t)(at - p) : strlen(p);
        if (!(n = node_child(n, p, len)))
            return MS_ENOMEM;
        n->bytes += bytes;
        n->count += count;
        if (!at)
            break;
        p = at + 1;
    }
    return 0;
}

static int tree_add(struct node *root, const char *layer, const char *owner, long long count,
                    long long bytes)
{
    return tree_add_sep(root, layer, owner, '@', count, bytes);
}

/* A frame line without source information ("??(0): f" in snapshots, "f (??:0)" natively): left
 * out of stack paths, which read better with the frames a reader can open. */
static int frame_without_source(const char *line, size_t len)
{
    if (len >= 3 && !memcmp(line, "?\?(", 3)) /* "?\?" : not a trigraph */
        return 1;
    for (size_t i = 0; i + 4 <= len; i++)
        if (!memcmp(line + i, "(??:", 4))
            return 1;
    return 0;
}

/* Adds a stack (frames innermost first, one per line) as a path of frames, outermost first:
 * the innermost MAX_LEVELS - 1 frames with source information (the innermost frame when none
 * has any). */
static int tree_add_stack(struct node *root, const char *layer, const char *text, long long count,
                          long long bytes)
{
    if (!text || !*text)
        return tree_add_sep(root, layer, "(no stack)", '\n', count, bytes);
    const char *starts[MAX_LEVELS];
    size_t lens[MAX_LEVELS];
    int n = 0;
    for (const char *p = text; *p && n < MAX_LEVELS - 1;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len && (!frame_without_source(p, len) || (n == 0 && !e))) {
            starts[n] = p;
            lens[n++] = len;
        }
        if (!e)
            break;
        p = e + 1;
    }
    if (n == 0) { /* no frame with source: the innermost one */
        const char *e = strchr(text, '\n');
        starts[0] = text;
        lens[0] = e ? (size_t)(e - text) : strlen(text);
        n = 1;
    }
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += lens[i] + 1;
    char *path = malloc(total + 1);
    if (!path)
        return MS_ENOMEM;
    size_t k = 0;
    for (int i = n; i-- > 0;) {
        if (k)
            path[k++] = '\n';
        memcpy(path + k, starts[i], lens[i]);
        k += lens[i];
    }
    path[k] = 0;
    int rc = tree_add_sep(root, layer, path, '\n', count, bytes);
    free(path);
    return rc;
}

static int by_bytes(const void *a, const void *b)
{
    const struct node *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    return strcmp(x->name, y->name);
}

static void tree_sort(struct node *n)
{
    if (n->nkids > 1)
        qsort(n->kids, n->nkids, sizeof *n->kids, by_bytes);
    for (size_t i = 0; i < n->nkids; i++)
        tree_sort(&n->kids[i]);
}

static void tree_text(FILE *out, const struct node *n, int depth)
{
    int pad = 44 - 2 * depth;
    fprintf(out, "  %*s%-*s %14lld %8lld\n", 2 * depth, "", pad < 8 ? 8 : pad,
            ms_term_text(n->name), n->bytes, n->count);
    for (size_t i = 0; i < n->nkids; i++)
        tree_text(out, &n->kids[i], depth + 1);
}

static void tree_json(struct ms_json *j, const struct node *n)
{
    ms_json_begin_object(j, NULL);
    ms_json_str(j, "name", n->name);
    ms_json_int(j, "bytes", n->bytes);
    ms_json_int(j, "blocks", n->count);
    ms_json_begin_array(j, "children");
    for (size_t i = 0; i < n->nkids; i++)
        tree_json(j, &n->kids[i]);
    ms_json_end_array(j);
    ms_json_end_object(j);
}

/* The series: live bytes per owner (index 0: no owner) at each sample point. */
struct series {
    int nowners;        /* owners.id max + 1 */
    char **labels;      /* per owner id; NULL where no such id */
    long long *live;    /* current, per owner */
    long long *peak;    /* per owner */
    long long *points;  /* npoints * nowners */
    char (*plabel)[40]; /* per point */
    int64_t *pts;       /* per point: time */
    size_t npoints, cap_values, cap_labels, cap_times;
    long long total, total_peak;
    int by_steps; /* points are step ends (else evenly spaced times) */
    int64_t peak_id, peak_ts;
    char err[256]; /* why the replay of a compact database failed */
};

static void series_release(struct series *s)
{
    for (int i = 0; s->labels && i < s->nowners; i++)
        free(s->labels[i]);
    free(s->labels);
    free(s->live);
    free(s->peak);
    free(s->points);
    free(s->plabel);
    free(s->pts);
}

static int add_point(struct series *s, const char *label, int64_t ts)
{
    size_t max = ((size_t)1 << 24) / (size_t)s->nowners; /* points of nowners values each */
    if (s->npoints >= max)
        return MS_ELIMIT;
    /* The values grow by whole points: nowners at a time. */
    if (ms_grow((void **)&s->points, &s->cap_values, (s->npoints + 1) * (size_t)s->nowners - 1,
                sizeof *s->points, 16 * (size_t)s->nowners, (size_t)1 << 24) < 0 ||
        ms_grow((void **)&s->plabel, &s->cap_labels, s->npoints, sizeof *s->plabel, 16, max) < 0 ||
        ms_grow((void **)&s->pts, &s->cap_times, s->npoints, sizeof *s->pts, 16, max) < 0)
        return MS_ENOMEM;
    memcpy(s->points + s->npoints * (size_t)s->nowners, s->live,
           (size_t)s->nowners * sizeof *s->live);
    snprintf(s->plabel[s->npoints], sizeof s->plabel[0], "%s", label);
    s->pts[s->npoints++] = ts;
    return 0;
}

static int scalar(sqlite3 *db, const char *q, long long *v)
{
    sqlite3_stmt *st;
    int rc = MS_EDB;
    if (sqlite3_prepare_v2(db, q, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
        *v = sqlite3_column_int64(st, 0);
        rc = 0;
    }
    sqlite3_finalize(st);
    return rc;
}

/* The scan's state. */
struct scan_ctx {
    struct series *s;
    long long nstepproc;
    int64_t t0, t1;
    int sample; /* next time sample (no steps) */
    /* a compact database's replay */
    struct ms_layer_set layers;
    struct ms_u64map owner_of; /* allocation id -> owner, for the blocks it has rows of */
    struct ms_u64map pid_of;   /* process id -> pid */
    int has_owner;
};

/* One row: a MALLOC or FREE (with its block, of a selected layer) or a STEP, in id order;
 * w is the block's owner (0: none), name the STEP's. */
static int on_row(struct scan_ctx *x, int64_t id, int kind, int64_t ts, long long size, long long w,
                  const char *name, int pid)
{
    struct series *s = x->s;
    char label[40];
    int rc = 0;
    if (!x->nstepproc) {
        while (!rc && x->sample < NSAMPLES &&
               ts > x->t0 + (int64_t)((double)(x->t1 - x->t0) * (x->sample + 1) / NSAMPLES)) {
            snprintf(label, sizeof label, "%d/%d of the run", x->sample + 1, NSAMPLES);
            rc = add_point(s, label,
                           x->t0 + (int64_t)((double)(x->t1 - x->t0) * (x->sample + 1) / NSAMPLES));
            x->sample++;
        }
    }
    if (rc)
        return rc;
    if (kind == MS_KIND_STEP) {
        if (x->nstepproc > 1)
            snprintf(label, sizeof label, "pid %d step %s", pid, name ? name : "?");
        else
            snprintf(label, sizeof label, "step %s", name ? name : "?");
        return add_point(s, label, ts);
    }
    if (w < 0 || w >= s->nowners)
        w = 0;
    if (kind == MS_KIND_MALLOC) {
        s->live[w] += size;
        s->total += size;
        if (s->live[w] > s->peak[w])
            s->peak[w] = s->live[w];
        if (s->total > s->total_peak) {
            s->total_peak = s->total;
            s->peak_id = id;
            s->peak_ts = ts;
        }
    } else {
        s->live[w] -= size;
        s->total -= size;
    }
    return 0;
}

static int on_replayed(void *ctx, const struct ms_store_row *r)
{
    struct scan_ctx *x = ctx;
    if (r->kind == MS_KIND_STEP) {
        if (!x->nstepproc)
            return 0;
        char name[32];
        snprintf(name, sizeof name, "%.*s", (int)(r->name_len < 31 ? r->name_len : 31),
                 r->name ? r->name : "");
        const int64_t *pid = ms_u64map_get(&x->pid_of, r->process_id);
        return on_row(x, r->id, MS_KIND_STEP, r->ts_ns, 0, 0, r->name ? name : NULL,
                      pid ? (int)*pid : 0);
    }
    if ((r->kind != MS_KIND_MALLOC && r->kind != MS_KIND_FREE) || !r->allocation_id ||
        !ms__layer_selected(&x->layers, r->layer))
        return 0;
    int64_t w = 0;
    if (x->has_owner) {
        const int64_t *o = ms_u64map_get(&x->owner_of, r->allocation_id);
        w = o ? *o : r->owner_id;
    }
    return on_row(x, r->id, r->kind, r->ts_ns, r->has_size ? r->size : 0, w, NULL, 0);
}

/* A compact database's owner series of the default layers, computed by the conversion
 * (decompose_points, decompose_live, owner_peaks, meta all_peak_*): 1 when read, 0 when it has
 * none (the caller replays), or an error. */
static int precomputed(sqlite3 *db, struct series *s, long long nstepproc)
{
    long long n = 0;
    if (scalar(db, "SELECT count(*) FROM decompose_points", &n) < 0 || n == 0)
        return 0;
    long long v;
    if (scalar(db, "SELECT value FROM meta WHERE key = 'all_peak_event_id'", &v) == 0) {
        s->peak_id = v;
        if (scalar(db, "SELECT value FROM meta WHERE key = 'all_peak_ns'", &v) == 0)
            s->peak_ts = v;
        if (scalar(db, "SELECT value FROM meta WHERE key = 'all_peak_bytes'", &v) == 0)
            s->total_peak = v;
    }
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "SELECT owner_id, peak_bytes FROM owner_peaks", -1, &st, NULL) !=
        SQLITE_OK)
        return MS_EDB;
    int r;
    while ((r = sqlite3_step(st)) == SQLITE_ROW) {
        long long w = sqlite3_column_int64(st, 0);
        s->peak[w >= 0 && w < s->nowners ? w : 0] = sqlite3_column_int64(st, 1);
    }
    sqlite3_finalize(st); /* keeps a failed step's message for the caller */
    if (r != SQLITE_DONE)
        return MS_EDB;
    sqlite3_stmt *lv;
    if (sqlite3_prepare_v2(db,
                           "SELECT p.point, p.kind, p.step, p.ts_ns, (SELECT pid FROM "
                           "processes WHERE id = p.process_id) FROM decompose_points p "
                           "ORDER BY p.point",
                           -1, &st, NULL) != SQLITE_OK)
        return MS_EDB;
    if (sqlite3_prepare_v2(db, "SELECT owner_id, live_bytes FROM decompose_live WHERE point = ?",
                           -1, &lv, NULL) != SQLITE_OK) {
        sqlite3_finalize(st);
        return MS_EDB;
    }
    int rc = 0, sample = 0;
    while (!rc && (r = sqlite3_step(st)) == SQLITE_ROW) {
        memset(s->live, 0, (size_t)s->nowners * sizeof *s->live);
        sqlite3_bind_int64(lv, 1, sqlite3_column_int64(st, 0));
        int rl;
        while ((rl = sqlite3_step(lv)) == SQLITE_ROW) {
            long long w = sqlite3_column_int64(lv, 0);
            s->live[w >= 0 && w < s->nowners ? w : 0] += sqlite3_column_int64(lv, 1);
        }
        if (rl != SQLITE_DONE) {
            rc = MS_EDB;
            break;
        }
        sqlite3_reset(lv);
        char label[40];
        int kind = sqlite3_column_int(st, 1);
        if (kind == 0 && nstepproc > 1)
            snprintf(label, sizeof label, "pid %d step %lld", sqlite3_column_int(st, 4),
                     (long long)sqlite3_column_int64(st, 2));
        else if (kind == 0)
            snprintf(label, sizeof label, "step %lld", (long long)sqlite3_column_int64(st, 2));
        else if (kind == 1)
            snprintf(label, sizeof label, "%d/%d of the run", ++sample, NSAMPLES);
        else
            snprintf(label, sizeof label, "end");
        rc = add_point(s, label, sqlite3_column_int64(st, 3));
    }
    if (!rc && r != SQLITE_DONE)
        rc = MS_EDB;
    sqlite3_finalize(st); /* each keeps a failed step's message for the caller */
    sqlite3_finalize(lv);
    return rc < 0 ? rc : 1;
}

/* The (key, value) rows of query q into m. 0, MS_EDB or MS_ENOMEM. */
static int load_map(sqlite3 *db, const char *q, struct ms_u64map *m)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, q, -1, &st, NULL) != SQLITE_OK)
        return MS_EDB;
    int rc = 0, r, isnew;
    while (!rc && (r = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t *v = ms_u64map_put(m, sqlite3_column_int64(st, 0), &isnew);
        if (!v)
            rc = MS_ENOMEM;
        else
            *v = sqlite3_column_int64(st, 1);
    }
    if (!rc && r != SQLITE_DONE)
        rc = MS_EDB;
    sqlite3_finalize(st);
    return rc;
}

/* One scan of the memory and STEP events: live bytes per owner, the peak, the sample points. */
static int scan(sqlite3 *db, const struct ms_analyze_opts *o, int has_owner, struct series *s,
                int64_t t0, int64_t t1)
{
    long long maxo = 0, nstepproc = 0;
    if (has_owner && scalar(db, "SELECT COALESCE(MAX(id), 0) FROM owners", &maxo) < 0)
        return MS_EDB;
    if (maxo > (1 << 20))
        return MS_ELIMIT;
    if (ms__has_column(db, "steps", "step") &&
        scalar(db, "SELECT COUNT(DISTINCT process_id) FROM steps WHERE end_event_id NOT NULL",
               &nstepproc) < 0)
        return MS_EDB;
    s->nowners = (int)maxo + 1;
    s->by_steps = nstepproc > 0;
    s->labels = calloc((size_t)s->nowners, sizeof *s->labels);
    s->live = calloc((size_t)s->nowners, sizeof *s->live);
    s->peak = calloc((size_t)s->nowners, sizeof *s->peak);
    if (!s->labels || !s->live || !s->peak)
        return MS_ENOMEM;
    sqlite3_stmt *st;
    if (has_owner) {
        if (sqlite3_prepare_v2(db, "SELECT id, label FROM owners", -1, &st, NULL) != SQLITE_OK)
            return MS_EDB;
        int r;
        while ((r = sqlite3_step(st)) == SQLITE_ROW) {
            long long id = sqlite3_column_int64(st, 0);
            if (id > 0 && id < s->nowners &&
                !(s->labels[id] = strdup((const char *)sqlite3_column_text(st, 1)))) {
                sqlite3_finalize(st);
                return MS_ENOMEM;
            }
        }
        sqlite3_finalize(st);
        if (r != SQLITE_DONE)
            return MS_EDB;
    }
    struct scan_ctx x = {.s = s, .nstepproc = nstepproc, .t0 = t0, .t1 = t1};
    int rc = 0;
    if (!o->layer && ms__computed(db, "decompose_points") &&
        (rc = precomputed(db, s, nstepproc)) != 0)
        return rc < 0 ? rc : 0;
    if (ms_store_is_compact(db)) {
        /* the same rows from the traces (ms_store_replay); a block's owner is that of its
         * MALLOC unless a tag changed it, and then the compact database has its row */
        rc = ms__layer_set_load(db, o, &x.layers);
        ms_u64map_init(&x.owner_of, sizeof(int64_t), MS_U64MAP_MAX);
        ms_u64map_init(&x.pid_of, sizeof(int64_t), MS_U64MAP_MAX);
        if (rc == 0 && has_owner)
            rc = load_map(db, "SELECT allocation_id, COALESCE(owner_id, 0) FROM blocks",
                          &x.owner_of);
        if (rc == 0)
            rc = load_map(db, "SELECT id, pid FROM processes", &x.pid_of);
        x.has_owner = has_owner;
        if (rc == 0)
            rc = ms_store_replay(sqlite3_db_filename(db, "main"), on_replayed, &x, s->err,
                                 sizeof s->err);
        ms_u64map_release(&x.owner_of);
        ms_u64map_release(&x.pid_of);
        ms__layer_set_release(&x.layers);
        if (rc < 0)
            return rc;
    } else {
        char *filter = ms__layer_filter(db, o, "e.layer");
        if (!filter)
            return MS_ENOMEM;
        int prc = ms__prepare(db, &st,
                              "SELECT e.id, e.kind, e.ts_ns, e.size, %s, %s, p.pid FROM events e "
                              "LEFT JOIN blocks b ON b.allocation_id = e.allocation_id "
                              "LEFT JOIN processes p ON p.id = e.process_id "
                              "WHERE (e.kind IN (" MS_SQL_MALLOC ", " MS_SQL_FREE
                              ") AND e.allocation_id IS NOT "
                              "NULL AND %s)%s ORDER BY e.id",
                              has_owner ? "b.owner_id" : "NULL", nstepproc ? "e.name" : "NULL",
                              filter, nstepproc ? " OR e.kind = " MS_SQL_STEP : "");
        sqlite3_free(filter);
        if (prc != SQLITE_OK)
            return prc == SQLITE_NOMEM ? MS_ENOMEM : MS_EDB;
        int r;
        while (!rc && (r = sqlite3_step(st)) == SQLITE_ROW)
            rc = on_row(&x, sqlite3_column_int64(st, 0), sqlite3_column_int(st, 1),
                        sqlite3_column_int64(st, 2), sqlite3_column_int64(st, 3),
                        sqlite3_column_int64(st, 4), (const char *)sqlite3_column_text(st, 5),
                        sqlite3_column_int(st, 6));
        if (!rc && r != SQLITE_DONE)
            rc = MS_EDB;
        sqlite3_finalize(st);
    }
    int sample = x.sample;
    char label[40];
    /* The last point: the end of the run (the unfinished last step, or the last sample). */
    if (!rc && nstepproc)
        rc = add_point(s, "end", t1);
    while (!rc && !nstepproc && sample < NSAMPLES) {
        snprintf(label, sizeof label, "%d/%d of the run", sample + 1, NSAMPLES);
        rc = add_point(s, label, t0 + (int64_t)((double)(t1 - t0) * (sample + 1) / NSAMPLES));
        sample++;
    }
    return rc;
}

/* Builds the tree of the blocks live at event id `eid` (time ts) of process `proc` (0: all). */
static int build_tree(sqlite3 *db, const struct ms_analyze_opts *o, int has_owner,
                      struct node *root, int proc, int64_t eid, int64_t ts)
{
    char *filter = ms__layer_filter(db, o, "b.layer");
    if (!filter)
        return MS_ENOMEM;
    const char *procc = proc > 0 ? " AND b.process_id = ?3" : "";
    /* Live at event eid: allocated by it, and not ended by it (by a free event, or -- for a
     * block replaced without a free -- by time). */
    sqlite3_stmt *st;
    int prc;
    if (o->by_stack) /* the Python stack when there is one, else the native one */
        prc = ms__prepare(db, &st,
                          "SELECT l.name, NULL, COUNT(*), SUM(b.size), s.id "
                          "FROM blocks b LEFT JOIN layers l ON l.id = b.layer "
                          "LEFT JOIN stacks s ON s.id = b.stack_id "
                          "WHERE %s%s AND b.alloc_event_id <= ?1 AND (b.free_ns IS NULL "
                          "OR (b.free_event_id IS NOT NULL AND b.free_event_id > ?1) "
                          "OR (b.free_event_id IS NULL AND b.free_ns > ?2)) "
                          "GROUP BY b.layer, b.stack_id",
                          filter, procc);
    else
        prc = ms__prepare(db, &st,
                          "SELECT l.name, %s, COUNT(*), SUM(b.size) FROM blocks b "
                          "LEFT JOIN layers l ON l.id = b.layer %s "
                          "WHERE %s%s AND b.alloc_event_id <= ?1 AND (b.free_ns IS NULL "
                          "OR (b.free_event_id IS NOT NULL AND b.free_event_id > ?1) "
                          "OR (b.free_event_id IS NULL AND b.free_ns > ?2)) "
                          "GROUP BY b.layer, %s",
                          has_owner ? "w.label" : "NULL",
                          has_owner ? "LEFT JOIN owners w ON w.id = b.owner_id" : "", filter, procc,
                          has_owner ? "b.owner_id" : "1");
    sqlite3_free(filter);
    if (prc != SQLITE_OK)
        return prc == SQLITE_NOMEM ? MS_ENOMEM : MS_EDB;
    if (proc > 0)
        sqlite3_bind_int(st, 3, proc);
    sqlite3_bind_int64(st, 1, eid);
    sqlite3_bind_int64(st, 2, ts);
    /* the Python stack when there is one, else the native one (made from the stack tree) */
    struct ms_stack_text stext;
    if (o->by_stack && ms_stack_text_init(&stext, db) < 0) {
        sqlite3_finalize(st);
        return MS_EDB;
    }
    int rc = 0, r;
    while (!rc && (r = sqlite3_step(st)) == SQLITE_ROW) {
        const char *layer = (const char *)sqlite3_column_text(st, 0);
        const char *text = (const char *)sqlite3_column_text(st, 1);
        if (o->by_stack && sqlite3_column_type(st, 4) != SQLITE_NULL) {
            int64_t id = sqlite3_column_int64(st, 4);
            if ((text = ms_stack_text_py(&stext, id)) && !*text) /* none: the native one */
                text = ms_stack_text_c(&stext, id);
            if (!text) {
                rc = MS_ENOMEM;
                break;
            }
        }
        if (o->by_stack)
            rc = tree_add_stack(root, layer ? layer : "?", text, sqlite3_column_int64(st, 2),
                                sqlite3_column_int64(st, 3));
        else
            rc = tree_add(root, layer ? layer : "?", (const char *)sqlite3_column_text(st, 1),
                          sqlite3_column_int64(st, 2), sqlite3_column_int64(st, 3));
    }
    if (!rc && r != SQLITE_DONE)
        rc = MS_EDB;
    sqlite3_finalize(st);
    if (o->by_stack)
        ms_stack_text_release(&stext);
    return rc;
}

/* The last event at or before time ts. */
static int event_at(sqlite3 *db, int64_t ts, int64_t *eid)
{
    sqlite3_stmt *st;
    /* One scan: events has no time index (ids are in time order, but not every id is). */
    if (sqlite3_prepare_v2(db, "SELECT COALESCE(MAX(id), 0) FROM events WHERE ts_ns <= ?", -1, &st,
                           NULL) != SQLITE_OK)
        return MS_EDB;
    sqlite3_bind_int64(st, 1, ts);
    int rc = sqlite3_step(st) == SQLITE_ROW ? 0 : MS_EDB;
    if (!rc)
        *eid = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return rc;
}

static void rel_ms(char *buf, size_t len, int64_t ts, int64_t t0)
{
    snprintf(buf, len, "+%.3f ms", (double)(ts - t0) / 1e6);
}

/* The owner tree at --at of a compact database: the blocks live then (decompose_at.c) in a
 * temporary table named blocks that build_tree reads instead of the database's. */
static int tree_at(sqlite3 *db, const struct ms_analyze_opts *o, int has_owner, struct node *root,
                   int64_t at, char *err, size_t errlen)
{
    int64_t eid = 0;
    int rc = ms__blocks_at(db, has_owner, at, &eid, err, errlen);
    if (rc < 0)
        return rc;
    rc = build_tree(db, o, has_owner, root, 0, eid, at);
    sqlite3_exec(db, "DROP TABLE IF EXISTS temp.blocks", NULL, NULL, NULL);
    return rc;
}

/* The result: the tree at the moment, the owners' series and their ranking by own peak. */
struct dresult {
    struct node root;
    struct series s;
    int *rank; /* owner ids with a peak, largest first */
    int nrank, shown;
    char moment[160], when[40];
    int64_t ts; /* the moment's time (JSON, without --step) */
};

static void dresult_release(struct dresult *r)
{
    free(r->rank);
    node_release(&r->root);
    series_release(&r->s);
}

/* Fills r; writes nothing. 0, or a negative code with x->err set. */
static int compute(struct ms_actx *x, struct dresult *r)
{
    sqlite3 *db = x->db;
    const struct ms_analyze_opts *o = x->o;
    char *err = x->err;
    size_t errlen = x->errlen;
    if (o->at_ns && o->at_step)
        return ms_errf(err, errlen, MS_EINVAL,
                       "decompose: give either --at NS or --step N, not both");
    if (o->at_ns < 0 || o->at_step < 0)
        return ms_errf(err, errlen, MS_EINVAL, "decompose: --at and --step must be positive");
    int has_owner = ms__has_column(db, "blocks", "owner_id");
    int64_t t0 = ms__run_start_ns(db);
    long long t1 = 0;
    scalar(db,
           ms_store_is_compact(db) ? "SELECT COALESCE((SELECT CAST(value AS INTEGER) FROM meta "
                                     "WHERE key = 'last_event_ns'), 0)"
                                   : "SELECT COALESCE(MAX(ts_ns), 0) FROM events",
           &t1);
    if (t1 < t0)
        t1 = t0;
    struct series *s = &r->s;
    struct node *root = &r->root;
    int rc = 0;
    if (o->at_step) {
        long long maxstep = 0;
        if (!ms__has_column(db, "steps", "step") ||
            scalar(db, "SELECT COALESCE(MAX(step), 0) FROM steps", &maxstep) < 0 || maxstep == 0)
            return ms_errf(err, errlen, MS_EINVAL,
                           "decompose: the program never called memscope_step(): this "
                           "run has no steps");
        if (o->at_step > maxstep)
            return ms_errf(err, errlen, MS_EINVAL,
                           "decompose: step %d does not exist: the run has steps 1 to "
                           "%lld",
                           o->at_step, maxstep);
    }
    if (o->at_ns && (o->at_ns < t0 || o->at_ns > t1))
        return ms_errf(err, errlen, MS_EINVAL,
                       "decompose: time %lld is outside the run (%lld to %lld ns)",
                       (long long)o->at_ns, (long long)t0, (long long)t1);
    if (!(root->name = strdup("total")))
        return ms__actx_oom(x);
    if ((rc = scan(db, o, has_owner, s, t0, t1)) < 0) {
        if (s->err[0]) /* the replay's reason */
            return ms_errf(err, errlen, rc, "decompose: %s", s->err);
        goto fail;
    }
    if (o->at_step) {
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(db,
                               "SELECT s.process_id, COALESCE(s.end_event_id, "
                               "9223372036854775807), s.end_ns " /* the last: every event */
                               "FROM steps s WHERE s.step = ? ORDER BY s.process_id",
                               -1, &st, NULL) != SQLITE_OK) {
            rc = MS_EDB;
            goto fail;
        }
        sqlite3_bind_int(st, 1, o->at_step);
        int64_t last = t0;
        int sr = SQLITE_DONE;
        while (!rc && (sr = sqlite3_step(st)) == SQLITE_ROW) {
            last = sqlite3_column_int64(st, 2);
            rc = build_tree(db, o, has_owner, root, sqlite3_column_int(st, 0),
                            sqlite3_column_int64(st, 1), last);
        }
        if (!rc && sr != SQLITE_DONE)
            rc = MS_EDB;
        sqlite3_finalize(st);
        rel_ms(r->when, sizeof r->when, last, t0);
        snprintf(r->moment, sizeof r->moment, "at the end of step %d", o->at_step);
    } else {
        /* A run with no memory has no peak: report the empty tree at its start. */
        int64_t ts = o->at_ns ? o->at_ns : s->peak_id ? s->peak_ts : t0, eid = s->peak_id;
        if (o->at_ns && ms_store_is_compact(db)) {
            if ((rc = tree_at(db, o, has_owner, root, ts, s->err, sizeof s->err)) < 0) {
                if (s->err[0])
                    return ms_errf(err, errlen, rc, "decompose: %s", s->err);
                goto fail;
            }
        } else {
            if (o->at_ns && (rc = event_at(db, ts, &eid)) < 0)
                goto fail;
            if (!rc && (o->at_ns || s->peak_id))
                rc = build_tree(db, o, has_owner, root, 0, eid, ts);
        }
        rel_ms(r->when, sizeof r->when, ts, t0);
        snprintf(r->moment, sizeof r->moment,
                 o->at_ns ? "at the given time"
                          : "at the peak of live "
                            "bytes");
    }
    if (rc)
        goto fail;
    tree_sort(root);
    r->ts = o->at_ns ? o->at_ns : s->peak_id ? s->peak_ts : t0;

    /* Owners ranked by their own peak. */
    if (!(r->rank = malloc((size_t)s->nowners * sizeof *r->rank)))
        return ms__actx_oom(x);
    int *rank = r->rank, nrank = 0;
    for (int i = 0; i < s->nowners; i++)
        if (s->peak[i] > 0)
            rank[nrank++] = i;
    for (int i = 1; i < nrank; i++) { /* few owners: insertion sort, by peak then label */
        int v = rank[i], k = i;
        while (k > 0) {
            int u = rank[k - 1];
            const char *lu = u ? s->labels[u] : "(no owner)", *lv = v ? s->labels[v] : "(no owner)";
            if (s->peak[u] > s->peak[v] ||
                (s->peak[u] == s->peak[v] && strcmp(lu ? lu : "", lv ? lv : "") <= 0))
                break;
            rank[k] = u;
            k--;
        }
        rank[k] = v;
    }
    r->nrank = nrank;
    r->shown = o->top > 0 && o->top < nrank ? o->top : nrank;
    return 0;
fail:
    return ms_errf(err, errlen, rc, "decompose: %s",
                   rc == MS_EDB ? sqlite3_errmsg(db) : ms_strerror(rc));
}

static void render_json(struct ms_actx *x, const struct dresult *r)
{
    const struct ms_analyze_opts *o = x->o;
    const struct series *s = &r->s;
    struct ms_json j;
    ms_json_init(&j, x->out);
    ms_json_begin_object(&j, NULL);
    ms_json_str(&j, "analysis", "decompose");
    ms_json_str(&j, "moment", o->at_step ? "step" : o->at_ns ? "time" : "peak");
    if (o->at_step)
        ms_json_int(&j, "step", o->at_step);
    else
        ms_json_int(&j, "ts_ns", r->ts);
    ms_json_begin_array(&j, "tree");
    tree_json(&j, &r->root);
    ms_json_end_array(&j);
    ms_json_begin_array(&j, "owners");
    for (int i = 0; i < r->shown; i++) {
        int w = r->rank[i];
        ms_json_begin_object(&j, NULL);
        ms_json_str(&j, "owner", w ? s->labels[w] : NULL);
        ms_json_int(&j, "peak_bytes", s->peak[w]);
        ms_json_begin_array(&j, "live");
        for (size_t p = 0; p < s->npoints; p++)
            ms_json_int(&j, NULL, s->points[p * (size_t)s->nowners + (size_t)w]);
        ms_json_end_array(&j);
        ms_json_end_object(&j);
    }
    ms_json_end_array(&j);
    ms_json_begin_array(&j, "points");
    for (size_t p = 0; p < s->npoints; p++) {
        ms_json_begin_object(&j, NULL);
        ms_json_str(&j, "label", s->plabel[p]);
        ms_json_int(&j, "ts_ns", s->pts[p]);
        ms_json_end_object(&j);
    }
    ms_json_end_array(&j);
    ms_json_end_object(&j);
    ms_json_finish(&j);
}

static void render_text(struct ms_actx *x, const struct dresult *r)
{
    const struct series *s = &r->s;
    const struct node *root = &r->root;
    FILE *out = x->out;
    fprintf(out, "Owner tree %s (%s): %lld B in %lld blocks.\n", r->moment, r->when, root->bytes,
            root->count);
    fprintf(out, "  %-44s %14s %8s\n", "layer / owner level", "bytes", "blocks");
    for (size_t i = 0; i < root->nkids; i++)
        tree_text(out, &root->kids[i], 0);
    fprintf(out, "\nLive bytes per owner (%s):\n",
            s->by_steps ? "at each step end and at the end" : "at ten evenly spaced times");
    if (!r->nrank) {
        fprintf(out, "  (no memory)\n");
        return;
    }
    fprintf(out, "  %-28s %12s", "owner", "peak");
    for (size_t p = 0; p < s->npoints && p < 12; p++)
        fprintf(out, " %12s", s->plabel[p]);
    fprintf(out, "%s\n", s->npoints > 12 ? " ..." : "");
    for (int i = 0; i < r->shown; i++) {
        int w = r->rank[i];
        fprintf(out, "  %-28s %12lld", w ? ms_term_text(s->labels[w]) : "(no owner)", s->peak[w]);
        for (size_t p = 0; p < s->npoints && p < 12; p++)
            fprintf(out, " %12lld", s->points[p * (size_t)s->nowners + (size_t)w]);
        fprintf(out, "\n");
    }
    if (r->shown < r->nrank)
        fprintf(out, "  ... %d more\n", r->nrank - r->shown);
}

/* Computed whole first, then written: a failure writes nothing (analyze.h's contract). */
int ms_analyze_decompose(struct ms_actx *x)
{
    struct dresult r;
    memset(&r, 0, sizeof r);
    int rc = ms__actx_computed(x, compute(x, &r));
    if (rc == 0)
        (x->o->json ? render_json : render_text)(x, &r);
    dresult_release(&r);
    return rc;
}

/* api_flame.c: the viewer's flame graphs (api_internal.h): of the stacks of the blocks live at
 * a time, allocated in a window or never freed (/api/flame), and of the Python call trace in a
 * window (/api/pytrace). Sent as a flat pre-order node list of at most MAX_FLAME_NODES. */
#include "api_internal.h"

#include "common/grow.h"
#include "common/ms_error.h"

#include <stdlib.h>
#include <string.h>

#define FLAME_STACKS 4000
#define MAX_FLAME_NODES 10000 /* nodes a flame graph sends at most (the smallest left out) */

/* A flame graph node: children as a linked list; names point into the stack text cache. */
struct fnode {
    const char *name;
    size_t len;
    int64_t value;
    uint32_t child, next; /* 0: none (node 0 is the root) */
    uint32_t parent;
};

struct flame {
    struct fnode *n;
    size_t count, cap;
    struct ms_u64map kids; /* (parent, name's hash) -> that child (uint32): one lookup per
                              frame, even under a node of thousands of children (a large
                              snapshot's outermost Python frames) */
};

static uint64_t name_hash(const char *name, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)name[i]) * 0x100000001b3ull;
    return h;
}

static long fchild(struct flame *f, uint32_t parent, const struct ms_vframe *fr)
{
    uint64_t key = fr->hash ^ (((uint64_t)parent + 1) * 0x9e3779b97f4a7c15ull);
    int isnew;
    uint32_t *slot = ms_u64map_put(&f->kids, key, &isnew);
    if (!slot)
        return -1;
    if (!isnew) {
        uint32_t c = *slot;
        if (f->n[c].parent == parent && f->n[c].len == fr->len &&
            !memcmp(f->n[c].name, fr->s, fr->len))
            return c;
        for (c = f->n[parent].child; c; c = f->n[c].next) /* a collision: the slow way */
            if (f->n[c].len == fr->len && !memcmp(f->n[c].name, fr->s, fr->len))
                return c;
        slot = NULL; /* the key stays the other node's */
    }
    if (f->count >= UINT32_MAX ||
        ms_grow((void **)&f->n, &f->cap, f->count, sizeof *f->n, 1024, 1u << 22) < 0)
        return -1;
    f->n[f->count] = (struct fnode){fr->s, fr->len, 0, 0, f->n[parent].child, parent};
    f->n[parent].child = (uint32_t)f->count;
    if (slot)
        *slot = (uint32_t)f->count;
    return (long)f->count++;
}

/* A stack text's frames, outermost first, into out (room for 512): the Python frames (when
 * the stack has them) but memscope's own (its import hook under `import torch`: it would read
 * as memscope allocating what torch's import does), then the native frames inside the
 * innermost interpreter frame; without Python frames, every native frame. Returns how many. */
static uint32_t split_frames(const char *text, struct ms_vframe *out)
{
    const char *p = text;
    const char *sep = strchr(p, '\x1f');
    const char *cend = sep ? sep : p + strlen(p);
    const char *py = sep ? sep + 2 : cend;
    /* Python lines, innermost first in the text: collect then reverse */
    const char *pl[256];
    size_t pll[256], npy = 0;
    for (const char *q = py; *q && npy < 256;) {
        const char *e = strchr(q, '\n');
        size_t l = e ? (size_t)(e - q) : strlen(q);
        if (l && !ms_py_frame_own(q, l))
            pl[npy] = q, pll[npy++] = l;
        q = e ? e + 1 : q + l;
    }
    const char *cl[256];
    size_t cll[256], nc = 0;
    for (const char *q = p; q < cend && nc < 256;) {
        const char *e = memchr(q, '\n', (size_t)(cend - q));
        size_t l = e ? (size_t)(e - q) : (size_t)(cend - q);
        if (l)
            cl[nc] = q, cll[nc++] = l;
        q = e ? e + 1 : cend;
    }
    uint32_t nl = 0;
    for (size_t i = npy; i-- > 0;)
        out[nl].s = pl[i], out[nl++].len = (uint32_t)pll[i];
    size_t cut = nc; /* native frames [0, cut) are inside the interpreter's innermost frame */
    if (npy)
        for (size_t i = 0; i < nc; i++)
            if (ms_py_interpreter_frame(cl[i], cll[i])) {
                cut = i;
                break;
            }
    for (size_t i = cut; i-- > 0;)
        out[nl].s = cl[i], out[nl++].len = (uint32_t)cll[i];
    if (!nl)
        out[nl].s = "(no stack)", out[nl++].len = 10;
    for (uint32_t i = 0; i < nl; i++)
        out[i].hash = name_hash(out[i].s, out[i].len);
    return nl;
}

/* The frames of stack id, split once and cached (the text they point into is cached too);
 * NULL when out of memory. */
static const struct ms_vframes *stack_frames(struct ms_view *v, uint32_t id)
{
    uint32_t i;
    if (ms_u64map_get32(&v->frames_idx, id, &i))
        return &v->frames[i];
    struct ms_vframe tmp[512];
    uint32_t n = split_frames(ms__vstack_text(v, id), tmp);
    struct ms_vframe *f = malloc(n * sizeof *f);
    if (!f ||
        ms_grow((void **)&v->frames, &v->capframes, v->nframes, sizeof *v->frames, 256, 1u << 24) <
            0 ||
        ms_u64map_set32(&v->frames_idx, id, (uint32_t)v->nframes) < 0) {
        free(f);
        return NULL;
    }
    memcpy(f, tmp, n * sizeof *f);
    v->frames[v->nframes] = (struct ms_vframes){f, n};
    return &v->frames[v->nframes++];
}

/* Adds one stack's frames, outermost first, with bytes. */
static int fadd(struct flame *f, const struct ms_vframes *sf, int64_t bytes)
{
    f->n[0].value += bytes;
    uint32_t at = 0;
    for (uint32_t i = 0; i < sf->n; i++) {
        long c = fchild(f, at, &sf->f[i]);
        if (c < 0)
            return MS_ENOMEM;
        f->n[c].value += bytes;
        at = (uint32_t)c;
    }
    return 0;
}

/* The tree as a flat array in pre-order: {"n": name, "v": bytes, "p": parent index} (-1 for the
 * root), nodes under min bytes left out with their subtrees. Flat, so that a deep stack needs
 * no deep nesting (the JSON writer nests 63 levels at most). */
static int int64_desc(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x < y) - (x > y);
}

static void fjson(struct ms_json *j, const struct flame *f, int64_t min)
{
    char buf[1024];
    if (f->count > MAX_FLAME_NODES) {
        /* deep, distinct stacks (a large snapshot's) can make hundreds of thousands of nodes
         * above min: raise it to the MAX_FLAME_NODES-th largest value (a node is never larger
         * than its parent, so what is left is still a tree) */
        int64_t *vals = malloc(f->count * sizeof *vals);
        if (vals) {
            for (size_t i = 0; i < f->count; i++)
                vals[i] = f->n[i].value;
            qsort(vals, f->count, sizeof *vals, int64_desc);
            int64_t cut = vals[MAX_FLAME_NODES - 1] + 1;
            min = cut > min ? cut : min;
            free(vals);
        }
    }
    uint32_t *todo = malloc(f->count * sizeof *todo), *index = malloc(f->count * sizeof *index);
    int32_t *parent = malloc(f->count * sizeof *parent);
    if (!todo || !index || !parent) {
        free(todo), free(index), free(parent);
        return; /* an empty array: the page says there is nothing to draw */
    }
    size_t n = 0, out = 0;
    todo[n++] = 0;
    parent[0] = -1;
    while (n) {
        uint32_t i = todo[--n];
        index[i] = (uint32_t)out++;
        size_t l = f->n[i].len < sizeof buf - 1 ? f->n[i].len : sizeof buf - 1;
        memcpy(buf, f->n[i].name, l);
        buf[l] = 0;
        ms_json_begin_object(j, NULL);
        ms_json_str(j, "n", buf);
        ms_json_int(j, "v", f->n[i].value);
        ms_json_int(j, "p", parent[i] < 0 ? -1 : (long long)index[parent[i]]);
        ms_json_end_object(j);
        for (uint32_t c = f->n[i].child; c; c = f->n[c].next)
            if (f->n[c].value >= min) {
                parent[c] = (int32_t)i;
                todo[n++] = c;
            }
    }
    free(todo), free(index), free(parent);
}

/* mode live (at t), alloc (allocated in [t0, t1)), leaked (never freed) or peak (live at the
 * peak of the track's total). */
int ms__vapi_flame(struct ms_view *v, struct req *r, struct ms_json *j)
{
    const struct ms_view_model *m = &v->m;
    const char *mode_s = r->param(r->ctx, "mode");
    int64_t track = ms__vnum(r, "track", 0, 0, (int64_t)m->ntracks - 1);
    int64_t at = ms__vtnum(r, "t", m->total_peak_ns);
    int64_t a = ms__vtnum(r, "t0", m->t0);
    int64_t b = ms__vtnum(r, "t1", m->t1 + 1);
    int64_t detail =
        ms__vnum(r, "detail", 5000, 10, 100000); /* nodes under total/detail left out */
    int mode = !mode_s || !strcmp(mode_s, "live") ? 0
               : !strcmp(mode_s, "peak")          ? 3
               : !strcmp(mode_s, "alloc")         ? 1
               : !strcmp(mode_s, "leaked")        ? 2
                                                  : -1;
    if (mode < 0 && !r->bad[0])
        snprintf(r->bad, sizeof r->bad, "parameter 'mode': expected live, peak, alloc or leaked");
    if (r->bad[0])
        return MS_EINVAL;
    if (mode == 3) {
        mode = 0;
        at = m->tracks[track].peak_ns;
    }
    size_t n;
    int64_t total;
    struct site_sum *s = ms__vsum_by_stack(v, mode, mode == 0 ? at : a, b, track, &n, &total);
    /* the last graph's memory, emptied */
    struct flame f = {v->flame_nodes, 0, v->flame_cap, v->flame_kids};
    ms_u64map_clear(&f.kids);
    int rc = s ? 0 : MS_ENOMEM;
    if (rc == 0 && ms_grow((void **)&f.n, &f.cap, 0, sizeof *f.n, 1024, 1u << 22) < 0)
        rc = MS_ENOMEM;
    if (rc == 0) {
        f.n[0] = (struct fnode){"all", 3, 0, 0, 0, 0};
        f.count = 1;
    }
    int64_t other = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (i >= FLAME_STACKS) {
            other += s[i].bytes;
            continue;
        }
        const struct ms_vframes *sf = stack_frames(v, s[i].stack);
        rc = sf ? fadd(&f, sf, s[i].bytes) : MS_ENOMEM;
    }
    if (rc == 0 && other) {
        struct ms_vframe fr = {"(other stacks)", 14, name_hash("(other stacks)", 14)};
        const struct ms_vframes sf = {&fr, 1};
        rc = fadd(&f, &sf, other);
    }
    if (rc == 0) {
        ms_json_begin_object(j, NULL);
        if (mode == 0)
            ms_json_int(j, "t", at - r->origin);
        ms_json_int(j, "total", total);
        ms_json_int(j, "stacks", (long long)n);
        ms_json_begin_array(j, "nodes");
        fjson(j, &f, total / detail > 0 ? total / detail : 1);
        ms_json_end_array(j);
        ms_json_end_object(j);
    }
    v->flame_nodes = f.n; /* kept for the next graph */
    v->flame_cap = f.cap;
    v->flame_kids = f.kids;
    free(s);
    return rc;
}

/* The Python call trace (the python_trace table, msMemScope's tracer) of [t0, t1) as a flame
 * graph of time: each call a node under its caller (by nesting depth, per thread), its value
 * the ns of the call inside the window; the root holds the outermost calls' total. */
int ms__vapi_pytrace(struct ms_view *v, struct req *r, struct ms_json *j)
{
    const struct ms_view_model *m = &v->m;
    int64_t a = ms__vtnum(r, "t0", m->t0);
    int64_t b = ms__vtnum(r, "t1", m->t1 + 1);
    int64_t detail = ms__vnum(r, "detail", 5000, 10, 100000);
    /* one thread (pid and tid as the summary's python_threads name them), or all */
    int64_t pid = ms__vnum(r, "pid", INT64_MIN, INT64_MIN + 1, INT64_MAX);
    int64_t tid = ms__vnum(r, "tid", INT64_MIN, INT64_MIN + 1, INT64_MAX);
    if ((pid == INT64_MIN) != (tid == INT64_MIN) && !r->bad[0])
        snprintf(r->bad, sizeof r->bad, "parameters 'pid' and 'tid': both or neither");
    if (r->bad[0])
        return MS_EINVAL;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(m->db,
                           "SELECT \"FuncInfo\", \"StartTime(ns)\", \"EndTime(ns)\", depth, "
                           "\"Process Id\", \"Thread Id\" FROM "
                           "python_trace WHERE \"StartTime(ns)\" < ?2 AND (\"EndTime(ns)\" > ?1 "
                           "OR \"EndTime(ns)\" IS NULL) AND (?3 IS NULL OR (\"Process Id\" = ?3 "
                           "AND \"Thread Id\" = ?4)) ORDER BY \"Process Id\", \"Thread Id\", "
                           "\"StartTime(ns)\", depth",
                           -1, &st, NULL) != SQLITE_OK) {
        snprintf(r->bad, sizeof r->bad, "this database has no Python call trace");
        return MS_EINVAL;
    }
    sqlite3_bind_int64(st, 1, a);
    sqlite3_bind_int64(st, 2, b);
    if (pid != INT64_MIN) {
        sqlite3_bind_int64(st, 3, pid);
        sqlite3_bind_int64(st, 4, tid);
    }
    struct flame f = {0};
    int rc = 0;
    if (ms_grow((void **)&f.n, &f.cap, 0, sizeof *f.n, 1024, 1u << 22) < 0)
        rc = MS_ENOMEM;
    else
        f.n[f.count++] = (struct fnode){"all", 3, 0, 0, 0, 0};
    uint32_t path[256] = {0}; /* the node of each open depth of the current thread */
    int64_t calls = 0, proc = INT64_MIN, thread = INT64_MIN;
    while (rc == 0 && sqlite3_step(st) == SQLITE_ROW) {
        if (sqlite3_column_int64(st, 4) != proc || sqlite3_column_int64(st, 5) != thread) {
            proc = sqlite3_column_int64(st, 4); /* another thread: its own nesting */
            thread = sqlite3_column_int64(st, 5);
            memset(path, 0, sizeof path);
        }
        const char *name = (const char *)sqlite3_column_text(st, 0);
        name = name ? name : ""; /* a NULL FuncInfo: memcmp takes no NULL, even for 0 bytes */
        int64_t s0 = sqlite3_column_int64(st, 1);
        int64_t e0 =
            sqlite3_column_type(st, 2) == SQLITE_NULL ? m->t1 : sqlite3_column_int64(st, 2);
        int64_t depth = sqlite3_column_int64(st, 3);
        if (depth < 0 || depth >= 256)
            continue; /* deeper than drawn */
        uint32_t parent = depth == 0 ? 0 : path[depth - 1];
        if (depth > 0 && !parent)
            continue; /* its caller was not seen (a row of a damaged trace) */
        size_t len = strnlen(name, 1024);
        long c = -1;
        for (uint32_t k = f.n[parent].child; k; k = f.n[k].next)
            if (f.n[k].len == len && !memcmp(f.n[k].name, name, len)) {
                c = k;
                break;
            }
        if (c < 0) { /* a new node: it owns a copy of its name */
            char *copy = malloc(len + 1);
            if (!copy || f.count >= UINT32_MAX ||
                ms_grow((void **)&f.n, &f.cap, f.count, sizeof *f.n, 1024, 1u << 22) < 0) {
                free(copy);
                rc = MS_ENOMEM;
                break;
            }
            memcpy(copy, name, len);
            copy[len] = 0;
            f.n[f.count] = (struct fnode){copy, len, 0, 0, f.n[parent].child, parent};
            f.n[parent].child = (uint32_t)f.count;
            c = (long)f.count++;
        }
        int64_t in = (e0 < b ? e0 : b) - (s0 > a ? s0 : a);
        f.n[c].value += in > 0 ? in : 0;
        if (depth == 0)
            f.n[0].value += in > 0 ? in : 0;
        path[depth] = (uint32_t)c;
        if (depth + 1 < 256)
            path[depth + 1] = 0; /* a deeper call needs this one as its caller */
        calls++;
    }
    sqlite3_finalize(st);
    if (rc == 0) {
        ms_json_begin_object(j, NULL);
        ms_json_int(j, "total", f.count ? f.n[0].value : 0);
        ms_json_int(j, "calls", calls);
        ms_json_begin_array(j, "nodes");
        int64_t total = f.count ? f.n[0].value : 0;
        fjson(j, &f, total / detail > 0 ? total / detail : 1);
        ms_json_end_array(j);
        ms_json_end_object(j);
    }
    for (size_t i = 1; i < f.count; i++)
        free((char *)f.n[i].name);
    free(f.n);
    return rc;
}

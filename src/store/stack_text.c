/* stack_text.c: a stack's frames and text from the database's stack tree (stack_text.h). Called
 * by the viewer, the analyses and the full database's conversion; see stack_text.h for the
 * workload. */
#include "stack_text.h"

#include "common/grow.h"
#include "common/ms_error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Nodes read one query each before the reader loads them all (one scan). */
#define NODE_READS_BEFORE_LOAD 4096
#define MAX_TEXT (1u << 24) /* bytes of one stack's text */

static int prepare(struct ms_stack_text *t, sqlite3_stmt **st, const char *sql)
{
    return sqlite3_prepare_v2(t->db, sql, -1, st, NULL) == SQLITE_OK ? 0 : MS_EDB;
}

int ms_stack_frames_prepare(sqlite3 *db, const char *tail, sqlite3_stmt **st)
{
    static const char *const heads[] = {
        "WITH RECURSIVE sp(position, node) AS ("
        "  SELECT 0, node_id FROM stacks WHERE id = ?1 AND node_id IS NOT NULL"
        "  UNION ALL SELECT sp.position + 1, n.parent FROM sp JOIN stack_nodes n ON n.id = sp.node"
        "    WHERE n.parent IS NOT NULL AND sp.position < 4095),"
        " sf(position, frame_id) AS (SELECT sp.position, n.frame_id FROM sp"
        "  JOIN stack_nodes n ON n.id = sp.node) ",
        "WITH sf(position, frame_id) AS (SELECT position, frame_id FROM stack_frames"
        "  WHERE stack_id = ?1) "};
    *st = NULL;
    for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++) {
        char *sql = sqlite3_mprintf("%s%s", heads[i], tail);
        if (!sql)
            return MS_ENOMEM;
        int ok = sqlite3_prepare_v2(db, sql, -1, st, NULL) == SQLITE_OK;
        sqlite3_free(sql);
        if (ok)
            return 0;
        sqlite3_finalize(*st);
        *st = NULL;
    }
    return MS_EDB;
}

int ms_stack_text_init(struct ms_stack_text *t, sqlite3 *db)
{
    memset(t, 0, sizeof *t);
    t->db = db;
    ms_u64map_init(&t->nodes, sizeof(uint32_t), MS_U64MAP_MAX);
    ms_u64map_init(&t->frames, sizeof(uint32_t), MS_U64MAP_MAX);
    sqlite3_stmt *st;
    if (prepare(t, &st, "SELECT 1 FROM pragma_table_info('stacks') WHERE name = 'node_id'") < 0)
        return MS_EDB;
    t->tree = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    int rc =
        prepare(t, &t->stack,
                t->tree ? "SELECT c_text, node_id, py_text, py_node_id FROM stacks WHERE id = ?"
                        : "SELECT c_text, NULL, py_text, NULL FROM stacks WHERE id = ?");
    /* databases made before frames had linkage_id are read without it */
    if (rc == 0 &&
        prepare(t, &t->frame,
                "SELECT fn.text, fl.text, f.line, m.path, f.pc, m.bias, lk.text, f.inline_depth "
                "FROM frames f "
                "LEFT JOIN strings fn ON fn.id = f.function_id "
                "LEFT JOIN strings lk ON lk.id = f.linkage_id "
                "LEFT JOIN strings fl ON fl.id = f.file_id "
                "LEFT JOIN modules m ON m.id = f.module_id WHERE f.id = ?") < 0)
        rc = prepare(t, &t->frame,
                     "SELECT fn.text, fl.text, f.line, m.path, f.pc, m.bias, NULL, f.inline_depth "
                     "FROM frames f "
                     "LEFT JOIN strings fn ON fn.id = f.function_id "
                     "LEFT JOIN strings fl ON fl.id = f.file_id "
                     "LEFT JOIN modules m ON m.id = f.module_id WHERE f.id = ?");
    if (rc == 0 && t->tree)
        rc = prepare(t, &t->node, "SELECT parent, frame_id FROM stack_nodes WHERE id = ?");
    else if (rc == 0)
        rc = prepare(t, &t->old_frames,
                     "SELECT frame_id FROM stack_frames WHERE stack_id = ? ORDER BY position");
    if (rc < 0)
        ms_stack_text_release(t);
    return rc;
}

void ms_stack_text_release(struct ms_stack_text *t)
{
    if (!t)
        return;
    sqlite3_finalize(t->stack);
    sqlite3_finalize(t->node);
    sqlite3_finalize(t->frame);
    sqlite3_finalize(t->old_frames);
    ms_u64map_release(&t->nodes);
    ms_u64map_release(&t->frames);
    free(t->node_v);
    for (size_t i = 0; i < t->nfr; i++) {
        free((char *)t->fr[i].function);
        free((char *)t->fr[i].linkage);
        free((char *)t->fr[i].file);
        free((char *)t->fr[i].module);
        free((char *)t->fr[i].text);
    }
    free(t->fr);
    free(t->walk);
    free(t->out);
    free(t->buf);
    memset(t, 0, sizeof *t);
}

static char *dup_col(sqlite3_stmt *st, int col, int *oom)
{
    const char *s = (const char *)sqlite3_column_text(st, col);
    if (!s)
        return NULL;
    char *d = strdup(s);
    if (!d)
        *oom = 1;
    return d;
}

/* The one rule that formats a frame's line (docs/database.md, "Symbolized frames"): a native
 * frame's, or a Python frame's ("file(line): function", msMemScope's Call Stack(Python)). */
static char *format_line(const struct ms_stack_frame *f, int python)
{
    const char *fn = f->function ? f->function : "??";
    char *s = NULL;
    int n;
    if (python)
        n = asprintf(&s, "%s(%d): %s", f->file ? f->file : "??", f->line, fn);
    else if (f->file)
        n = asprintf(&s, "%s (%s:%d)", fn, f->file, f->line);
    else if (f->module) {
        const char *base = strrchr(f->module, '/');
        n = asprintf(&s, "%s (%s+0x%llx)", fn, base ? base + 1 : f->module,
                     (unsigned long long)f->offset);
    } else
        n = asprintf(&s, "%s (0x%llx)", fn, (unsigned long long)f->pc);
    return n < 0 ? NULL : s;
}

/* The index in t->fr of frame id (a frame of a Python part when python is 1), read and
 * formatted on first use. */
static int frame_get(struct ms_stack_text *t, int64_t id, int python, uint32_t *idx)
{
    uint64_t key = (uint64_t)id << 1 | (uint64_t)python;
    if (ms_u64map_get32(&t->frames, key, idx))
        return 0;
    if (ms_grow((void **)&t->fr, &t->afr, t->nfr, sizeof *t->fr, 256, UINT32_MAX) < 0)
        return MS_ENOMEM;
    struct ms_stack_frame f = {.id = id};
    int oom = 0, rc = 0;
    sqlite3_bind_int64(t->frame, 1, id);
    int s = sqlite3_step(t->frame);
    if (s == SQLITE_ROW) {
        f.function = dup_col(t->frame, 0, &oom);
        f.file = dup_col(t->frame, 1, &oom);
        f.line = sqlite3_column_int(t->frame, 2);
        f.module = dup_col(t->frame, 3, &oom);
        f.pc = (uint64_t)sqlite3_column_int64(t->frame, 4);
        f.offset = f.pc - (uint64_t)sqlite3_column_int64(t->frame, 5);
        f.linkage = dup_col(t->frame, 6, &oom);
        f.inline_depth = sqlite3_column_int(t->frame, 7);
    } else if (s != SQLITE_DONE) /* an id without a row reads as an unknown frame */
        rc = MS_EDB;
    sqlite3_reset(t->frame);
    if (rc == 0 && !oom && !(f.text = format_line(&f, python)))
        oom = 1;
    if (rc == 0 && !oom && ms_u64map_set32(&t->frames, key, (uint32_t)t->nfr) < 0)
        oom = 1;
    if (rc < 0 || oom) {
        free((char *)f.function), free((char *)f.file), free((char *)f.module);
        free((char *)f.linkage), free((char *)f.text);
        return rc < 0 ? rc : MS_ENOMEM;
    }
    *idx = (uint32_t)t->nfr;
    t->fr[t->nfr++] = f;
    return 0;
}

static int node_add(struct ms_stack_text *t, int64_t id, int64_t parent, int64_t frame)
{
    if (ms_grow((void **)&t->node_v, &t->anodes, t->nnodes, sizeof *t->node_v, 1024, UINT32_MAX) <
        0)
        return MS_ENOMEM;
    int isnew;
    uint32_t *slot = ms_u64map_put(&t->nodes, (uint64_t)id, &isnew);
    if (!slot)
        return MS_ENOMEM;
    if (!isnew)
        return 0;
    *slot = (uint32_t)t->nnodes;
    t->node_v[t->nnodes++] = (struct ms_stack_node){parent, frame};
    return 0;
}

/* Reads every node at once (a stack read after many others: the viewer, the full database). */
static int nodes_load(struct ms_stack_text *t)
{
    sqlite3_stmt *st;
    if (prepare(t, &st, "SELECT id, COALESCE(parent, 0), frame_id FROM stack_nodes") < 0)
        return MS_EDB;
    int rc = 0, s;
    while (rc == 0 && (s = sqlite3_step(st)) == SQLITE_ROW)
        rc = node_add(t, sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1),
                      sqlite3_column_int64(st, 2));
    if (rc == 0 && s != SQLITE_DONE)
        rc = MS_EDB;
    sqlite3_finalize(st);
    t->all_nodes = rc == 0;
    return rc;
}

/* Node id's parent (0: none) and frame id; *found 0 when the database has no such node. */
static int node_get(struct ms_stack_text *t, int64_t id, int64_t *parent, int64_t *frame,
                    int *found)
{
    uint32_t i;
    *found = 0;
    if (ms_u64map_get32(&t->nodes, (uint64_t)id, &i)) {
        *parent = t->node_v[i].parent, *frame = t->node_v[i].frame, *found = 1;
        return 0;
    }
    if (t->all_nodes)
        return 0;
    if (++t->node_reads > NODE_READS_BEFORE_LOAD) {
        int rc = nodes_load(t);
        return rc < 0 ? rc : node_get(t, id, parent, frame, found);
    }
    sqlite3_bind_int64(t->node, 1, id);
    int s = sqlite3_step(t->node), rc = 0;
    if (s == SQLITE_ROW) {
        *parent = sqlite3_column_int64(t->node, 0); /* NULL reads as 0 */
        *frame = sqlite3_column_int64(t->node, 1);
        *found = 1;
        rc = node_add(t, id, *parent, *frame);
    } else if (s != SQLITE_DONE)
        rc = MS_EDB;
    sqlite3_reset(t->node);
    return rc;
}

static int walk_add(struct ms_stack_text *t, int64_t frame_id, int python)
{
    uint32_t idx;
    int rc = frame_get(t, frame_id, python, &idx);
    if (rc == 0)
        rc = ms_grow((void **)&t->walk, &t->awalk, t->nwalk, sizeof *t->walk, 64,
                     MS_STACK_MAX_FRAMES);
    if (rc == 0)
        t->walk[t->nwalk++] = idx;
    return rc;
}

/* Reads the native part (python 0) or the Python part (1) of stack id: its stored text into
 * t->buf (*stored 1), or else its frames into t->walk. */
static int stack_read(struct ms_stack_text *t, int64_t id, int python, int want_text, int *stored)
{
    t->nwalk = 0;
    t->buflen = 0;
    *stored = 0;
    int64_t node = 0;
    sqlite3_bind_int64(t->stack, 1, id);
    int s = sqlite3_step(t->stack), rc = 0;
    if (s == SQLITE_ROW) {
        const char *c = (const char *)sqlite3_column_text(t->stack, python ? 2 : 0);
        if (c && want_text) {
            size_t n = strlen(c);
            if (ms_grow((void **)&t->buf, &t->bufcap, n, 1, 256, (size_t)MAX_TEXT + 1) < 0)
                rc = MS_ENOMEM;
            else {
                memcpy(t->buf, c, n + 1);
                t->buflen = n;
                *stored = 1;
            }
        }
        node = sqlite3_column_int64(t->stack, python ? 3 : 1);
    } else if (s != SQLITE_DONE)
        rc = MS_EDB;
    sqlite3_reset(t->stack);
    if (rc < 0 || *stored)
        return rc;
    if (!t->tree && !python) { /* format version 1: the stack_frames table */
        sqlite3_bind_int64(t->old_frames, 1, id);
        while (rc == 0 && t->nwalk < MS_STACK_MAX_FRAMES &&
               (s = sqlite3_step(t->old_frames)) == SQLITE_ROW)
            rc = walk_add(t, sqlite3_column_int64(t->old_frames, 0), 0);
        sqlite3_reset(t->old_frames);
        return rc;
    }
    while (rc == 0 && node > 0 && t->nwalk < MS_STACK_MAX_FRAMES) {
        int64_t parent, frame;
        int found;
        rc = node_get(t, node, &parent, &frame, &found);
        if (rc < 0 || !found)
            break;
        rc = walk_add(t, frame, python);
        node = parent;
    }
    return rc;
}

/* The frames of the native (python 0) or Python (1) part of stack id. */
static int frames_of(struct ms_stack_text *t, int64_t id, int python,
                     const struct ms_stack_frame **frames, size_t *n)
{
    static struct ms_stack_frame none;
    int stored;
    *frames = &none;
    *n = 0;
    int rc = stack_read(t, id, python, 0, &stored);
    if (rc < 0)
        return rc;
    if (ms_grow((void **)&t->out, &t->aout, t->nwalk, sizeof *t->out, 64, MS_STACK_MAX_FRAMES + 1) <
        0)
        return MS_ENOMEM;
    struct ms_stack_frame *out = t->out;
    for (size_t i = 0; i < t->nwalk; i++)
        out[i] = t->fr[t->walk[i]];
    *frames = out;
    *n = t->nwalk;
    return 0;
}

int ms_stack_text_frames(struct ms_stack_text *t, int64_t id, const struct ms_stack_frame **frames,
                         size_t *n)
{
    return frames_of(t, id, 0, frames, n);
}

int ms_stack_text_py_frames(struct ms_stack_text *t, int64_t id,
                            const struct ms_stack_frame **frames, size_t *n)
{
    return frames_of(t, id, 1, frames, n);
}

static const char *text_of(struct ms_stack_text *t, int64_t id, int python)
{
    int stored;
    if (stack_read(t, id, python, 1, &stored) < 0)
        return NULL;
    if (stored)
        return t->buf;
    size_t len = 0;
    for (size_t i = 0; i < t->nwalk; i++)
        len += strlen(t->fr[t->walk[i]].text) + 1;
    if (len > MAX_TEXT)
        return NULL;
    if (ms_grow((void **)&t->buf, &t->bufcap, len, 1, 256, (size_t)MAX_TEXT + 1) < 0)
        return NULL;
    size_t at = 0;
    for (size_t i = 0; i < t->nwalk; i++) {
        const char *s = t->fr[t->walk[i]].text;
        size_t l = strlen(s);
        if (i)
            t->buf[at++] = '\n';
        memcpy(t->buf + at, s, l);
        at += l;
    }
    t->buf[at] = 0;
    t->buflen = at;
    return t->buf;
}

const char *ms_stack_text_c(struct ms_stack_text *t, int64_t id)
{
    return text_of(t, id, 0);
}

const char *ms_stack_text_py(struct ms_stack_text *t, int64_t id)
{
    return text_of(t, id, 1);
}

/* Writes column (c_text, python 0; py_text, 1) of the stacks that have a path and no text. */
static int fill_part(struct ms_stack_text *t, int python)
{
    static const char *const sel_sql[] = {
        "SELECT id FROM stacks WHERE c_text IS NULL",
        "SELECT id FROM stacks WHERE py_text IS NULL AND py_node_id IS NOT NULL"};
    static const char *const upd_sql[] = {"UPDATE stacks SET c_text = ? WHERE id = ?",
                                          "UPDATE stacks SET py_text = ? WHERE id = ?"};
    int64_t *ids = NULL;
    size_t n = 0, cap = 0;
    sqlite3_stmt *sel = NULL, *upd = NULL;
    int rc = 0, s = SQLITE_DONE;
    if (prepare(t, &sel, sel_sql[python]) < 0 || prepare(t, &upd, upd_sql[python]) < 0)
        rc = MS_EDB;
    while (rc == 0 && (s = sqlite3_step(sel)) == SQLITE_ROW) {
        if (ms_grow((void **)&ids, &cap, n, sizeof *ids, 1024, (size_t)1 << 32) < 0)
            rc = MS_ENOMEM;
        else
            ids[n++] = sqlite3_column_int64(sel, 0);
    }
    if (rc == 0 && s != SQLITE_DONE)
        rc = MS_EDB;
    sqlite3_finalize(sel);
    for (size_t i = 0; i < n && rc == 0; i++) {
        const char *text = text_of(t, ids[i], python);
        if (!text) {
            rc = MS_ENOMEM;
            break;
        }
        sqlite3_bind_text(upd, 1, text, (int)t->buflen, SQLITE_STATIC);
        sqlite3_bind_int64(upd, 2, ids[i]);
        if (sqlite3_step(upd) != SQLITE_DONE)
            rc = MS_EDB;
        sqlite3_reset(upd);
    }
    sqlite3_finalize(upd);
    free(ids);
    return rc;
}

int ms_stack_text_fill(sqlite3 *db, char *err, size_t errlen)
{
    struct ms_stack_text t;
    if (ms_stack_text_init(&t, db) < 0) {
        return ms_errf(err, errlen, MS_EDB, "stacks: %s", sqlite3_errmsg(db));
    }
    int rc = t.tree ? nodes_load(&t) : 0, open = 0;
    if (rc == 0 &&
        !(open = sqlite3_exec(db, "SAVEPOINT stack_text", NULL, NULL, NULL) == SQLITE_OK))
        rc = MS_EDB;
    if (rc == 0)
        rc = fill_part(&t, 0);
    if (rc == 0 && t.tree)
        rc = fill_part(&t, 1);
    if (rc < 0)
        snprintf(err, errlen, "stacks' text: %s",
                 rc == MS_ENOMEM ? "out of memory" : sqlite3_errmsg(db));
    if (open &&
        sqlite3_exec(db,
                     rc == 0 ? "RELEASE stack_text" : "ROLLBACK TO stack_text; RELEASE stack_text",
                     NULL, NULL, NULL) != SQLITE_OK &&
        rc == 0) {
        snprintf(err, errlen, "stacks' text: %s", sqlite3_errmsg(db));
        rc = MS_EDB;
    }
    ms_stack_text_release(&t);
    return rc;
}

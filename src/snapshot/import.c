/* import.c: writes a loaded snapshot as a memscope database (`memscope snapshot FILE -o db`),
 * following docs/database.md and its "Snapshot import" section.
 *
 * Mapping: one process (pid 0, exe = the snapshot file), one thread per device (tid = device
 * index), layer 3 PTA (caching-allocator blocks) and layer 4 PTA_SEGMENT (cudaMalloc'ed
 * segments). alloc -> MALLOC, free_requested -> FREE_REQUESTED (kind 3, does not end the
 * block), free_completed -> FREE; segment_alloc/map -> MALLOC, segment_free/unmap -> FREE on
 * layer 4; snapshot/oom/annotate entries and external_annotations go to snapshot_marks.
 * Blocks and segments that are live at the end, or freed, without an alloc event in the trace
 * (allocated before recording) get a synthesized MALLOC at the trace start with func
 * "pre_trace". Times: time_us * 1000; a trace without time_us uses the event index as ns.
 *
 * Called by cmd_snapshot.c, which passes the store's DDL so that the common tables are created
 * by one piece of SQL. Workload: one SQLite transaction, prepared statements, O(events). */
#include "snapshot.h"

#include "common/db_ids.h"
#include "common/db_schema.h" /* the tables of a run's database, the same SQL */
#include "common/ms_error.h"
#include "common/files.h"
#include "common/grow.h"
#include "common/u64map.h"
#include "version.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One row of the events table before ids are known. */
struct iev {
    int64_t ts;
    uint64_t addr, size;
    int64_t device;
    uint32_t stack;
    uint8_t kind, layer;
    const char *func;
    uint64_t requested;  /* a block's requested size when size is the rounded one, else 0 */
    uint64_t trace_size; /* the trace's alloc size when it is not requested, else 0 */
    uint8_t pending;     /* active_pending_free at the end of the snapshot */
};

struct imp {
    const struct ms_snapshot *s;
    sqlite3 *db;
    char *err;
    size_t errlen;
    struct iev *ev;
    size_t nev, cap;
};

static int ierr(struct imp *m, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int ierr(struct imp *m, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->err, m->errlen, fmt, ap);
    va_end(ap);
    return code;
}

static int add_ev(struct imp *m, struct iev e)
{
    if (ms_grow((void **)&m->ev, &m->cap, m->nev, sizeof *m->ev, 4096, MS_GROW_MAX) < 0)
        return ierr(m, MS_ENOMEM, "out of memory");
    m->ev[m->nev++] = e;
    return 0;
}

static int64_t ev_ts(const struct ms_snap_trace *t, uint64_t i, int has_time, int64_t *last)
{
    if (!has_time)
        return (int64_t)i;
    const struct ms_snap_event *e = &t->events[i];
    if (e->time_us != MS_SNAP_NO_TIME)
        *last = e->time_us * 1000;
    return *last;
}

static int cmp_iev(const void *a, const void *b)
{
    const struct iev *x = a, *y = b;
    if (x->ts != y->ts)
        return x->ts < y->ts ? -1 : 1;
    return 0;
}

static int exec(struct imp *m, const char *sql)
{
    char *msg = NULL;
    if (sqlite3_exec(m->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        ierr(m, MS_EDB, "%s", msg ? msg : sqlite3_errmsg(m->db));
        sqlite3_free(msg);
        return MS_EDB;
    }
    return 0;
}

/* exec of a statement formatted as sqlite3_mprintf does (no SQL text of a fixed size). */
static int execf(struct imp *m, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *sql = sqlite3_vmprintf(fmt, ap);
    va_end(ap);
    if (!sql)
        return ierr(m, MS_ENOMEM, "out of memory");
    int rc = exec(m, sql);
    sqlite3_free(sql);
    return rc;
}

static int prep(struct imp *m, sqlite3_stmt **st, const char *sql)
{
    if (sqlite3_prepare_v2(m->db, sql, -1, st, NULL) != SQLITE_OK)
        return ierr(m, MS_EDB, "%s", sqlite3_errmsg(m->db));
    return 0;
}

static int step(struct imp *m, sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    if (rc != SQLITE_DONE)
        return ierr(m, MS_EDB, "%s", sqlite3_errmsg(m->db));
    return 0;
}

/* Builds the ordered event list: the trace events of every device by time, preceded by the
 * synthesized allocations of what was live before recording started. */
static int collect(struct imp *m, int64_t *t0, int64_t *t1)
{
    const struct ms_snapshot *s = m->s;
    int rc;
    for (uint64_t d = 0; d < s->ntraces; d++) {
        const struct ms_snap_trace *t = &s->traces[d];
        int has_time = 0;
        for (uint64_t i = 0; i < t->nevents && !has_time; i++)
            has_time = t->events[i].time_us != MS_SNAP_NO_TIME;
        int64_t last = 0;
        for (uint64_t i = 0; i < t->nevents && has_time; i++)
            if (t->events[i].time_us != MS_SNAP_NO_TIME) {
                last = t->events[i].time_us * 1000;
                break;
            }
        for (uint64_t i = 0; i < t->nevents; i++) {
            const struct ms_snap_event *e = &t->events[i];
            struct iev x = {
                ev_ts(t, i, has_time, &last),    e->addr, e->size, t->device, e->stack, 0, 0,
                ms_snap_action_names[e->action], 0,       0,       0};
            switch (e->action) {
            case MS_SA_ALLOC: x.kind = MS_KIND_MALLOC, x.layer = MS_LAYER_PTA; break;
            case MS_SA_FREE_REQUESTED:
                x.kind = MS_KIND_FREE_REQUESTED, x.layer = MS_LAYER_PTA;
                break;
            case MS_SA_FREE_COMPLETED: x.kind = MS_KIND_FREE, x.layer = MS_LAYER_PTA; break;
            case MS_SA_SEGMENT_ALLOC:
            case MS_SA_SEGMENT_MAP: x.kind = MS_KIND_MALLOC, x.layer = MS_LAYER_PTA_SEGMENT; break;
            case MS_SA_SEGMENT_FREE:
            case MS_SA_SEGMENT_UNMAP: x.kind = MS_KIND_FREE, x.layer = MS_LAYER_PTA_SEGMENT; break;
            default: continue; /* marks */
            }
            if ((rc = add_ev(m, x)))
                return rc;
        }
    }
    /* Stable merge sort by time: devices were appended one after the other, and equal times
     * keep trace order. */
    uint64_t n = m->nev;
    int ordered = 1;
    for (uint64_t i = 1; i < n && ordered; i++)
        ordered = m->ev[i - 1].ts <= m->ev[i].ts;
    if (!ordered) {
        struct iev *sorted = malloc((size_t)n * sizeof *sorted);
        if (!sorted)
            return ierr(m, MS_ENOMEM, "out of memory");
        /* Merge sort keeps equal times in trace order. */
        for (uint64_t w = 1; w < n; w *= 2) {
            for (uint64_t lo = 0; lo < n; lo += 2 * w) {
                uint64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
                uint64_t a = lo, b = mid, k = lo;
                while (a < mid && b < hi)
                    sorted[k++] = cmp_iev(&m->ev[b], &m->ev[a]) < 0 ? m->ev[b++] : m->ev[a++];
                while (a < mid)
                    sorted[k++] = m->ev[a++];
                while (b < hi)
                    sorted[k++] = m->ev[b++];
            }
            struct iev *tmp = m->ev;
            m->ev = sorted;
            sorted = tmp;
        }
        free(sorted);
        m->cap = n; /* m->ev may now be the buffer of exactly n */
    }
    *t0 = n ? m->ev[0].ts : 0;
    *t1 = n ? m->ev[n - 1].ts : 0;

    /* What needs a synthesized allocation: frees without a live block, and blocks/segments
     * live at the end without one. */
    struct ms_u64map live[2]; /* addr -> the live block's alloc event + 1 */
    ms_u64map_init(&live[0], sizeof(uint64_t), MS_U64MAP_MAX);
    ms_u64map_init(&live[1], sizeof(uint64_t), MS_U64MAP_MAX);
    struct iev *pre = NULL;
    size_t npre = 0, cappre = 0;
#define PRE(addr_, size_, dev_, stack_, layer_, req_)                                           \
    do {                                                                                        \
        if (ms_grow((void **)&pre, &cappre, npre, sizeof *pre, 256, MS_GROW_MAX) < 0) {         \
            rc = ierr(m, MS_ENOMEM, "out of memory");                                           \
            goto out;                                                                           \
        }                                                                                       \
        pre[npre++] = (struct iev){                                                             \
            *t0,         (addr_), (size_), (dev_), (stack_), MS_KIND_MALLOC, (uint8_t)(layer_), \
            "pre_trace", (req_),  0,       0};                                                  \
    } while (0)
    rc = 0;
    for (uint64_t i = 0; i < m->nev; i++) {
        struct iev *e = &m->ev[i];
        struct ms_u64map *lv = &live[e->layer == MS_LAYER_PTA_SEGMENT];
        if (e->kind == MS_KIND_MALLOC) {
            if (ms_u64map_set64(lv, e->addr, i + 1)) { /* the live block's alloc event, + 1 */
                rc = ierr(m, MS_ENOMEM, "out of memory");
                goto out;
            }
        } else if (e->kind == MS_KIND_FREE || e->kind == MS_KIND_FREE_REQUESTED) {
            if (!ms_u64map_get(lv, e->addr)) {
                PRE(e->addr, e->size, e->device, e->stack, e->layer, 0);
                if (ms_u64map_set64(lv, e->addr, UINT64_MAX - 1)) { /* no event of ours */
                    rc = ierr(m, MS_ENOMEM, "out of memory");
                    goto out;
                }
            }
            if (e->kind == MS_KIND_FREE)
                ms_u64map_del(lv, e->addr, NULL);
        }
    }
    /* A block's size is the allocator's (rounded) size, as the segments report it, with the
     * requested size beside it: the trace's alloc entries carry the requested size, so a block
     * live at the end takes its size from its segment, and one freed in the trace the
     * allocator's rounding of the request (round_size: multiples of 512 bytes). */
    for (uint64_t i = 0; i < m->nev; i++) {
        struct iev *e = &m->ev[i];
        if (e->kind == MS_KIND_MALLOC && e->layer == MS_LAYER_PTA) {
            e->requested = e->size;
            e->size = ms_snap_round_size(e->size);
        }
    }
    for (uint64_t i = 0; i < s->nsegs; i++) {
        const struct ms_snap_segment *g = &s->segs[i];
        if (!ms_u64map_get(&live[1], g->addr))
            PRE(g->addr, g->total, g->device, g->stack, MS_LAYER_PTA_SEGMENT, 0);
        for (uint64_t j = 0; j < g->nblocks; j++) {
            const struct ms_snap_block *b = &s->blocks[g->first_block + j];
            if (b->state != MS_SB_ACTIVE_ALLOCATED && b->state != MS_SB_ACTIVE_PENDING_FREE)
                continue;
            uint64_t ev;
            struct iev *x = NULL;
            if (!ms_u64map_get64(&live[0], b->addr, &ev)) {
                PRE(b->addr, b->size, g->device, b->stack, MS_LAYER_PTA, b->requested);
                x = &pre[npre - 1];
            } else if (ev > 0 && ev <= m->nev) {
                x = &m->ev[ev - 1]; /* the trace's alloc of this live block */
                x->size = b->size;
                if (b->requested && b->requested != x->requested) {
                    x->trace_size = x->requested;
                    x->requested = b->requested;
                }
            }
            if (x)
                x->pending = b->state == MS_SB_ACTIVE_PENDING_FREE;
        }
    }
    if (npre) {
        /* Put them first: they happened before everything in the trace. */
        if (ms_grow((void **)&m->ev, &m->cap, m->nev + npre - 1, sizeof *m->ev, 4096, MS_GROW_MAX) <
            0) {
            rc = ierr(m, MS_ENOMEM, "out of memory");
            goto out;
        }
        memmove(m->ev + npre, m->ev, (size_t)m->nev * sizeof *m->ev);
        memcpy(m->ev, pre, (size_t)npre * sizeof *pre);
        m->nev += npre;
    }
#undef PRE
out:
    free(pre);
    ms_u64map_release(&live[0]);
    ms_u64map_release(&live[1]);
    return rc;
}

static int write_strings_frames_stacks(struct imp *m)
{
    const struct ms_snapshot *s = m->s;
    sqlite3_stmt *str = NULL, *fr = NULL, *stk = NULL, *sf = NULL, *find = NULL;
    /* the stack tree (docs/database.md): a node per (caller node, frame), each written once */
    struct ms_u64map nodes;
    int64_t next_node = 0;
    ms_u64map_init(&nodes, sizeof(uint32_t), (size_t)1 << 31);
    int rc;
    if ((rc = prep(m, &str, "INSERT OR IGNORE INTO strings(text) VALUES (?)")) ||
        (rc = prep(m, &find, "SELECT id FROM strings WHERE text = ?")) ||
        (rc = prep(m, &fr,
                   "INSERT INTO frames(id, module_id, pc, inline_depth, function_id, "
                   "file_id, line) VALUES (?, NULL, ?, 0, ?, ?, ?)")) ||
        (rc =
             prep(m, &stk,
                  "INSERT INTO stacks(id, process_id, depth, c_text, py_text, node_id, py_node_id) "
                  "VALUES (?, 1, ?, ?3, ?3, ?4, NULL)")) ||
        (rc = prep(m, &sf, "INSERT INTO stack_nodes(id, parent, frame_id) VALUES (?, ?, ?)")))
        goto out;

    for (uint32_t i = 1; i < s->nframes; i++) {
        const struct ms_snap_frame *f = &s->frames[i];
        int64_t ids[2];
        const struct ms_str *parts[2] = {&f->func, &f->file};
        for (int k = 0; k < 2; k++) {
            sqlite3_bind_text(str, 1, parts[k]->p, (int)parts[k]->n, SQLITE_STATIC);
            if ((rc = step(m, str)))
                goto out;
            sqlite3_bind_text(find, 1, parts[k]->p, (int)parts[k]->n, SQLITE_STATIC);
            ids[k] = sqlite3_step(find) == SQLITE_ROW ? sqlite3_column_int64(find, 0) : 0;
            sqlite3_reset(find);
        }
        sqlite3_bind_int64(fr, 1, i);
        sqlite3_bind_int64(fr, 2, i); /* no code address: the frame id stands in for pc */
        sqlite3_bind_int64(fr, 3, ids[0]);
        sqlite3_bind_int64(fr, 4, ids[1]);
        sqlite3_bind_int64(fr, 5, f->line);
        if ((rc = step(m, fr)))
            goto out;
    }
    char *text = NULL;
    size_t cap = 0;
    for (uint32_t i = 1; i < s->nstacks; i++) {
        const struct ms_snap_stack *st = &s->stacks[i];
        size_t len = 0;
        for (uint32_t k = 0; k < st->depth; k++) {
            uint32_t fid = ms_snapshot_stack_frame(s, i, k);
            const struct ms_snap_frame *f = &s->frames[fid];
            size_t need = len + f->file.n + f->func.n + 40;
            if (ms_grow((void **)&text, &cap, need - 1, 1, 256, MS_GROW_MAX) < 0) {
                free(text);
                rc = ierr(m, MS_ENOMEM, "out of memory");
                goto out;
            }
            len += (size_t)snprintf(text + len, cap - len, "%s%.*s(%lld): %.*s", k ? "\n" : "",
                                    (int)f->file.n, f->file.p, (long long)f->line, (int)f->func.n,
                                    f->func.p);
        }
        int64_t node = 0;
        for (uint32_t k = st->depth; k-- > 0;) {
            uint32_t fid = ms_snapshot_stack_frame(s, i, k);
            int isnew;
            uint32_t *slot = ms_u64map_put(&nodes, (uint64_t)node << 32 | fid, &isnew);
            if (!slot) {
                free(text);
                rc = ierr(m, MS_ENOMEM, "out of memory");
                goto out;
            }
            if (isnew) {
                *slot = (uint32_t)++next_node;
                sqlite3_bind_int64(sf, 1, next_node);
                if (node)
                    sqlite3_bind_int64(sf, 2, node);
                else
                    sqlite3_bind_null(sf, 2);
                sqlite3_bind_int64(sf, 3, fid);
                if ((rc = step(m, sf))) {
                    free(text);
                    goto out;
                }
            }
            node = *slot;
        }
        sqlite3_bind_int64(stk, 1, i);
        sqlite3_bind_int64(stk, 2, st->depth);
        sqlite3_bind_text(stk, 3, text ? text : "", (int)len, SQLITE_STATIC);
        if (node)
            sqlite3_bind_int64(stk, 4, node);
        else
            sqlite3_bind_null(stk, 4);
        if ((rc = step(m, stk))) {
            free(text);
            goto out;
        }
    }
    free(text);
out:
    ms_u64map_release(&nodes);
    sqlite3_finalize(str);
    sqlite3_finalize(find);
    sqlite3_finalize(fr);
    sqlite3_finalize(stk);
    sqlite3_finalize(sf);
    return rc;
}

struct layer_stats {
    uint64_t allocs, frees, alloc_bytes, live_bytes, live_blocks, peak_bytes, unmatched;
    int64_t peak_ns;
};

static int write_events(struct imp *m, int64_t *thread_of_dev_first, int64_t ndev_min)
{
    sqlite3_stmt *ev = NULL, *bl = NULL, *fin = NULL;
    int rc;
    if ((rc = prep(m, &ev,
                   "INSERT INTO events(id, ts_ns, kind, layer, process_id, thread_id, "
                   "addr, size, func, stack_id, allocation_id, attr) "
                   "VALUES (?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?)")) ||
        (rc = prep(m, &bl,
                   "INSERT INTO blocks(allocation_id, layer, process_id, thread_id, addr, "
                   "size, func, alloc_ns, free_ns, alloc_event_id, free_event_id, stack_id) "
                   "VALUES (?, ?, 1, ?, ?, ?, ?, ?, NULL, ?, NULL, ?)")) ||
        (rc = prep(m, &fin,
                   "UPDATE blocks SET free_ns = ?, free_event_id = ? "
                   "WHERE allocation_id = ?")))
        goto out;
    struct ms_u64map live[2]; /* addr -> allocation id */
    ms_u64map_init(&live[0], sizeof(uint64_t), MS_U64MAP_MAX);
    ms_u64map_init(&live[1], sizeof(uint64_t), MS_U64MAP_MAX);
    struct layer_stats ls[2] = {{0}};
    uint64_t *sizes = NULL; /* allocation id -> size */
    uint64_t next_alloc = 1;
    sizes = malloc((size_t)(m->nev + 2) * sizeof *sizes);
    if (!sizes) {
        rc = ierr(m, MS_ENOMEM, "out of memory");
        goto out2;
    }
    for (uint64_t i = 0; i < m->nev; i++) {
        const struct iev *e = &m->ev[i];
        int L = e->layer == MS_LAYER_PTA_SEGMENT;
        struct ms_u64map *lv = &live[L];
        struct layer_stats *st = &ls[L];
        int64_t tid = e->device - ndev_min + *thread_of_dev_first;
        int64_t alloc_id = 0;
        uint64_t old;
        int have = ms_u64map_get64(lv, e->addr, &old);
        if (e->kind == MS_KIND_MALLOC) {
            if (have) { /* an alloc over a live block closes it first */
                sqlite3_bind_int64(fin, 1, e->ts);
                sqlite3_bind_int64(fin, 2, (int64_t)i + 1);
                sqlite3_bind_int64(fin, 3, (int64_t)old);
                if ((rc = step(m, fin)))
                    goto out2;
                st->live_bytes -= sizes[old];
                st->live_blocks--;
            }
            alloc_id = (int64_t)next_alloc++;
            sizes[alloc_id] = e->size;
            if (ms_u64map_set64(lv, e->addr, (uint64_t)alloc_id)) {
                rc = ierr(m, MS_ENOMEM, "out of memory");
                goto out2;
            }
            st->allocs++;
            st->alloc_bytes += e->size;
            st->live_bytes += e->size;
            st->live_blocks++;
            if (st->live_bytes > st->peak_bytes) {
                st->peak_bytes = st->live_bytes;
                st->peak_ns = e->ts;
            }
            sqlite3_bind_int64(bl, 1, alloc_id);
            sqlite3_bind_int64(bl, 2, e->layer);
            sqlite3_bind_int64(bl, 3, tid);
            sqlite3_bind_int64(bl, 4, (int64_t)e->addr);
            sqlite3_bind_int64(bl, 5, (int64_t)e->size);
            sqlite3_bind_text(bl, 6, e->func, -1, SQLITE_STATIC);
            sqlite3_bind_int64(bl, 7, e->ts);
            sqlite3_bind_int64(bl, 8, (int64_t)i + 1);
            if (e->stack)
                sqlite3_bind_int64(bl, 9, e->stack);
            else
                sqlite3_bind_null(bl, 9);
            if ((rc = step(m, bl)))
                goto out2;
        } else if (have) {
            alloc_id = (int64_t)old;
            if (e->kind == MS_KIND_FREE) {
                sqlite3_bind_int64(fin, 1, e->ts);
                sqlite3_bind_int64(fin, 2, (int64_t)i + 1);
                sqlite3_bind_int64(fin, 3, alloc_id);
                if ((rc = step(m, fin)))
                    goto out2;
                st->frees++;
                st->live_bytes -= sizes[alloc_id];
                st->live_blocks--;
                ms_u64map_del(lv, e->addr, NULL);
            }
        } else if (e->kind == MS_KIND_FREE) {
            st->unmatched++;
        }
        sqlite3_bind_int64(ev, 1, (int64_t)i + 1);
        sqlite3_bind_int64(ev, 2, e->ts);
        sqlite3_bind_int64(ev, 3, e->kind);
        sqlite3_bind_int64(ev, 4, e->layer);
        sqlite3_bind_int64(ev, 5, tid);
        sqlite3_bind_int64(ev, 6, (int64_t)e->addr);
        sqlite3_bind_int64(ev, 7, (int64_t)e->size);
        sqlite3_bind_text(ev, 8, e->func, -1, SQLITE_STATIC);
        if (e->stack && e->kind == MS_KIND_MALLOC)
            sqlite3_bind_int64(ev, 9, e->stack);
        else
            sqlite3_bind_null(ev, 9);
        if (alloc_id)
            sqlite3_bind_int64(ev, 10, alloc_id);
        else
            sqlite3_bind_null(ev, 10);
        /* what the blocks table has no column for (docs/database.md "Snapshot import") */
        char attr[160];
        if (e->kind == MS_KIND_MALLOC && (e->requested || e->pending)) {
            int n = snprintf(attr, sizeof attr, "{\"requested\":\"%llu\"",
                             (unsigned long long)(e->requested ? e->requested : e->size));
            if (e->trace_size)
                n += snprintf(attr + n, sizeof attr - (size_t)n, ",\"trace_size\":\"%llu\"",
                              (unsigned long long)e->trace_size);
            if (e->pending)
                n += snprintf(attr + n, sizeof attr - (size_t)n,
                              ",\"state\":\"active_pending_free\"");
            snprintf(attr + n, sizeof attr - (size_t)n, "}");
            sqlite3_bind_text(ev, 11, attr, -1, SQLITE_STATIC);
        } else {
            sqlite3_bind_null(ev, 11);
        }
        if ((rc = step(m, ev)))
            goto out2;
    }
    for (int L = 0; L < 2; L++) {
        if ((rc = execf(m,
                        "INSERT INTO process_stats VALUES (1, %d, %llu, %llu, %llu, %llu, %lld, "
                        "%llu, %llu, %llu, NULL, NULL)",
                        L ? MS_LAYER_PTA_SEGMENT : MS_LAYER_PTA, (unsigned long long)ls[L].allocs,
                        (unsigned long long)ls[L].frees, (unsigned long long)ls[L].alloc_bytes,
                        (unsigned long long)ls[L].peak_bytes, (long long)ls[L].peak_ns,
                        (unsigned long long)ls[L].live_bytes, (unsigned long long)ls[L].live_blocks,
                        (unsigned long long)ls[L].unmatched)))
            goto out2;
    }
out2:
    free(sizes);
    ms_u64map_release(&live[0]);
    ms_u64map_release(&live[1]);
out:
    sqlite3_finalize(ev);
    sqlite3_finalize(bl);
    sqlite3_finalize(fin);
    return rc;
}

static int write_marks(struct imp *m)
{
    const struct ms_snapshot *s = m->s;
    sqlite3_stmt *mk = NULL;
    int rc = exec(m, "CREATE TABLE snapshot_marks (id INTEGER PRIMARY KEY, ts_ns INTEGER, "
                     "device INTEGER, kind TEXT NOT NULL, name TEXT, addr INTEGER, size INTEGER)");
    if (rc || (rc = prep(m, &mk,
                         "INSERT INTO snapshot_marks(ts_ns, device, kind, name, addr, "
                         "size) VALUES (?, ?, ?, ?, ?, ?)")))
        goto out;
    for (uint64_t d = 0; d < s->ntraces; d++) {
        const struct ms_snap_trace *t = &s->traces[d];
        for (uint64_t i = 0; i < t->nevents; i++) {
            const struct ms_snap_event *e = &t->events[i];
            if (e->action != MS_SA_SNAPSHOT && e->action != MS_SA_OOM &&
                e->action != MS_SA_ANNOTATE && e->action != MS_SA_OTHER)
                continue;
            if (e->time_us != MS_SNAP_NO_TIME)
                sqlite3_bind_int64(mk, 1, e->time_us * 1000);
            else
                sqlite3_bind_null(mk, 1);
            sqlite3_bind_int64(mk, 2, t->device);
            sqlite3_bind_text(mk, 3, ms_snap_action_names[e->action], -1, SQLITE_STATIC);
            sqlite3_bind_null(mk, 4);
            sqlite3_bind_int64(mk, 5, (int64_t)e->addr);
            sqlite3_bind_int64(mk, 6, (int64_t)e->size);
            if ((rc = step(m, mk)))
                goto out;
        }
    }
    for (uint64_t i = 0; i < s->nannotations; i++) {
        const struct ms_snap_annotation *a = &s->annotations[i];
        char kind[64];
        snprintf(kind, sizeof kind, "annotation_%.*s", (int)(a->stage.n < 40 ? a->stage.n : 40),
                 a->stage.p);
        if (a->time_us != MS_SNAP_NO_TIME)
            sqlite3_bind_int64(mk, 1, a->time_us * 1000);
        else
            sqlite3_bind_null(mk, 1);
        sqlite3_bind_int64(mk, 2, a->device);
        sqlite3_bind_text(mk, 3, kind, -1, SQLITE_STATIC);
        sqlite3_bind_text(mk, 4, a->name.p, (int)a->name.n, SQLITE_STATIC);
        sqlite3_bind_null(mk, 5);
        sqlite3_bind_null(mk, 6);
        if ((rc = step(m, mk)))
            goto out;
    }
out:
    sqlite3_finalize(mk);
    return rc;
}

/* memscope_dump from the rows written: the store's DDL and INSERT ... SELECT (db_schema.h). */
static int write_dump(struct imp *m)
{
    char *sql = ms_dump_create_sql();
    if (!sql)
        return ierr(m, MS_ENOMEM, "memscope_dump: out of memory");
    int rc = exec(m, sql);
    free(sql);
    return rc;
}

int ms_snapshot_write_db(const struct ms_snapshot *s, const char *source_path, const char *db_path,
                         unsigned flags, char *err, size_t errlen)
{
    struct imp m = {.s = s, .err = err, .errlen = errlen};
    char tmp[4096] = "";
    int64_t t0 = 0, t1 = 0;
    int created = 0;
    int rc = collect(&m, &t0, &t1);
    if (rc)
        goto out;
    int fd = ms_temp_create(tmp, sizeof tmp, db_path, ".tmp."); /* ours (files.h), for SQLite */
    if (fd < 0) {
        rc = ierr(&m, fd == -ENAMETOOLONG ? MS_EINVAL : MS_EIO,
                  "cannot create a temporary file beside %s: %s", db_path, strerror(-fd));
        goto out;
    }
    close(fd);
    created = 1;
    if (sqlite3_open(tmp, &m.db) != SQLITE_OK) {
        rc = ierr(&m, MS_EDB, "cannot create %s: %s", tmp, m.db ? sqlite3_errmsg(m.db) : "?");
        goto out;
    }
    if ((rc = exec(&m, "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; BEGIN")) ||
        (rc = exec(&m, ms_schema_sql)) ||
        (rc = exec(&m, "INSERT OR IGNORE INTO layers VALUES (" MS_SQL_LAYER_PTA
                       ", 'PTA', 'PTA', NULL), (" MS_SQL_LAYER_PTA_SEGMENT
                       ", 'PTA_SEGMENT', 'PTA_SEGMENT', NULL);"
                       "INSERT OR IGNORE INTO event_kinds VALUES (" MS_SQL_FREE_REQUESTED
                       ", 'FREE_REQUESTED');"
                       /* The caching allocator is a pool carving blocks from segments, so
                        * `memscope analyze fragmentation` applies (docs/database.md). */
                       "INSERT INTO pools VALUES (1, 'PTA', " MS_SQL_LAYER_PTA
                       ", " MS_SQL_LAYER_PTA_SEGMENT ");")))
        goto out;
    /* meta, process, threads (one per device) */
    int64_t dmin = 0, dmax = 0;
    int any = 0;
    for (uint64_t i = 0; i < s->nsegs; i++) {
        int64_t d = s->segs[i].device;
        if (!any || d < dmin)
            dmin = d;
        if (!any || d > dmax)
            dmax = d;
        any = 1;
    }
    for (uint64_t i = 0; i < s->ntraces; i++) {
        int64_t d = s->traces[i].device;
        if (!any || d < dmin)
            dmin = d;
        if (!any || d > dmax)
            dmax = d;
        any = 1;
    }
    if (dmax - dmin > 4096) {
        rc = ierr(&m, MS_ELIMIT, "device ids span more than 4096");
        goto out;
    }
    /* memscope_dump's Device Id is the layer's: the device ordinal when one device has every
     * segment and event (a snapshot of several devices keeps N/A: docs/snapshot.md) */
    int64_t only = -1;
    int several = 0;
    for (uint64_t i = 0; i < s->nsegs; i++) {
        several |= only >= 0 && s->segs[i].device != only;
        only = s->segs[i].device;
    }
    for (uint64_t i = 0; i < s->ntraces; i++)
        if (s->traces[i].nevents) {
            several |= only >= 0 && s->traces[i].device != only;
            only = s->traces[i].device;
        }
    if (only >= 0 && !several) {
        if ((rc = execf(&m, "UPDATE layers SET device = '%lld' WHERE id IN (%d, %d)",
                        (long long)only, MS_LAYER_PTA, MS_LAYER_PTA_SEGMENT)))
            goto out;
    }
    sqlite3_stmt *st = NULL;
    if ((rc = prep(&m, &st, "INSERT INTO meta VALUES (?, ?)")))
        goto out;
    char num[3][32];
    snprintf(num[0], sizeof num[0], "%lld", (long long)t0);
    snprintf(num[1], sizeof num[1], "%lld", (long long)t1);
    snprintf(num[2], sizeof num[2], "%d", s->protocol);
    const char *meta[][2] = {{"format_version", MS_DB_FORMAT_VERSION_SQL},
                             {"memscope_version", MEMSCOPE_VERSION},
                             {"start_time_ns", num[0]},
                             {"end_time_ns", num[1]},
                             {"source", "pytorch_snapshot"},
                             {"snapshot_file", source_path},
                             {"snapshot_format", s->format == MS_SNAP_JSON ? "json" : "pickle"},
                             {"snapshot_protocol", num[2]},
                             {"events", "alloc,free"}};
    for (size_t i = 0; i < sizeof meta / sizeof meta[0] && !rc; i++) {
        sqlite3_bind_text(st, 1, meta[i][0], -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, meta[i][1], -1, SQLITE_STATIC);
        rc = step(&m, st);
    }
    sqlite3_finalize(st);
    if (rc)
        goto out;
    st = NULL;
    if ((rc = prep(&m, &st,
                   "INSERT INTO processes(id, pid, ppid, image_seq, exe, cmdline, "
                   "start_ns, end_ns, trace_file) VALUES (1, 0, 0, 0, ?, ?, ?, ?, ?)")))
        goto out;
    sqlite3_bind_text(st, 1, source_path, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, source_path, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, t0);
    sqlite3_bind_int64(st, 4, t1);
    sqlite3_bind_text(st, 5, source_path, -1, SQLITE_STATIC);
    rc = step(&m, st);
    sqlite3_finalize(st);
    if (rc)
        goto out;
    /* the events per device, counted in one pass (work linear in events and devices) */
    uint64_t *per_device = any ? calloc((size_t)(dmax - dmin + 1), sizeof *per_device) : NULL;
    if (any && !per_device) {
        rc = ierr(&m, MS_ENOMEM, "out of memory");
        goto out;
    }
    for (uint64_t i = 0; any && i < m.nev; i++)
        if (m.ev[i].device >= dmin && m.ev[i].device <= dmax)
            per_device[m.ev[i].device - dmin]++;
    for (int64_t d = dmin; any && d <= dmax; d++) {
        if ((rc = execf(&m, "INSERT INTO threads VALUES (%lld, 1, %lld, %lld, %lld, %llu)",
                        (long long)(d - dmin + 1), (long long)d, (long long)t0, (long long)t1,
                        (unsigned long long)per_device[d - dmin])))
            break;
    }
    free(per_device);
    if (rc)
        goto out;
    int64_t first_tid = 1;
    if ((rc = write_strings_frames_stacks(&m)) || (rc = write_events(&m, &first_tid, dmin)) ||
        (rc = write_marks(&m)) || (rc = exec(&m, ms_schema_index_sql)) ||
        ((flags & MS_SNAP_DB_DUMP) && (rc = write_dump(&m))) || (rc = exec(&m, "COMMIT")))
        goto out;
    if (sqlite3_close(m.db) != SQLITE_OK) {
        m.db = NULL;
        rc = ierr(&m, MS_EDB, "closing the database failed");
        goto out;
    }
    m.db = NULL;
    if (ms_oom_seen()) {
        rc = ierr(&m, MS_ENOMEM, "out of memory while importing (an allocation failed)");
        goto out;
    }
    if (rename(tmp, db_path) < 0) {
        rc = ierr(&m, MS_EIO, "cannot rename %s to %s", tmp, db_path);
        goto out;
    }
out:
    if (m.db)
        sqlite3_close(m.db);
    if (rc && created)
        unlink(tmp);
    if (created)
        ms_cleanup_forget(tmp);
    free(m.ev);
    return rc;
}

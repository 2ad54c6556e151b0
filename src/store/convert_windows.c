/* convert_windows.c: the memory of each window between two MARK events, computed in the
 * conversion's pass when the caller names the marks (ms_store_options.window_start and
 * window_end: memscope.pytest_plugin's "memscope-pytest start ID" and "... end ID" around each
 * test's call, docs/ci.md). Over the heap and the mmap layer of every process, for the blocks
 * allocated between a window's two marks (in the merge's order, which is the events' ids):
 *   - allocated: their bytes;
 *   - peak: the highest sum of their bytes live at once before the end mark, and the first
 *     MALLOC that reached it;
 *   - leaked: their bytes still live at the end mark;
 * and the call sites (stack ids) of the blocks live at the peak and of those leaked, with bytes
 * and blocks: tables mark_windows and mark_window_sites (docs/database.md), written only when
 * asked for. Windows follow one another (a start while one is open drops that one).
 * Workload: a few additions per MALLOC and per close of a block allocated in a window, a
 * binary search for the window of a block closed after its window ended; memory: one entry
 * per window and per (window, kind, stack), and the blocks of the open window closed since its
 * current peak. */
#include "convert_internal.h"

struct window {
    char *id;
    int64_t first_alloc, last_alloc; /* the block ids allocated in it; 0: none yet */
    int64_t allocated, live, peak, peak_alloc, peak_event, leaked;
    int ended;
};

/* The blocks of the open window closed since its current peak that were live at it. */
struct closed_since {
    int64_t stack, size;
};

struct site_row {
    uint32_t window;
    int kind; /* 0: live at the peak, 1: leaked */
    int64_t stack, bytes, blocks;
};

struct conv_windows {
    struct window *w;
    size_t n, a;
    size_t open;           /* index + 1 of the open window, 0: none */
    uint32_t *with_allocs; /* windows that allocated, in order (their block ids increase) */
    size_t nwa, awa;
    struct closed_since *cs;
    size_t ncs, acs;
    struct site_row *rows;
    size_t nrows, arows;
    struct ms_u64map row_ids; /* (window, kind, stack) -> rows index */
};

#define MAX_WINDOWS (1u << 24)
#define MAX_WINDOW_ROWS (1u << 26)

int conv__windows_init(struct conv *c)
{
    if (!c->o->window_start || !c->o->window_end)
        return 0;
    if (!(c->win = calloc(1, sizeof *c->win)))
        return conv__oom(c, "windows");
    ms_u64map_init(&c->win->row_ids, sizeof(uint32_t), MAX_WINDOW_ROWS);
    return 0;
}

void conv__windows_release(struct conv *c)
{
    struct conv_windows *v = c->win;
    if (!v)
        return;
    for (size_t i = 0; i < v->n; i++)
        free(v->w[i].id);
    free(v->w);
    free(v->with_allocs);
    free(v->cs);
    free(v->rows);
    ms_u64map_release(&v->row_ids);
    free(v);
    c->win = NULL;
}

static int starts_with(const char *s, size_t n, const char *prefix, size_t *plen)
{
    *plen = strlen(prefix);
    return n >= *plen && memcmp(s, prefix, *plen) == 0;
}

/* Adds a block to row (window, kind, stack). */
static int site_add(struct conv *c, uint32_t window, int kind, int64_t stack, int64_t size)
{
    struct conv_windows *v = c->win;
    if (stack < 0 || stack >= (1ll << 32))
        stack = 0;
    uint64_t key = (uint64_t)window << 34 | (uint64_t)kind << 33 | (uint64_t)stack;
    uint32_t i;
    if (!ms_u64map_get32(&v->row_ids, key, &i)) {
        if (v->nrows == v->arows && conv__grow((void **)&v->rows, &v->arows, v->nrows,
                                               sizeof *v->rows, MAX_WINDOW_ROWS) < 0)
            return conv__oom(c, "window sites");
        i = (uint32_t)v->nrows++;
        if (ms_u64map_set32(&v->row_ids, key, i) < 0)
            return conv__oom(c, "window sites");
        v->rows[i] = (struct site_row){window, kind, stack, 0, 0};
    }
    v->rows[i].bytes += size;
    v->rows[i].blocks++;
    return 0;
}

int conv__windows_mark(struct conv *c, const char *name, size_t len)
{
    struct conv_windows *v = c->win;
    size_t pl;
    if (!v || !name)
        return 0;
    if (starts_with(name, len, c->o->window_start, &pl)) {
        if (v->n == v->a && conv__grow((void **)&v->w, &v->a, v->n, sizeof *v->w, MAX_WINDOWS) < 0)
            return conv__oom(c, "windows");
        struct window *w = &v->w[v->n];
        memset(w, 0, sizeof *w);
        if (!(w->id = strndup(name + pl, len - pl)))
            return conv__oom(c, "windows");
        v->open = ++v->n; /* an open one is dropped: never ended */
        v->ncs = 0;
        return 0;
    }
    if (!v->open || !starts_with(name, len, c->o->window_end, &pl))
        return 0;
    struct window *w = &v->w[v->open - 1];
    if (strlen(w->id) != len - pl || memcmp(w->id, name + pl, len - pl))
        return 0;
    w->ended = 1;
    w->leaked = w->live;
    v->open = 0;
    int rc = 0; /* the blocks closed since the peak were live at it */
    for (size_t i = 0; i < v->ncs && rc == 0; i++)
        rc = site_add(c, (uint32_t)(w - v->w), 0, v->cs[i].stack, v->cs[i].size);
    v->ncs = 0;
    return rc;
}

int conv__windows_alloc(struct conv *c, int64_t alloc_id, int64_t size)
{
    struct conv_windows *v = c->win;
    if (!v || !v->open)
        return 0;
    uint32_t k = (uint32_t)(v->open - 1);
    struct window *w = &v->w[k];
    if (!w->first_alloc) {
        if (v->nwa == v->awa && conv__grow((void **)&v->with_allocs, &v->awa, v->nwa,
                                           sizeof *v->with_allocs, MAX_WINDOWS) < 0)
            return conv__oom(c, "windows");
        v->with_allocs[v->nwa++] = k;
        w->first_alloc = alloc_id;
    }
    w->last_alloc = alloc_id;
    w->allocated += size;
    w->live += size;
    if (w->live > w->peak) {
        w->peak = w->live;
        w->peak_alloc = alloc_id;
        w->peak_event = c->next_event;
        v->ncs = 0; /* closed before this peak: not live at it */
    }
    return 0;
}

/* The window whose blocks include alloc_id, or NULL. */
static struct window *window_of(struct conv_windows *v, int64_t alloc_id, uint32_t *k)
{
    size_t lo = 0, hi = v->nwa;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct window *w = &v->w[v->with_allocs[mid]];
        if (alloc_id < w->first_alloc)
            hi = mid;
        else if (alloc_id > w->last_alloc)
            lo = mid + 1;
        else {
            *k = v->with_allocs[mid];
            return &v->w[*k];
        }
    }
    return NULL;
}

int conv__windows_close(struct conv *c, int64_t alloc_id, int64_t size, int64_t stack)
{
    struct conv_windows *v = c->win;
    uint32_t k;
    struct window *w = v && v->nwa ? window_of(v, alloc_id, &k) : NULL;
    if (!w)
        return 0;
    if (v->open == (size_t)k + 1) { /* freed during its window */
        w->live -= size;
        if (alloc_id > w->peak_alloc)
            return 0;
        if (v->ncs == v->acs &&
            conv__grow((void **)&v->cs, &v->acs, v->ncs, sizeof *v->cs, MAX_LIVE) < 0)
            return conv__oom(c, "window sites");
        v->cs[v->ncs++] = (struct closed_since){stack, size};
        return 0;
    }
    if (!w->ended)
        return 0;                            /* a window a later start dropped */
    int rc = site_add(c, k, 1, stack, size); /* live after its window: leaked */
    if (rc == 0 && alloc_id <= w->peak_alloc)
        rc = site_add(c, k, 0, stack, size); /* and live at its peak */
    return rc;
}

int conv__windows_write(struct conv *c)
{
    struct conv_windows *v = c->win;
    if (!v)
        return 0;
    int rc = conv__exec(c,
                        "CREATE TABLE mark_windows (id TEXT NOT NULL, allocated INTEGER NOT NULL, "
                        "peak INTEGER NOT NULL, leaked INTEGER NOT NULL, peak_event_id INTEGER);"
                        "CREATE TABLE mark_window_sites (window TEXT NOT NULL, kind INTEGER NOT "
                        "NULL, stack_id INTEGER, bytes INTEGER NOT NULL, blocks INTEGER NOT NULL);",
                        "windows");
    sqlite3_stmt *w = NULL, *s = NULL;
    if (rc == 0)
        rc = conv__prepare(c, &w, "INSERT INTO mark_windows VALUES (?,?,?,?,?)");
    if (rc == 0)
        rc = conv__prepare(c, &s, "INSERT INTO mark_window_sites VALUES (?,?,?,?,?)");
    for (size_t i = 0; i < v->n && rc == 0; i++) {
        const struct window *x = &v->w[i];
        if (!x->ended)
            continue;
        sqlite3_bind_text(w, 1, x->id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(w, 2, x->allocated);
        sqlite3_bind_int64(w, 3, x->peak);
        sqlite3_bind_int64(w, 4, x->leaked);
        conv__bind_opt(w, 5, x->peak_event, x->peak > 0);
        rc = conv__step_reset(c, w, "insert mark_windows");
    }
    for (size_t i = 0; i < v->nrows && rc == 0; i++) {
        const struct site_row *r = &v->rows[i];
        sqlite3_bind_text(s, 1, v->w[r->window].id, -1, SQLITE_STATIC);
        sqlite3_bind_int(s, 2, r->kind);
        conv__bind_opt(s, 3, r->stack, r->stack > 0);
        sqlite3_bind_int64(s, 4, r->bytes);
        sqlite3_bind_int64(s, 5, r->blocks);
        rc = conv__step_reset(c, s, "insert mark_window_sites");
    }
    sqlite3_finalize(w);
    sqlite3_finalize(s);
    return rc;
}

/* convert_rows.c: the row code below the conversion's parts and its sinks: errors, running
 * statements, opening the database with its schema and prepared inserts, the
 * events rows' batch, and flushing the batches at the end. Called by every convert*.c and
 * sink_*.c; calls none of them but convert_blocks.c's window drain. */
#include "convert_internal.h"

#include <signal.h>

int conv__fail(struct conv *c, int rc, const char *fmt, ...)
{
    pthread_mutex_lock(&c->err_mu); /* the conversion's threads may fail at once */
    if (c->err && c->errlen && !c->err[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, c->errlen, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&c->err_mu);
    return rc;
}

int conv__db_fail(struct conv *c, const char *what)
{
    return conv__fail(c, MS_EDB, "database %s: %s: %s", c->tmp_path, what, sqlite3_errmsg(c->db));
}

int conv__oom(struct conv *c, const char *what)
{
    return conv__fail(c, MS_ENOMEM, "out of memory or over a size cap (%s)", what);
}

int conv__batch_fail(struct conv *c, int rc, const char *what)
{
    return rc == MS_EDB ? conv__db_fail(c, what) : conv__oom(c, what);
}

/* Runs one prepared insert that has its parameters bound. */
int conv__step_reset(struct conv *c, sqlite3_stmt *st, const char *what)
{
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : conv__db_fail(c, what);
}

int conv__exec(struct conv *c, const char *sql, const char *what)
{
    return sqlite3_exec(c->db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : conv__db_fail(c, what);
}

int conv__prepare(struct conv *c, sqlite3_stmt **st, const char *sql)
{
    return sqlite3_prepare_v3(c->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) == SQLITE_OK
               ? 0
               : conv__db_fail(c, "prepare");
}

void conv__bind_opt(sqlite3_stmt *st, int i, int64_t v, int present)
{
    if (present)
        sqlite3_bind_int64(st, i, v);
    else
        sqlite3_bind_null(st, i);
}

/* Grows array *a of n elements of size sz to hold one more (cap: max elements). */
int conv__grow(void **a, size_t *alloc, size_t n, size_t sz, size_t max)
{
    return ms_grow(a, alloc, n, sz, 256, max);
}
int conv__cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int conv__flush_rows(struct conv *c)
{
    int rc = conv__drain_blocks(c);
    if (rc < 0)
        return rc;
    rc = ms_batch_flush(&c->events_ins);
    if (rc < 0)
        return conv__batch_fail(c, rc, "insert event");
    rc = ms_batch_flush(&c->blocks_ins);
    return rc < 0 ? conv__batch_fail(c, rc, "insert block") : 0;
}

static int open_schema(struct conv *c, const char *pragmas);

int conv__open_memory(struct conv *c, const char *pragmas)
{
    return sqlite3_open_v2(":memory:", &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_MEMORY, NULL) ==
                   SQLITE_OK
               ? open_schema(c, pragmas)
               : conv__db_fail(c, "open");
}

int conv__open_file(struct conv *c, const char *pragmas)
{
    /* A new file of this conversion's own (files.h): two runs converting to the same
     * database never share it, and a link planted at the name is never followed. */
    size_t n = strlen(c->o->db_path) + 64;
    c->tmp_path = malloc(n);
    if (!c->tmp_path)
        return conv__oom(c, "path");
    int fd = ms_temp_create(c->tmp_path, n, c->o->db_path, ".tmp.");
    if (fd < 0) {
        int rc = conv__fail(c, fd, "cannot create a temporary file beside %s: %s", c->o->db_path,
                            strerror(-fd));
        free(c->tmp_path);
        c->tmp_path = NULL; /* not ours: nothing to remove */
        return rc;
    }
    close(fd); /* empty: SQLite opens it as a new database */
    /* One thread uses this connection: no mutexes (7% of the conversion time). */
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
    if (sqlite3_open_v2(c->tmp_path, &c->db, flags, NULL) != SQLITE_OK)
        return conv__db_fail(c, "open");
    return open_schema(c, pragmas);
}

/* The schema and the prepared inserts, in c->db. */
static int open_schema(struct conv *c, const char *pragmas)
{
    /* pragmas: the sink's page size and cache (sink_full.c, sink_compact.c) */
    int rc = conv__exec(c, pragmas, "setup");
    if (rc == 0)
        rc = conv__exec(c,
                        "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;"
                        "PRAGMA locking_mode=EXCLUSIVE; PRAGMA temp_store=MEMORY;"
                        "PRAGMA threads=2; BEGIN;",
                        "setup");
    if (rc == 0)
        rc = conv__exec(c, ms_schema_sql, "create schema");
    /* Before loading: the events indexes are partial (annotation rows only), so keeping them
     * costs a row two comparisons, while building them after would read all of events twice. */
    if (rc == 0)
        rc = conv__exec(c, ms_schema_index_sql, "create indexes");
    if (rc == 0 && (rc = ms_batch_init(&c->events_ins, c->db, "events", 14, 1)) < 0)
        rc = conv__batch_fail(c, rc, "prepare");
    if (rc == 0 && (rc = ms_batch_init(&c->blocks_ins, c->db, "blocks", 14, 1)) < 0)
        rc = conv__batch_fail(c, rc, "prepare");
    if (rc == 0)
        rc = conv__prepare(c, &c->ins_owner, "INSERT INTO owners VALUES (?,?)");
    if (rc == 0)
        rc = conv__prepare(c, &c->ins_step, "INSERT INTO steps VALUES (?,?,?,?,?)");
    if (rc == 0)
        rc = conv__prepare(c, &c->ins_range, "INSERT INTO ranges VALUES (?,?,?,?,?,?,?,?,?,?)");
    if (rc == 0)
        rc = conv__prepare(c, &c->ins_pytrace, "INSERT INTO python_trace VALUES (?,?,?,?,?,?)");
    if (rc == 0)
        rc = conv__prepare(c, &c->ins_string, "INSERT INTO strings VALUES (?,?)");
    if (rc == 0)
        rc = conv__prepare(c, &c->ins_frame, "INSERT INTO frames VALUES (?,?,?,?,?,?,?,?)");
    if (rc == 0)
        rc = conv__prepare(c, &c->ins_stack, "INSERT INTO stacks VALUES (?,?,?,NULL,?,?,?)");
    if (rc == 0)
        rc = conv__prepare(c, &c->ins_stack_node, "INSERT INTO stack_nodes VALUES (?,?,?)");
    return rc;
}

int conv__event_row(struct conv *c, const struct stream *s, const struct conv_event *e)
{
    struct ms_cell *row;
    int rc = ms_batch_row(&c->events_ins, &row);
    if (rc < 0)
        return conv__batch_fail(c, rc, "insert event");
    ms_cell_int(&row[0], ++c->next_event);
    ms_cell_int(&row[1], s->ts);
    ms_cell_int(&row[2], e->kind);
    ms_cell_int(&row[3], e->layer);
    ms_cell_int(&row[4], c->procs[s->proc].id);
    ms_cell_int(&row[5], s->thread);
    ms_cell_opt(&row[6], e->addr, e->have_addr);
    ms_cell_opt(&row[7], e->size, e->have_size);
    ms_cell_static(&row[8], e->func);
    ms_cell_opt(&row[9], e->stack, e->stack != 0);
    ms_cell_opt(&row[10], e->alloc_id, e->alloc_id != 0);
    ms_cell_null(&row[11]);
    if (e->name && (rc = ms_batch_copy(&c->events_ins, &row[11], e->name, e->name_len)) < 0)
        return conv__batch_fail(c, rc, "insert event");
    ms_cell_opt(&row[12], e->flags, e->flags >= 0);
    ms_cell_null(&row[13]);
    if (c->attr && (rc = ms_batch_copy(&c->events_ins, &row[13], c->attr, c->attr_len)) < 0)
        return conv__batch_fail(c, rc, "insert event");
    c->attr = NULL;
    return 0;
}

int conv__step_row(struct conv *c, const struct conv_step *st)
{
    sqlite3_bind_int64(c->ins_step, 1, st->process_id);
    sqlite3_bind_int64(c->ins_step, 2, st->step);
    sqlite3_bind_int64(c->ins_step, 3, st->start_ns);
    sqlite3_bind_int64(c->ins_step, 4, st->end_ns);
    conv__bind_opt(c->ins_step, 5, st->end_event, st->end_event != 0);
    return conv__step_reset(c, c->ins_step, "insert step");
}

int conv__range_row(struct conv *c, const struct conv_range *r)
{
    sqlite3_stmt *st = c->ins_range;
    sqlite3_bind_int64(st, 1, r->id);
    sqlite3_bind_int64(st, 2, r->process_id);
    sqlite3_bind_int64(st, 3, r->thread_id);
    sqlite3_bind_text(st, 4, r->name, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 5, r->depth);
    conv__bind_opt(st, 6, r->parent, r->parent != 0);
    sqlite3_bind_int64(st, 7, r->start_ns);
    conv__bind_opt(st, 8, r->end_ns, r->end_event != 0);
    sqlite3_bind_int64(st, 9, r->start_event);
    conv__bind_opt(st, 10, r->end_event, r->end_event != 0);
    return conv__step_reset(c, st, "insert range");
}

int conv__stack_row(struct conv *c, const struct conv_stack *st)
{
    sqlite3_bind_int64(c->ins_stack, 1, st->id);
    sqlite3_bind_int64(c->ins_stack, 2, st->process_id);
    sqlite3_bind_int64(c->ins_stack, 3, st->depth);
    if (st->py_text)
        sqlite3_bind_text(c->ins_stack, 4, st->py_text, (int)st->py_text_len, SQLITE_STATIC);
    else
        sqlite3_bind_null(c->ins_stack, 4);
    conv__bind_opt(c->ins_stack, 5, st->node, st->node != 0);
    conv__bind_opt(c->ins_stack, 6, st->py_node, st->py_node != 0);
    return conv__step_reset(c, c->ins_stack, "insert stack");
}

static void bind_u64(sqlite3_stmt *st, int col, uint64_t v, int present)
{
    conv__bind_opt(st, col, v > INT64_MAX ? INT64_MAX : (int64_t)v, present);
}

int conv__usage_row(struct conv *c, const struct conv_usage *u)
{
    int rc;
    if (!c->ins_usage &&
        (rc = conv__prepare(c, &c->ins_usage,
                            "INSERT INTO usage_samples (process_id, ts_ns, rss_anon, rss_file, "
                            "rss_shmem, stack, swap, pss, uss, threads, cgroup_current, "
                            "cgroup_max, live_bytes, exited, private_anon) VALUES "
                            "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")) < 0)
        return rc;
    sqlite3_stmt *st = c->ins_usage;
    sqlite3_bind_int64(st, 1, u->process_id);
    bind_u64(st, 2, u->ts_ns, 1);
    for (int i = CONV_USAGE_RSS_ANON; i <= CONV_USAGE_CGROUP_MAX; i++)
        bind_u64(st, 3 + i, u->v[i], u->have[i]);
    sqlite3_bind_int64(st, 13, u->live_bytes);
    sqlite3_bind_int(st, 14, u->exited);
    bind_u64(st, 15, u->v[CONV_USAGE_PRIVATE_ANON], u->have[CONV_USAGE_PRIVATE_ANON]);
    return conv__step_reset(c, st, "usage_samples");
}

void conv__fault_point(void)
{
    if (getenv("MEMSCOPE_FAULT_CONVERT"))
        raise(SIGSEGV); /* failure injection (tests): a crash with its files half-written */
}

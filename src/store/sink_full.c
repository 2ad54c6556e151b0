/* sink_full.c: the full database's sink (convert_sink.h): one events row per event, every
 * blocks row in about allocation order (convert_blocks.c's window), the computed tables, each
 * stack's text and memscope_dump (unless o->no_dump). */
#include "convert_internal.h"

static int full_open(struct conv *c)
{
    /* Big pages for the full database's big tables (sink_compact.c has the compact one's). */
    return conv__open_file(c, "PRAGMA page_size=65536; PRAGMA cache_size=-262144;");
}

static int full_pass2_begin(struct conv *c)
{
    (void)c;
    conv__fault_point();
    return 0;
}

static int full_event(struct conv *c, const struct stream *s, const struct conv_event *e)
{
    if (e->kind == MS_KIND_MALLOC || e->kind == MS_KIND_FREE) {
        /* counted for the computed tables (site_stats, the series) as in a compact one */
        int rc = conv__compact_event(c, s, e->kind, e->layer, e->have_size ? e->size : 0, e->stack,
                                     e->alloc_id, c->next_event + 1);
        if (rc < 0)
            return rc;
    }
    return conv__event_row(c, s, e);
}

static int full_block(struct conv *c, struct proc *p, const struct closed_block *cb)
{
    (void)p;
    int rc = conv__live_at_end(c, cb);
    return rc == 0 ? conv__write_block(c, cb) : rc;
}

static char *full_python_trace_sql(unsigned long long pid, const char *cols)
{
    /* real tables: Insight looks them up with type = 'table', adds a Depth column and
     * updates rows */
    return sqlite3_mprintf("CREATE TABLE IF NOT EXISTS python_trace_%llu (\"FuncInfo\" "
                           "TEXT, \"StartTime(ns)\" INTEGER, \"EndTime(ns)\" INTEGER, "
                           "\"Thread Id\" INTEGER, \"Process Id\" INTEGER); INSERT INTO "
                           "python_trace_%llu SELECT %s FROM python_trace WHERE \"Process Id\" "
                           "= %llu ORDER BY rowid",
                           pid, pid, cols, pid);
}

static int full_finish(struct conv *c)
{
    int rc = conv__flush_rows(c);
    if (rc == 0)
        rc = conv__computed_write(c);
    if (rc == 0) /* the full database holds each stack's text (memscope_dump) */
        rc = ms_stack_text_fill(c->db, c->err, c->errlen);
    return rc < 0 || c->o->no_dump ? rc : ms_dump_create(c->db, c->err, c->errlen);
}

const struct conv_sink conv__sink_full = {
    .file = 1,
    .sym_thread = 0,
    .open = full_open,
    .pass2_begin = full_pass2_begin,
    .event = full_event,
    .block = full_block,
    .step = conv__step_row,
    .range = conv__range_row,
    .stack = conv__stack_row,
    .usage = conv__usage_row,
    .python_trace_sql = full_python_trace_sql,
    .finish = full_finish,
};

/* sink_compact.c: the compact database's sink (convert_sink.h, docs/database.md): no MALLOC or
 * FREE rows (the packed traces hold them; their ids are taken as in a full database), the
 * blocks rows the analyses read (convert_compact.c decides which, a thread of
 * convert_blocks.c writes them during pass 2), the computed tables, and the traces packed
 * into trace_files on other threads while the conversion runs. */
#include "convert_internal.h"

static int compact_open(struct conv *c)
{
    int rc = conv__compact_start(c); /* packing the traces, beside pass 1's reading */
    /* The compact database has small tables (one page each at least: 0.5 MB for a small
     * program's) beside its blobs, its blocks rows and its stacks rows (a PyTorch script's:
     * 1.8 KB of Python stack text each, two to a 4 KiB page and most of a page left over):
     * 16 KiB pages make it 11% smaller and 3% faster to write than 4 KiB ones
     * (bench/RESULTS.md). Its pages are mostly the traces, written once: a small cache
     * (4 MiB: cc1's conversion 4% faster than with 16, 12 MB smaller; 64 MiB was 12% slower:
     * memory first touched costs more than pages read again). */
    return rc < 0 ? rc : conv__open_file(c, "PRAGMA page_size=16384; PRAGMA cache_size=-4096;");
}

static int compact_pass2_begin(struct conv *c)
{
    conv__fault_point();
    return conv__kept_start(c);
}

static int compact_event(struct conv *c, const struct stream *s, const struct conv_event *e)
{
    if (e->kind == MS_KIND_MALLOC || e->kind == MS_KIND_FREE) {
        int rc = conv__compact_event(c, s, e->kind, e->layer, e->have_size ? e->size : 0, e->stack,
                                     e->alloc_id, c->next_event + 1);
        if (rc < 0)
            return rc;
        c->next_event++; /* in the packed trace only; the id is taken as in a full one */
        c->attr = NULL;
        return 0;
    }
    return conv__event_row(c, s, e);
}

static int compact_block(struct conv *c, struct proc *p, const struct closed_block *cb)
{
    return conv__compact_block(c, p, cb);
}

char *conv__python_trace_view_sql(unsigned long long pid, const char *cols)
{
    return sqlite3_mprintf("CREATE VIEW IF NOT EXISTS python_trace_%llu AS SELECT %s "
                           "FROM python_trace WHERE \"Process Id\" = %llu",
                           pid, cols, pid);
}

static int compact_finish(struct conv *c)
{
    int rc = conv__compact_write_blocks(c);
    if (rc == 0)
        rc = conv__flush_rows(c);
    if (rc == 0)
        rc = conv__computed_write(c);
    /* the traces go into trace_files; memscope_dump, one row per event, and the stacks' text
     * are left to the full database (docs/database.md) */
    if (rc == 0)
        rc = conv__exec(c, "INSERT INTO meta VALUES ('store', 'compact')", "compact database");
    if (rc == 0 && !c->o->no_traces)
        rc = ms_embed_finish(&c->embed, c->db, c->err, c->errlen);
    return rc;
}

const struct conv_sink conv__sink_compact = {
    .file = 1,
    .sym_thread = 1,
    .open = compact_open,
    .pass2_begin = compact_pass2_begin,
    .event = compact_event,
    .block = compact_block,
    .step = conv__step_row,
    .range = conv__range_row,
    .stack = conv__stack_row,
    .usage = conv__usage_row,
    .python_trace_sql = conv__python_trace_view_sql,
    .finish = compact_finish,
};

/* sink_replay.c: the replay's sink (convert_sink.h, ms_store_replay): every events row, in id
 * order, to the caller's callback (o->sink) as an ms_store_row; no blocks rows, no computed
 * tables; the small tables the passes write go to a database in memory, nothing to a file. */
#include "convert_internal.h"

static int replay_open(struct conv *c)
{
    return conv__open_memory(c, "PRAGMA page_size=16384; PRAGMA cache_size=-4096;");
}

static int replay_pass2_begin(struct conv *c)
{
    (void)c;
    return 0;
}

static int replay_event(struct conv *c, const struct stream *s, const struct conv_event *e)
{
    struct ms_store_row row = {.id = ++c->next_event,
                               .ts_ns = s->ts,
                               .process_id = c->procs[s->proc].id,
                               .thread_id = s->thread,
                               .addr = e->addr,
                               .size = e->size,
                               .stack_id = e->stack,
                               .allocation_id = e->alloc_id,
                               .kind = e->kind,
                               .layer = e->layer,
                               .flags = e->flags,
                               .has_addr = e->have_addr,
                               .has_size = e->have_size,
                               .func = e->func,
                               .name = e->name,
                               .name_len = e->name_len,
                               .owner_id = c->row_owner};
    c->attr = NULL;
    c->row_owner = 0;
    int rc = c->o->sink(c->o->sink_ctx, &row);
    return rc < 0 ? conv__fail(c, rc, "stopped by the replay's reader") : 0;
}

static int replay_block(struct conv *c, struct proc *p, const struct closed_block *cb)
{
    (void)c, (void)p, (void)cb;
    return 0; /* a replay writes no blocks rows */
}

static int replay_finish(struct conv *c)
{
    return conv__flush_rows(c);
}

const struct conv_sink conv__sink_replay = {
    .file = 0,
    .sym_thread = 0,
    .open = replay_open,
    .pass2_begin = replay_pass2_begin,
    .event = replay_event,
    .block = replay_block,
    .step = conv__step_row,
    .range = conv__range_row,
    .stack = conv__stack_row,
    .usage = conv__usage_row,
    .python_trace_sql = conv__python_trace_view_sql,
    .finish = replay_finish,
};

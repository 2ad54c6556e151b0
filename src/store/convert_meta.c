/* convert_meta.c: the rows written once after pass 2, whatever the output: threads, processes
 * (with each layer's statistics) and meta (the run: command, times, host, sampling). */
#include "convert_internal.h"

#include "common/job_env.h"

int conv__write_threads(struct conv *c)
{
    sqlite3_stmt *st;
    int rc = conv__prepare(c, &st, "INSERT INTO threads VALUES (?,?,?,?,?,?)");
    for (size_t i = 0; i < c->nthreads && rc == 0; i++) {
        struct thread *t = &c->threads[i];
        sqlite3_bind_int64(st, 1, (int64_t)i + 1);
        sqlite3_bind_int64(st, 2, c->procs[t->proc].id);
        sqlite3_bind_int64(st, 3, t->tid);
        conv__bind_opt(st, 4, t->first_ns, t->events != 0);
        conv__bind_opt(st, 5, t->last_ns, t->events != 0);
        sqlite3_bind_int64(st, 6, (int64_t)t->events);
        rc = conv__step_reset(c, st, "insert thread");
    }
    sqlite3_finalize(st);
    return rc;
}

static int cmp_slot(const void *x, const void *y, void *ctx)
{
    const struct block *b = ctx;
    int64_t u = b[*(const uint32_t *)x].alloc_id, v = b[*(const uint32_t *)y].alloc_id;
    return u < v ? -1 : u > v;
}

/* processes rows, process_stats rows and the blocks still live; fills res. */
int conv__write_processes(struct conv *c)
{
    sqlite3_stmt *st = NULL, *ps = NULL, *hp = NULL;
    int rc = conv__prepare(c, &st, "INSERT INTO processes VALUES (?,?,?,?,?,?,?,?,?,?,?,?)");
    if (rc == 0)
        rc = conv__prepare(c, &ps, "INSERT INTO process_stats VALUES (?,?,?,?,?,?,?,?,?,?,?,?)");
    if (rc == 0)
        rc = conv__prepare(c, &hp, "INSERT INTO host_peaks VALUES (?,?,?,?,?)");
    for (size_t i = 0; i < c->nprocs && rc == 0; i++) {
        struct proc *p = &c->procs[i];
        const struct ms_trace_file_header *h = &p->tr.hdr;
        for (size_t k = 0; p->cmdline && k < p->cmdlen; k++) /* argv joined by spaces */
            if (!p->cmdline[k])
                p->cmdline[k] = ' ';
        size_t cl = p->cmdlen;
        while (p->cmdline && cl && p->cmdline[cl - 1] == ' ')
            cl--;
        uint64_t lost = h->lost_events + p->lost;
        sqlite3_bind_int64(st, 1, p->id);
        sqlite3_bind_int64(st, 2, (int64_t)h->pid);
        sqlite3_bind_int64(st, 3, (int64_t)(p->have_process ? p->ppid : h->ppid));
        sqlite3_bind_int64(st, 4, h->image_seq);
        if (p->exe)
            sqlite3_bind_text(st, 5, p->exe, -1, SQLITE_STATIC);
        else
            sqlite3_bind_null(st, 5);
        if (p->cmdline)
            sqlite3_bind_text(st, 6, p->cmdline, (int)cl, SQLITE_STATIC);
        else
            sqlite3_bind_null(st, 6);
        conv__bind_opt(st, 7, p->first_ns, p->have_events);
        conv__bind_opt(st, 8, p->last_ns, p->have_events);
        sqlite3_bind_text(st, 9, p->path, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 10, (int64_t)lost);
        sqlite3_bind_int64(st, 11, (int64_t)h->stopped_errno);
        if (p->tr.warning[0])
            sqlite3_bind_text(st, 12, p->tr.warning, -1, SQLITE_STATIC);
        else
            sqlite3_bind_null(st, 12);
        rc = conv__step_reset(c, st, "insert process");

        /* Blocks live at the end, in allocation order. */
        for (size_t l = 0; l < p->nls && rc == 0; l++) {
            if (!p->ls[l].used)
                continue;
            struct ms_u64map *live = &p->ls[l].live;
            uint32_t *slots = malloc((live->count + 1) * sizeof *slots);
            size_t ns = 0, pos = 0;
            uint64_t key;
            uint32_t val;
            if (!slots) {
                rc = conv__oom(c, "live blocks");
                break;
            }
            while (ms_u64map_next32(live, &pos, &key, &val))
                slots[ns++] = val;
            qsort_r(slots, ns, sizeof *slots, cmp_slot, c->blocks);
            for (size_t k = 0; k < ns && rc == 0; k++)
                rc = conv__block_close(c, p, (int)l, slots[k], 0, 0, 0);
            free(slots);
        }
        for (size_t l = 0; l < p->nls && rc == 0; l++) {
            if (!p->ls[l].used)
                continue;
            struct layer_stats *ls = &p->ls[l].st;
            sqlite3_bind_int64(ps, 1, p->id);
            sqlite3_bind_int64(ps, 2, (int64_t)l);
            sqlite3_bind_int64(ps, 3, ls->allocs);
            sqlite3_bind_int64(ps, 4, ls->frees);
            sqlite3_bind_int64(ps, 5, ls->alloc_bytes);
            sqlite3_bind_int64(ps, 6, ls->peak_bytes);
            conv__bind_opt(ps, 7, ls->peak_ns, ls->peak_bytes > 0);
            sqlite3_bind_int64(ps, 8, ls->live_bytes);
            sqlite3_bind_int64(ps, 9, ls->live_blocks);
            sqlite3_bind_int64(ps, 10, ls->unmatched);
            conv__bind_opt(ps, 11, ls->peak_event, ls->peak_bytes > 0);
            conv__bind_opt(ps, 12, ls->peak_alloc, ls->peak_bytes > 0);
            rc = conv__step_reset(c, ps, "insert process stats");
        }
        if (rc == 0) { /* the heap and the mmap layer together */
            sqlite3_bind_int64(hp, 1, p->id);
            sqlite3_bind_int64(hp, 2, p->host_peak);
            conv__bind_opt(hp, 3, p->host_peak_ns, p->host_peak > 0);
            conv__bind_opt(hp, 4, p->host_peak_event, p->host_peak > 0);
            conv__bind_opt(hp, 5, p->host_peak_alloc, p->host_peak > 0);
            rc = conv__step_reset(c, hp, "insert host peak");
        }
        c->res->damaged_chunks += p->tr.damaged_chunks;
        c->res->lost_events += lost;
        if (p->tr.warning[0] && !c->res->warning[0])
            snprintf(c->res->warning, sizeof c->res->warning, "%s: %s", p->name, p->tr.warning);
    }
    c->res->processes = c->nprocs;
    sqlite3_finalize(st);
    sqlite3_finalize(ps);
    sqlite3_finalize(hp);
    return rc;
}

/* Text is bound SQLITE_STATIC here and wherever the step follows at once, the buffer still
 * live: a copy (SQLITE_TRANSIENT) allocates, and a bind that fails leaves NULL silently. */
static int put_meta(struct conv *c, sqlite3_stmt *st, const char *key, const char *value)
{
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    if (value)
        sqlite3_bind_text(st, 2, value, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, 2);
    return conv__step_reset(c, st, "insert meta");
}

static int put_meta_int(struct conv *c, sqlite3_stmt *st, const char *key, long long v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", v);
    return put_meta(c, st, key, buf);
}

/* The traced command line as a JSON array: from the options, else from the PROCESS record of
 * the first process whose parent was not traced (the root of the run). */
static int command_json(struct conv *c, struct ms_buf *b)
{
    ms_buf_byte(b, '[');
    if (c->o->argv) {
        for (size_t i = 0; c->o->argv[i]; i++) {
            if (i)
                ms_buf_byte(b, ',');
            ms_buf_json(b, c->o->argv[i], strlen(c->o->argv[i]));
        }
    } else {
        const struct proc *root = NULL;
        for (size_t i = 0; i < c->nprocs && !root; i++) {
            const struct proc *p = &c->procs[i];
            int traced_parent = 0;
            for (size_t k = 0; k < c->nprocs && p->have_process; k++)
                traced_parent |= c->procs[k].tr.hdr.pid == p->ppid;
            if (p->have_process && !traced_parent)
                root = p;
        }
        if (!root && c->procs[0].have_process)
            root = &c->procs[0];
        size_t k = 0, n = root ? root->cmdlen : 0;
        for (int first = 1; k < n; first = 0) {
            size_t e = k;
            while (e < n && root->cmdline[e])
                e++;
            if (!first)
                ms_buf_byte(b, ',');
            ms_buf_json(b, root->cmdline + k, e - k);
            k = e + 1;
        }
    }
    ms_buf_byte(b, ']');
    return b->oom ? MS_ENOMEM : 0;
}

/* Sampling mode: meta sampling_bytes (B; the largest over the processes, which share the
 * environment that sets it) and the exact heap counts summed over the sampled processes'
 * headers (docs/database.md). Nothing for an exact run. */
static int write_sampling_meta(struct conv *c, sqlite3_stmt *st)
{
    uint64_t b = 0, allocs = 0, bytes = 0, frees = 0;
    for (size_t i = 0; i < c->nprocs; i++)
        if (c->procs[i].tr.hdr.sample_bytes > b)
            b = c->procs[i].tr.hdr.sample_bytes;
    if (!b)
        return 0;
    for (size_t i = 0; i < c->nprocs; i++) {
        const struct ms_trace_file_header *h = &c->procs[i].tr.hdr;
        if (!h->sample_bytes)
            continue;
        allocs += h->heap_allocs;
        bytes += h->heap_bytes;
        frees += h->heap_frees;
    }
    int rc = put_meta_int(c, st, "sampling_bytes", (long long)b);
    if (rc == 0)
        rc = put_meta_int(c, st, "heap_allocs_exact", (long long)allocs);
    if (rc == 0)
        rc = put_meta_int(c, st, "heap_alloc_bytes_exact", (long long)bytes);
    if (rc == 0)
        rc = put_meta_int(c, st, "heap_frees_exact", (long long)frees);
    return rc;
}

/* --trace-ring (docs/production.md): when a process's oldest events were dropped, the time from
 * which every process's events are all there (the latest first kept event of those processes),
 * and a note that says so. Nothing when no event was dropped. */
static int write_ring_meta(struct conv *c, sqlite3_stmt *st)
{
    int64_t from = 0;
    size_t n = 0;
    for (size_t i = 0; i < c->nprocs; i++) {
        const struct proc *p = &c->procs[i];
        if (!p->tr.hdr.ring_start)
            continue;
        if (p->have_events && (n == 0 || p->first_ns > from))
            from = p->first_ns;
        n++;
    }
    if (!n)
        return 0;
    char note[160];
    snprintf(note, sizeof note,
             "earlier events dropped (--trace-ring) in %zu process%s: blocks allocated before "
             "are unknown, their frees count as unmatched",
             n, n == 1 ? "" : "es");
    int rc = put_meta(c, st, "events_dropped", note);
    if (rc == 0)
        rc = put_meta_int(c, st, "events_dropped_before_ns", (long long)from);
    return rc;
}

int conv__write_meta(struct conv *c)
{
    sqlite3_stmt *st;
    int rc = conv__prepare(c, &st, "INSERT INTO meta VALUES (?,?)");
    if (rc < 0)
        return rc;
    struct ms_buf cmd = {0};
    char cwd[PATH_MAX], host[256], dir[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd))
        cwd[0] = 0;
    if (gethostname(host, sizeof host) < 0)
        host[0] = 0;
    host[sizeof host - 1] = 0;
    if (!realpath(c->o->trace_dir, dir))
        snprintf(dir, sizeof dir, "%s", c->o->trace_dir);
    int64_t start = 0, end = 0;
    unsigned depth = c->o->call_stack_c;
    for (size_t i = 0; i < c->nprocs; i++) {
        const struct proc *p = &c->procs[i];
        int64_t s = conv__epoch_ns(p, p->tr.hdr.start_mono_ns);
        if (i == 0 || s < start)
            start = s;
        if (p->have_events && p->last_ns > end)
            end = p->last_ns;
        if (!depth && (p->tr.hdr.flags & MS_TRACE_F_STACKS) && p->tr.hdr.max_depth > depth)
            depth = p->tr.hdr.max_depth;
    }
    if (end < start)
        end = start;
    if (command_json(c, &cmd) < 0)
        rc = conv__oom(c, "command line");
    if (rc == 0)
        rc = put_meta_int(c, st, "format_version", MS_DB_FORMAT_VERSION);
    if (rc == 0)
        rc = put_meta(c, st, "memscope_version", MEMSCOPE_VERSION);
    if (rc == 0)
        rc = put_meta(c, st, "command_line", cmd.p);
    if (rc == 0)
        rc = put_meta(c, st, "cwd", cwd);
    if (rc == 0)
        rc = put_meta(c, st, "hostname", host);
    if (rc == 0)
        rc = put_meta_int(c, st, "start_time_ns", start);
    if (rc == 0)
        rc = put_meta_int(c, st, "end_time_ns", end);
    if (rc == 0 && c->o->exit_status >= 0)
        rc = put_meta_int(c, st, "exit_status", c->o->exit_status);
    else if (rc == 0)
        rc = put_meta(c, st, "exit_status", NULL);
    if (rc == 0)
        rc = put_meta_int(c, st, "call_stack_c", depth);
    if (rc == 0)
        rc = put_meta(c, st, "events", c->o->events);
    if (rc == 0)
        rc = put_meta(c, st, "trace_dir", dir);
    if (rc == 0) /* the compact database has not every events row */
        rc = put_meta_int(c, st, "event_count", c->next_event);
    if (rc == 0 && c->next_event)
        rc = put_meta_int(c, st, "first_event_ns", c->first_event_ns);
    if (rc == 0 && c->next_event)
        rc = put_meta_int(c, st, "last_event_ns", c->last_event_ns);
    if (rc == 0)
        rc = write_sampling_meta(c, st);
    if (rc == 0)
        rc = write_ring_meta(c, st);
    /* a rank of a distributed job (common/job_env.h): what the Parquet export partitions by */
    struct ms_job_env je;
    ms_job_env_read(&je);
    if (rc == 0 && je.rank >= 0)
        rc = put_meta_int(c, st, "rank", je.rank);
    if (rc == 0 && je.local_rank >= 0)
        rc = put_meta_int(c, st, "local_rank", je.local_rank);
    if (rc == 0 && je.world_size >= 0)
        rc = put_meta_int(c, st, "world_size", je.world_size);
    if (rc == 0 && je.job[0])
        rc = put_meta(c, st, "job", je.job);
    free(cmd.p);
    sqlite3_finalize(st);
    return rc;
}

/* ---- Driver ---------------------------------------------------------------------------------- */

/* Writes the blocks rows still waiting and the events and blocks rows still buffered. */

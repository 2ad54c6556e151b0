/* convert_usage.c: the usage monitor's samples into the usage_samples table (docs/database.md,
 * docs/usage.md). The sampler of `memscope run` wrote them into <trace dir>/usage-<pid>.msu
 * (one file per run: several runs may share a trace directory)
 * (common/usage.h) on the agent's clock; each row gets its process's row id (the image of that
 * pid running at the sample's time), its time on the events' clock, and the heap and mmap bytes the trace had live in that
 * process then, noted in pass 2 as the merge reaches the sample's time, so that `analyze usage`
 * compares what the OS says with what the allocator said at the same moment.
 *
 * Workload: ten samples a second per process; a sample costs a comparison per event in pass 2
 * (done inline there) and a row. */
#include "convert_internal.h"

#include <stdint.h>

/* Orders samples by the time put in ts_ns (the run's epoch ns), then pid. */
static int cmp_sample(const void *a, const void *b)
{
    const struct ms_usage_sample *x = a, *y = b;
    if (x->ts_ns != y->ts_ns)
        return x->ts_ns < y->ts_ns ? -1 : 1;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    return (int)(x->flags & MS_USAGE_F_EXIT) - (int)(y->flags & MS_USAGE_F_EXIT);
}

/* c->procs is sorted by pid, then image. */
ptrdiff_t conv__proc_at(const struct conv *c, uint32_t pid, uint64_t mono)
{
    size_t lo = 0, hi = c->nprocs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->procs[mid].tr.hdr.pid < pid)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == c->nprocs || c->procs[lo].tr.hdr.pid != pid)
        return -1;
    ptrdiff_t best = (ptrdiff_t)lo;
    for (size_t i = lo; i < c->nprocs && c->procs[i].tr.hdr.pid == pid; i++)
        if (c->procs[i].tr.hdr.start_mono_ns <= mono)
            best = (ptrdiff_t)i;
    return best;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The usage files of the trace directory, in name order, into c->usage_paths. */
static int list_usage_files(struct conv *c)
{
    DIR *d = opendir(c->o->trace_dir);
    if (!d)
        return 0; /* the traces' listing has said what was wrong with it */
    size_t cap = 0;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!ms_usage_is_file(e->d_name) && !ms_pages_is_file(e->d_name))
            continue;
        if (c->nusage_paths == MS_USAGE_MAX_FILES)
            break; /* more than any set of runs into one directory makes */
        if (ms_grow((void **)&c->usage_paths, &cap, c->nusage_paths, sizeof *c->usage_paths, 4,
                    MS_USAGE_MAX_FILES) < 0) {
            rc = conv__oom(c, "usage files");
            break;
        }
        size_t len = strlen(c->o->trace_dir) + strlen(e->d_name) + 2;
        char *path = malloc(len);
        if (!path) {
            rc = conv__oom(c, "usage files");
            break;
        }
        snprintf(path, len, "%s/%s", c->o->trace_dir, e->d_name);
        c->usage_paths[c->nusage_paths++] = path;
    }
    closedir(d);
    if (c->nusage_paths)
        qsort(c->usage_paths, c->nusage_paths, sizeof *c->usage_paths, cmp_str);
    return rc;
}

int conv__usage_load(struct conv *c)
{
    if (!c->sink->file)
        return 0;
    int rc = list_usage_files(c);
    size_t cap = 0;
    for (size_t f = 0; rc == 0 && f < c->nusage_paths; f++) {
        struct ms_usage_sample *v;
        size_t n;
        const char *path = c->usage_paths[f], *name = strrchr(path, '/') + 1;
        if (!ms_usage_is_file(name))
            continue; /* a pages file: convert_cow.c */
        struct stat st;
        int lrc = lstat(path, &st) == 0 && !S_ISREG(st.st_mode) ? MS_EFORMAT
                                                                : ms_usage_load(path, &v, &n);
        if (lrc == MS_ENOMEM)
            return conv__oom(c, "usage samples");
        if (lrc < 0) {
            if (!c->res->warning[0])
                snprintf(c->res->warning, sizeof c->res->warning, "%.400s: %s; no usage samples",
                         name, ms_strerror(lrc));
            continue;
        }
        /* Each sample onto its process's image and the events' clock (epoch ns, as the
         * converter turns the agent's CLOCK_MONOTONIC stamps with that image's header); the
         * samples of a process that wrote no trace go: the run knows nothing else of it. The
         * process's index is kept in the sample's pid field from here on. */
        for (size_t i = 0; i < n && rc == 0; i++) {
            ptrdiff_t k = conv__proc_at(c, v[i].pid, v[i].ts_ns);
            if (k < 0)
                continue;
            if (c->nusage == MS_USAGE_MAX_RECORDS)
                break;
            if (ms_grow((void **)&c->usage, &cap, c->nusage, sizeof *c->usage, 256,
                        MS_USAGE_MAX_RECORDS) < 0) {
                rc = conv__oom(c, "usage samples");
                break;
            }
            const struct ms_trace_file_header *h = &c->procs[k].tr.hdr;
            struct ms_usage_sample *s = &c->usage[c->nusage++];
            *s = v[i];
            s->ts_ns = v[i].ts_ns - h->start_mono_ns + h->start_real_ns;
            s->pid = (uint32_t)k;
        }
        free(v);
    }
    if (rc == 0)
        rc = conv__cow_load(c);
    if (rc < 0 || !c->nusage)
        return rc;
    qsort(c->usage, c->nusage, sizeof *c->usage, cmp_sample);
    c->usage_live = calloc(c->nusage + 1, sizeof *c->usage_live);
    if (!c->usage_live)
        return conv__oom(c, "usage samples");
    return 0;
}

void conv__usage_until(struct conv *c, int64_t ts)
{
    for (; c->usage_next < c->nusage && (int64_t)c->usage[c->usage_next].ts_ns < ts;
         c->usage_next++) {
        const struct proc *p = &c->procs[c->usage[c->usage_next].pid];
        c->usage_live[c->usage_next] = p->ls[MS_LAYER_HEAP].st.live_bytes +
                                       p->ls[MS_LAYER_MMAP].st.live_bytes + p->inherited_live;
    }
}

int conv__usage_write(struct conv *c)
{
    if (!c->nusage || !c->sink->file)
        return 0;
    conv__usage_until(c, INT64_MAX);
    int rc = 0;
    for (size_t i = 0; i < c->nusage && rc == 0; i++) {
        const struct ms_usage_sample *s = &c->usage[i];
        int exited = (s->flags & MS_USAGE_F_EXIT) != 0;
        int status = exited || (s->flags & MS_USAGE_F_STATUS);
        int smaps = exited || (s->flags & MS_USAGE_F_SMAPS);
        struct conv_usage u = {.process_id = c->procs[s->pid].id,
                               .ts_ns = s->ts_ns,
                               .live_bytes = exited ? 0 : c->usage_live[i],
                               .exited = exited};
        const struct {
            uint64_t v;
            int have;
        } cols[CONV_USAGE_NCOLS] = {
            [CONV_USAGE_RSS_ANON] = {s->rss_anon, status},
            [CONV_USAGE_RSS_FILE] = {s->rss_file, status},
            [CONV_USAGE_RSS_SHMEM] = {s->rss_shmem, status},
            [CONV_USAGE_STACK] = {s->stack, status},
            [CONV_USAGE_SWAP] = {s->swap, status},
            [CONV_USAGE_PSS] = {s->pss, smaps},
            [CONV_USAGE_USS] = {s->uss, smaps},
            [CONV_USAGE_THREADS] = {s->threads, status},
            [CONV_USAGE_CGROUP_CURRENT] = {s->cg_current,
                                           !exited && (s->flags & MS_USAGE_F_CGROUP)},
            [CONV_USAGE_CGROUP_MAX] = {s->cg_max, !exited && (s->flags & MS_USAGE_F_CG_MAX)},
            [CONV_USAGE_PRIVATE_ANON] = {s->private_anon, !exited && (s->flags & MS_USAGE_F_PAGES)},
        };
        for (int k = 0; k < CONV_USAGE_NCOLS; k++) {
            u.v[k] = cols[k].v;
            u.have[k] = cols[k].have != 0;
        }
        rc = c->sink->usage(c, &u);
    }
    return rc;
}

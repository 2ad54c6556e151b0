/* usage_sampler.c: the sampling thread of `memscope run --usage-interval` (usage_sampler.h).
 *
 * Each tick it lists the trace directory (every traced process, children and grandchildren,
 * opens <pid>.<n>.mst there when its agent starts), adds the pids it has not seen, reads each
 * live one's figures (common/usage.c) and appends one record per process to the usage file with
 * a single write. A process found gone (or a zombie, whose memory is already released) gets an
 * exit record, at the time it was seen gone, and is not read again. Its last figures are thus
 * those of the last tick before it ended: at most one interval before its end.
 *
 * A process whose latest trace header says it began as a fork (MS_TRACE_F_FORKED) also gets
 * its pagemap walked (common/usage_pages.h) at the pace the walk's cost allows (walk()); the
 * walk with the most private pages is appended to usage-<root>.msp (pages_flush), for the
 * conversion to map onto the parent's blocks (copy-on-write, docs/usage.md).
 *
 * Workload: a few processes, ten ticks a second; each tick costs an fstat of the directory (a
 * listing only when it may have changed: dir_changed), a pread of each process's status (its
 * /proc files stay open: struct ms_usage_proc, which also keeps a pid reused by another process
 * after a traced one's end from being read as it), one read of the cgroup's files for all the
 * processes in it, and at their pace (MS_USAGE_PACE) PSS/USS reads and a forked process's walk
 * (about 8 ms of CPU per GiB mapped). bench/RESULTS.md has what it costs. NEEDSWORK: a
 * process past the first MS_USAGE_KEEP_MAX live ones has its files opened at each read, and
 * could be another process reusing its pid. */
#include "usage_sampler.h"

#include "common/files.h"
#include "common/usage.h"
#include "common/usage_pages.h"
#include "trace/format.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define MAX_PROCS 4096 /* processes sampled in one run; later ones are not */
/* The trace directory is listed again while its last change is more recent than this before
 * the last listing: a file made later in the same tick of the file system's clock would not
 * change its time. Far above any file system's timestamp granularity. */
#define RESCAN_NS 1000000000ull

struct usage_proc {
    pid_t pid;
    int done;
    struct ms_usage_proc rd; /* its /proc files, kept open, and the PSS/USS pace */
    struct ms_usage_cgroup cg;
    /* Copy-on-write (usage_pages.h): whether its latest image (the trace <pid>.<n>.mst of the
     * highest n whose header was read: hdr_n) began as a fork; the next walk's time; the walk
     * of the most private pages not yet written (pend) and the bytes of the last one written. */
    long hdr_n;
    int forked;
    uint64_t next_walk_ns;
    struct ms_pages_walk cur, pend;
    int have_pend;
    uint64_t written_bytes;
};

static void add_pid(struct usage_sampler *u, pid_t pid)
{
    for (size_t i = 0; i < u->nprocs; i++)
        if (u->procs[i].pid == pid)
            return;
    if (u->nprocs >= MAX_PROCS)
        return;
    if (u->nprocs == u->cap) {
        size_t nc = u->cap ? u->cap * 2 : 16;
        struct usage_proc *np = realloc(u->procs, nc * sizeof *np);
        if (!np)
            return; /* sampled from a later tick, when memory allows */
        u->procs = np;
        u->cap = nc;
    }
    struct usage_proc *p = &u->procs[u->nprocs++];
    memset(p, 0, sizeof *p);
    p->pid = pid;
    p->hdr_n = -1;
    ms_usage_proc_init(&p->rd, pid, u->kept < MS_USAGE_KEEP_MAX);
    u->kept += p->rd.keep;
    ms_usage_cgroup_find(pid, &p->cg);
}

/* Closes p's /proc files once it is done with (ended, or not readable). */
static void proc_done(struct usage_sampler *u, struct usage_proc *p)
{
    p->done = 1;
    u->smaps_reads += p->rd.smaps_reads;
    u->smaps_cpu_ns += p->rd.smaps_cpu_ns;
    u->kept -= p->rd.keep;
    ms_usage_proc_release(&p->rd);
    ms_usage_cgroup_release(&p->cg);
}

static struct usage_proc *find_proc(struct usage_sampler *u, pid_t pid)
{
    for (size_t i = 0; i < u->nprocs; i++)
        if (u->procs[i].pid == pid)
            return &u->procs[i];
    return NULL;
}

/* Notes whether trace image n of p (the file name) began as a fork: read from its header's
 * flags once, and only for an image later than the last one read (an exec replaces the copy).
 * A header not complete yet (its magic is written last) is read again at the next tick. */
static void note_image(struct usage_sampler *u, struct usage_proc *p, long n, const char *name)
{
    if (!p || n <= p->hdr_n)
        return;
    char path[sizeof u->dir + 300];
    snprintf(path, sizeof path, "%s/%.255s", u->dir, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return;
    struct ms_trace_file_header h;
    ssize_t r = pread(fd, &h, sizeof h, 0);
    close(fd);
    if (r != (ssize_t)sizeof h || memcmp(h.magic, MS_TRACE_MAGIC, 8) != 0) {
        u->rescan = 1; /* read again at the next listing, which must come */
        return;
    }
    p->hdr_n = n;
    p->forked = (h.flags & MS_TRACE_F_FORKED) != 0;
}

/* Whether the trace directory may have changed since it was last listed: its time changed, or
 * changed less than RESCAN_NS before that listing, or the listing left something to read again
 * (a trace header not complete yet, a process not added for want of memory). One fstat when
 * nothing changed: a listing costs tens of microseconds of CPU, ten times a second. */
static int dir_changed(struct usage_sampler *u)
{
    struct stat st;
    if (u->rescan || fstat(dirfd(u->dirp), &st) < 0)
        return 1;
    uint64_t m = (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec;
    return m != u->dir_mtime_ns || u->listed_real_ns < m + RESCAN_NS;
}

/* The pids of the traces in the directory: "<pid>.<n>.mst", when it may have changed. */
static void scan_dir(struct usage_sampler *u)
{
    if (!u->dirp && !(u->dirp = opendir(u->dir)))
        return;
    if (!dir_changed(u))
        return;
    struct stat st;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    u->rescan = fstat(dirfd(u->dirp), &st) < 0;
    u->dir_mtime_ns = (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec;
    u->listed_real_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
    u->listings++;
    rewinddir(u->dirp);
    struct dirent *e;
    while ((e = readdir(u->dirp))) {
        char *end;
        unsigned long pid = strtoul(e->d_name, &end, 10);
        size_t len = strlen(e->d_name);
        if (end != e->d_name && *end == '.' && len > 4 && !strcmp(e->d_name + len - 4, ".mst") &&
            pid > 0 && pid < (1ul << 22)) {
            size_t before = u->nprocs;
            add_pid(u, (pid_t)pid);
            struct usage_proc *p = find_proc(u, (pid_t)pid);
            if (!p && u->nprocs == before && before < MAX_PROCS)
                u->rescan = 1; /* not added for want of memory: at a later tick */
            char *end2;
            long n = strtol(end + 1, &end2, 10);
            if (end2 != end + 1 && *end2 == '.' && n >= 0)
                note_image(u, p, n, e->d_name);
        }
    }
}

/* Appends n bytes to the usage file. A failed write, or one that would pass the file size
 * limit (which would raise SIGXFSZ and end memscope), ends the file: what is in it stays. */
static void append(struct usage_sampler *u, const unsigned char *buf, size_t n)
{
    if (u->write_failed)
        return;
    if (u->size + n > u->size_limit || write(u->fd, buf, n) != (ssize_t)n) {
        u->write_failed = 1;
        return;
    }
    u->size += n;
}

/* Writes p's pending walk into the pages file (usage-<root>.msp, created at the first): one
 * write per walk. Failures end the file as append's do for the usage file. */
static void pages_flush(struct usage_sampler *u, struct usage_proc *p)
{
    if (!p->have_pend)
        return;
    p->have_pend = 0;
    p->written_bytes = p->pend.bytes;
    if (u->pwrite_failed)
        return;
    if (u->pfd < 0) {
        char path[sizeof u->dir + 64];
        snprintf(path, sizeof path, "%s/" MS_USAGE_PREFIX "%d" MS_PAGES_SUFFIX, u->dir,
                 (int)u->root);
        unsigned char hdr[MS_PAGES_HEADER];
        ms_pages_header(hdr);
        u->pfd = ms_file_create(path);
        if (u->pfd < 0 || sizeof hdr > u->size_limit ||
            write(u->pfd, hdr, sizeof hdr) != (ssize_t)sizeof hdr) {
            u->pwrite_failed = 1;
            return;
        }
        u->psize = sizeof hdr;
    }
    unsigned char rec[MS_PAGES_RECORD];
    ms_pages_encode(&p->pend, rec);
    struct iovec iov[2] = {{rec, sizeof rec}, {p->pend.r, p->pend.n * sizeof *p->pend.r}};
    uint64_t n = sizeof rec + iov[1].iov_len;
    if (u->psize + n > u->size_limit || writev(u->pfd, iov, 2) != (ssize_t)n) {
        u->pwrite_failed = 1;
        return;
    }
    u->psize += n;
    u->walks_written++;
}

/* Walks forked process p's pagemap when its pace allows (after a walk that cost C of this
 * thread's CPU, not again before MS_USAGE_PACE * C * the number of forked processes being
 * walked: all walks together take at most 1/MS_USAGE_PACE of a core, however many workers),
 * into s's private_anon. A walk with more private pages than any before it becomes the pending one,
 * written at once when it has 1/64 more than the last written (so that a growing worker's file
 * holds few walks), else when the process ends or the sampler stops: the file's last walk of a
 * process is always its largest. */
static void walk(struct usage_sampler *u, struct usage_proc *p, struct ms_usage_sample *s)
{
    uint64_t now = s->ts_ns;
    if (!p->forked || now < p->next_walk_ns)
        return;
    struct timespec c0, c1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    int rc = ms_pages_walk(p->pid, &p->cur);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    uint64_t cost = (uint64_t)(c1.tv_sec - c0.tv_sec) * 1000000000u + (uint64_t)c1.tv_nsec -
                    (uint64_t)c0.tv_nsec;
    u->walk_cpu_ns += cost;
    u->walks++;
    uint64_t forked = 0;
    for (size_t i = 0; i < u->nprocs; i++)
        forked += u->procs[i].forked && !u->procs[i].done;
    p->next_walk_ns = now + MS_USAGE_PACE * cost * (forked ? forked : 1);
    if (rc < 0)
        return; /* gone meanwhile, or too many ranges: no figure */
    s->flags |= MS_USAGE_F_PAGES;
    s->private_anon = p->cur.bytes;
    uint64_t best = p->have_pend ? p->pend.bytes : p->written_bytes;
    if (p->cur.bytes <= best)
        return;
    struct ms_pages_walk t = p->pend;
    p->pend = p->cur;
    p->cur = t;
    p->have_pend = 1;
    if (p->pend.bytes - p->written_bytes > p->written_bytes / 64)
        pages_flush(u, p);
}

/* One pass over every process not yet ended; writes the records. */
static void tick(struct usage_sampler *u)
{
    scan_dir(u);
    unsigned char buf[64 * MS_USAGE_RECORD];
    size_t nb = 0;
    unsigned alive = 0; /* PSS and USS: one budget for all (ms_usage_proc_read's share) */
    for (size_t i = 0; i < u->nprocs; i++)
        alive += !u->procs[i].done;
    /* the cgroup of the last process read: the next ones in it (usually all) take its figures */
    const struct ms_usage_cgroup *cg_last = NULL;
    struct ms_usage_sample cg_s = {0};
    for (size_t i = 0; i < u->nprocs; i++) {
        struct usage_proc *p = &u->procs[i];
        if (p->done)
            continue;
        struct ms_usage_sample s;
        int rc = ms_usage_proc_read(&p->rd, alive, &s);
        if (rc == 0 && cg_last && !strcmp(cg_last->current, p->cg.current)) {
            s.cg_current = cg_s.cg_current;
            s.cg_max = cg_s.cg_max;
            s.flags |= cg_s.flags & (MS_USAGE_F_CGROUP | MS_USAGE_F_CG_MAX);
        } else if (rc == 0) {
            ms_usage_read_cgroup(&p->cg, p->rd.keep, &s);
            cg_last = &p->cg;
            cg_s = s;
        }
        if (rc == 0)
            walk(u, p, &s);
        if (rc < 0) /* -ESRCH: ended; else another user's process: nothing to read, ever */
            proc_done(u, p);
        if (rc == -ESRCH)
            s.flags = MS_USAGE_F_EXIT; /* figures zero: it holds nothing any more */
        if (p->done) {
            pages_flush(u, p); /* its largest walk */
            ms_pages_walk_release(&p->cur);
            ms_pages_walk_release(&p->pend);
            if (rc != -ESRCH)
                continue;
        }
        ms_usage_encode(&s, buf + nb);
        nb += MS_USAGE_RECORD;
        u->samples++;
        if (nb == sizeof buf) {
            append(u, buf, nb);
            nb = 0;
        }
    }
    if (nb)
        append(u, buf, nb);
    u->ticks++;
}

static void *run(void *arg)
{
    struct usage_sampler *u = arg;
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    pthread_mutex_lock(&u->mu);
    while (!u->stop) {
        pthread_mutex_unlock(&u->mu);
        tick(u);
        uint64_t ns = (uint64_t)next.tv_nsec + u->interval_ns;
        next.tv_sec += (time_t)(ns / 1000000000u);
        next.tv_nsec = (long)(ns % 1000000000u);
        pthread_mutex_lock(&u->mu);
        while (!u->stop && pthread_cond_timedwait(&u->cv, &u->mu, &next) != ETIMEDOUT)
            ;
    }
    pthread_mutex_unlock(&u->mu);
    struct timespec cpu;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) == 0)
        u->cpu_ns = (uint64_t)cpu.tv_sec * 1000000000u + (uint64_t)cpu.tv_nsec;
    return NULL;
}

int usage_sampler_start(struct usage_sampler *u, const char *trace_dir, pid_t root,
                        double interval_s)
{
    memset(u, 0, sizeof *u);
    u->fd = u->pfd = -1;
    if (!(interval_s > 0) || strlen(trace_dir) + 64 >= sizeof u->dir)
        return -EINVAL;
    snprintf(u->dir, sizeof u->dir, "%s", trace_dir);
    u->root = root;
    u->interval_ns = (uint64_t)(interval_s * 1e9);
    if (u->interval_ns < 1000000)
        u->interval_ns = 1000000; /* 1 ms at the most often */
    char path[sizeof u->dir + 64];
    snprintf(path, sizeof path, "%s/" MS_USAGE_PREFIX "%d" MS_USAGE_SUFFIX, trace_dir, (int)root);
    u->fd = ms_file_create(path); /* new, 0600, never through a link (docs/cli.md, "Files") */
    if (u->fd < 0)
        return u->fd;
    struct rlimit fsize;
    u->size_limit = getrlimit(RLIMIT_FSIZE, &fsize) == 0 && fsize.rlim_cur != RLIM_INFINITY
                        ? (uint64_t)fsize.rlim_cur
                        : UINT64_MAX;
    unsigned char hdr[MS_USAGE_HEADER];
    ms_usage_header(hdr);
    if (sizeof hdr > u->size_limit || write(u->fd, hdr, sizeof hdr) != (ssize_t)sizeof hdr) {
        int e = sizeof hdr > u->size_limit ? EFBIG : errno ? errno : EIO;
        close(u->fd);
        u->fd = -1;
        return -e;
    }
    u->size = sizeof hdr;
    add_pid(u, root);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&u->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&u->mu, NULL);
    int rc = pthread_create(&u->thread, NULL, run, u);
    if (rc != 0) {
        pthread_cond_destroy(&u->cv);
        pthread_mutex_destroy(&u->mu);
        close(u->fd);
        u->fd = -1;
        return -rc;
    }
    u->running = 1;
    return 0;
}

void usage_sampler_stop(struct usage_sampler *u)
{
    if (!u->running)
        return;
    pthread_mutex_lock(&u->mu);
    u->stop = 1;
    pthread_cond_signal(&u->cv);
    pthread_mutex_unlock(&u->mu);
    pthread_join(u->thread, NULL);
    tick(u); /* the exit records of the processes that ended since the last tick */
    for (size_t i = 0; i < u->nprocs; i++) {
        struct usage_proc *p = &u->procs[i];
        pages_flush(u, p); /* the largest walk of each process still running */
        ms_pages_walk_release(&p->cur);
        ms_pages_walk_release(&p->pend);
        if (!p->done)
            proc_done(u, p);
    }
    if (u->dirp)
        closedir(u->dirp);
    u->dirp = NULL;
    pthread_cond_destroy(&u->cv);
    pthread_mutex_destroy(&u->mu);
    close(u->fd);
    u->fd = -1;
    if (u->pfd >= 0)
        close(u->pfd);
    u->pfd = -1;
    free(u->procs);
    u->procs = NULL;
    u->running = 0;
}

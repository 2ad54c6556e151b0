/* usage_sampler.c: the sampling thread of `memscope run --usage-interval` (usage_sampler.h).
 *
 * Each tick it lists the trace directory (every traced process, children and grandchildren,
 * opens <pid>.<n>.mst there when its agent starts), adds the pids it has not seen, reads each
 * live one's figures (common/usage.c) and appends one record per process to the usage file with
 * a single write. A process found gone (or a zombie, whose memory is already released) gets an
 * exit record, at the time it was seen gone, and is not read again. Its last figures are thus
 * those of the last tick before it ended: at most one interval before its end.
 *
 * Workload: a few processes, ten ticks a second; each tick costs a readdir and two or three
 * small /proc reads per process. NEEDSWORK: a pid reused by an unrelated process within one
 * interval of a traced one's end would be sampled as that one; /proc/PID/stat's start time
 * would tell them apart. */
#include "usage_sampler.h"

#include "common/files.h"
#include "common/usage.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define MAX_PROCS 4096 /* processes sampled in one run; later ones are not */

struct usage_proc {
    pid_t pid;
    int done;
    struct ms_usage_cgroup cg;
    uint64_t next_smaps_ns; /* PSS and USS are read again from this time on */
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
    ms_usage_cgroup_find(pid, &p->cg);
}

/* The pids of the traces in the directory: "<pid>.<n>.mst". */
static void scan_dir(struct usage_sampler *u)
{
    DIR *d = opendir(u->dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        unsigned long pid = strtoul(e->d_name, &end, 10);
        size_t len = strlen(e->d_name);
        if (end != e->d_name && *end == '.' && len > 4 && !strcmp(e->d_name + len - 4, ".mst") &&
            pid > 0 && pid < (1ul << 22))
            add_pid(u, (pid_t)pid);
    }
    closedir(d);
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

/* One pass over every process not yet ended; writes the records. */
static void tick(struct usage_sampler *u)
{
    scan_dir(u);
    unsigned char buf[64 * MS_USAGE_RECORD];
    size_t nb = 0;
    for (size_t i = 0; i < u->nprocs; i++) {
        struct usage_proc *p = &u->procs[i];
        if (p->done)
            continue;
        struct ms_usage_sample s;
        int rc = ms_usage_read_paced(p->pid, &p->cg, &p->next_smaps_ns, &s);
        if (rc == -ESRCH) {
            p->done = 1;
            s.flags = MS_USAGE_F_EXIT; /* figures zero: it holds nothing any more */
        } else if (rc < 0) {
            p->done = 1; /* another user's process: nothing to read, now or later */
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
    u->fd = -1;
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
    pthread_cond_destroy(&u->cv);
    pthread_mutex_destroy(&u->mu);
    close(u->fd);
    u->fd = -1;
    free(u->procs);
    u->procs = NULL;
    u->running = 0;
}

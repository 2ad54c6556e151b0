/* usage.c: one process's memory figures from /proc (status, smaps_rollup) and its cgroup, and
 * the sampler file's encoder and bounded reader (layout in usage.h).
 *
 * Called by the sampler of `memscope run` (src/cli/usage_sampler.c) about ten times a second
 * per traced process, by `memscope usage --pid`, and by the conversion (the reader, once). A
 * sample reads status (a pread of a descriptor kept open, struct ms_usage_proc: about 20 us of
 * CPU with cold caches, against 26 us for an open, two reads and a close), the cgroup's two
 * files, and at a pace smaps_rollup, which makes the kernel walk the process's page tables
 * (1-3 ms per 256 MiB resident in small pages): the sampler's main cost (MS_USAGE_PACE). */
#include "usage.h"
#include "bytes.h"

#include "ms_error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Reads the file at path into buf (NUL-terminated, at most len - 1 bytes). Returns the length
 * or a negative errno. */
static ssize_t read_small(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t n = 0;
    while (n + 1 < len) {
        ssize_t r = read(fd, buf + n, len - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            return -e;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    return (ssize_t)n;
}

/* The number after "key:" at the start of a line of text (kB lines in bytes when kb). */
static int field(const char *text, const char *key, int kb, uint64_t *out)
{
    size_t kl = strlen(key);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, key, kl) != 0 || p[kl] != ':')
            continue;
        char *end;
        unsigned long long v = strtoull(p + kl + 1, &end, 10);
        if (end == p + kl + 1)
            return 0;
        *out = kb ? (uint64_t)v * 1024 : (uint64_t)v;
        return 1;
    }
    return 0;
}

/* The number in the file at path, through *fd when fd (opened at the first read and kept open:
 * a cgroup file is made again at each read from offset 0), else opened for the read; *ok
 * whether one was read, *unlimited whether it said "max". */
static uint64_t read_u64_file(const char *path, int *fd, int *ok, int *unlimited)
{
    char buf[64];
    *ok = 0;
    *unlimited = 0;
    ssize_t n = -1;
    if (fd && *fd < 0 && path[0])
        *fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd && *fd >= 0) {
        do
            n = pread(*fd, buf, sizeof buf - 1, 0);
        while (n < 0 && errno == EINTR);
        if (n >= 0)
            buf[n] = '\0';
    } else if (!fd && path[0]) {
        n = read_small(path, buf, sizeof buf);
    }
    if (n <= 0)
        return 0;
    if (!strncmp(buf, "max", 3)) {
        *ok = 1;
        *unlimited = 1;
        return 0;
    }
    char *end;
    unsigned long long v = strtoull(buf, &end, 10);
    if (end == buf)
        return 0;
    *ok = 1;
    return (uint64_t)v;
}

void ms_usage_cgroup_release(struct ms_usage_cgroup *cg)
{
    if (cg->current_fd >= 0)
        close(cg->current_fd);
    if (cg->max_fd >= 0)
        close(cg->max_fd);
    cg->current_fd = cg->max_fd = -1;
}

int ms_usage_cgroup_find(pid_t pid, struct ms_usage_cgroup *cg)
{
    cg->current[0] = cg->max[0] = '\0';
    cg->current_fd = cg->max_fd = -1;
    char path[64], text[4096];
    snprintf(path, sizeof path, "/proc/%d/cgroup", (int)pid);
    ssize_t n = read_small(path, text, sizeof text);
    if (n < 0)
        return (int)n;
    const char *v2 = NULL, *v1 = NULL;
    for (char *save = NULL, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        if (!strncmp(l, "0::", 3))
            v2 = l + 3;
        char *c = strchr(l, ':');
        if (c && !strncmp(c, ":memory:", 8))
            v1 = c + 8;
    }
    struct stat st;
    if (v2) {
        snprintf(cg->current, sizeof cg->current, "/sys/fs/cgroup%s/memory.current", v2);
        if (stat(cg->current, &st) == 0) {
            snprintf(cg->max, sizeof cg->max, "/sys/fs/cgroup%s/memory.max", v2);
            return 0;
        }
    }
    if (v1) {
        snprintf(cg->current, sizeof cg->current, "/sys/fs/cgroup/memory%s/memory.usage_in_bytes",
                 v1);
        if (stat(cg->current, &st) == 0) {
            snprintf(cg->max, sizeof cg->max, "/sys/fs/cgroup/memory%s/memory.limit_in_bytes", v1);
            return 0;
        }
    }
    cg->current[0] = cg->max[0] = '\0';
    return -ENOENT;
}

static uint64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void ms_usage_proc_init(struct ms_usage_proc *p, pid_t pid, int keep)
{
    memset(p, 0, sizeof *p);
    p->pid = pid;
    p->keep = keep;
    p->status_fd = p->smaps_fd = -1;
}

void ms_usage_proc_release(struct ms_usage_proc *p)
{
    if (p->status_fd >= 0)
        close(p->status_fd);
    if (p->smaps_fd >= 0)
        close(p->smaps_fd);
    p->status_fd = p->smaps_fd = -1;
}

/* Reads p's /proc/PID/<name> into buf (NUL-terminated, at most len - 1 bytes) through *fd,
 * opened at the first read and kept open when p->keep. One pread from offset 0: a /proc file of
 * one record (seq_file's single_open, as status and smaps_rollup are) is made whole at each
 * read from offset 0 and returned whole when it fits; what does not fit is not needed (the
 * fields read are in the first lines). Returns the length or a negative errno. */
static ssize_t read_proc(struct ms_usage_proc *p, int *fd, const char *name, char *buf, size_t len)
{
    if (*fd < 0) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/%s", (int)p->pid, name);
        if ((*fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
            return -errno;
    }
    ssize_t r;
    do
        r = pread(*fd, buf, len - 1, 0);
    while (r < 0 && errno == EINTR);
    int e = errno;
    if (!p->keep || r < 0) {
        close(*fd);
        *fd = -1;
    }
    if (r < 0)
        return -e;
    buf[r] = '\0';
    return r;
}

/* The status part of a sample: s's time, pid and status fields. Returns as ms_usage_read. */
static int read_status(struct ms_usage_proc *p, struct ms_usage_sample *s)
{
    memset(s, 0, sizeof *s);
    s->ts_ns = clock_ns(CLOCK_MONOTONIC);
    s->pid = (uint32_t)p->pid;
    char text[4096];
    ssize_t n = read_proc(p, &p->status_fd, "status", text, sizeof text);
    if (n < 0)
        return n == -ENOENT ? -ESRCH : (int)n;
    uint64_t threads = 0;
    /* A zombie or a kernel thread has no memory lines: nothing left to sample. */
    if (!field(text, "RssAnon", 1, &s->rss_anon))
        return -ESRCH;
    field(text, "RssFile", 1, &s->rss_file);
    field(text, "RssShmem", 1, &s->rss_shmem);
    field(text, "VmStk", 1, &s->stack);
    field(text, "VmSwap", 1, &s->swap);
    field(text, "Threads", 0, &threads);
    s->threads = threads > UINT32_MAX ? UINT32_MAX : (uint32_t)threads;
    s->flags |= MS_USAGE_F_STATUS;
    return 0;
}

/* PSS and USS into s from smaps_rollup; its flag stays clear when it cannot be read. A kept
 * descriptor whose address space has gone (an exec: the read fails) is opened again once. */
static void read_smaps(struct ms_usage_proc *p, struct ms_usage_sample *s)
{
    char text[4096];
    uint64_t pc = 0, pd = 0;
    int kept = p->smaps_fd >= 0;
    ssize_t n = read_proc(p, &p->smaps_fd, "smaps_rollup", text, sizeof text);
    if (n <= 0 && kept) {
        if (p->smaps_fd >= 0)
            close(p->smaps_fd);
        p->smaps_fd = -1;
        n = read_proc(p, &p->smaps_fd, "smaps_rollup", text, sizeof text);
    }
    if (n > 0 && field(text, "Pss", 1, &s->pss) && field(text, "Private_Clean", 1, &pc) &&
        field(text, "Private_Dirty", 1, &pd)) {
        s->uss = pc + pd;
        s->flags |= MS_USAGE_F_SMAPS;
    } else {
        s->pss = 0;
    }
}

/* cg's figures into s, through its descriptors when fds. */
static void cgroup_figures(const struct ms_usage_cgroup *cg, int *cur_fd, int *max_fd,
                           struct ms_usage_sample *s)
{
    if (!cg || !cg->current[0])
        return;
    int ok, unl;
    s->cg_current = read_u64_file(cg->current, cur_fd, &ok, &unl);
    if (ok)
        s->flags |= MS_USAGE_F_CGROUP;
    uint64_t m = read_u64_file(cg->max, max_fd, &ok, &unl);
    if (ok && !unl && m < (1ull << 62)) {
        s->cg_max = m;
        s->flags |= MS_USAGE_F_CG_MAX;
    }
}

void ms_usage_read_cgroup(struct ms_usage_cgroup *cg, int keep, struct ms_usage_sample *s)
{
    if (keep)
        cgroup_figures(cg, &cg->current_fd, &cg->max_fd, s);
    else
        cgroup_figures(cg, NULL, NULL, s);
}

int ms_usage_read(pid_t pid, const struct ms_usage_cgroup *cg, int smaps, struct ms_usage_sample *s)
{
    struct ms_usage_proc p;
    ms_usage_proc_init(&p, pid, 0);
    int rc = read_status(&p, s);
    if (rc == 0 && smaps)
        read_smaps(&p, s);
    if (rc == 0)
        cgroup_figures(cg, NULL, NULL, s);
    ms_usage_proc_release(&p);
    return rc;
}

int ms_usage_proc_read(struct ms_usage_proc *p, unsigned share, struct ms_usage_sample *s)
{
    int rc = read_status(p, s);
    if (rc < 0 || s->ts_ns < p->next_smaps_ns)
        return rc;
    uint64_t cpu0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    read_smaps(p, s);
    uint64_t cost = clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    p->next_smaps_ns = s->ts_ns + MS_USAGE_PACE * (uint64_t)(share ? share : 1) * cost;
    p->smaps_reads++;
    p->smaps_cpu_ns += cost;
    return 0;
}

int ms_usage_read_paced(pid_t pid, const struct ms_usage_cgroup *cg, uint64_t *next_smaps_ns,
                        struct ms_usage_sample *s)
{
    return ms_usage_read_shared(pid, cg, next_smaps_ns, 1, s);
}

int ms_usage_read_shared(pid_t pid, const struct ms_usage_cgroup *cg, uint64_t *next_smaps_ns,
                         unsigned share, struct ms_usage_sample *s)
{
    struct ms_usage_proc p;
    ms_usage_proc_init(&p, pid, 0);
    p.next_smaps_ns = *next_smaps_ns;
    int rc = ms_usage_proc_read(&p, share, s);
    if (rc == 0)
        cgroup_figures(cg, NULL, NULL, s);
    *next_smaps_ns = p.next_smaps_ns;
    ms_usage_proc_release(&p);
    return rc;
}

int ms_usage_is_file(const char *name)
{
    size_t n = strlen(name), a = strlen(MS_USAGE_PREFIX), b = strlen(MS_USAGE_SUFFIX);
    return n > a + b && !strncmp(name, MS_USAGE_PREFIX, a) &&
           !strcmp(name + n - b, MS_USAGE_SUFFIX);
}

void ms_usage_header(unsigned char *out)
{
    memset(out, 0, MS_USAGE_HEADER);
    memcpy(out, MS_USAGE_MAGIC, 8);
    ms_put32(out + 8, MS_USAGE_VERSION);
    ms_put32(out + 12, MS_USAGE_RECORD);
}

void ms_usage_encode(const struct ms_usage_sample *s, unsigned char *out)
{
    memset(out, 0, MS_USAGE_RECORD);
    ms_put64(out, s->ts_ns);
    ms_put32(out + 8, s->pid);
    ms_put32(out + 12, s->flags);
    const uint64_t v[9] = {s->rss_anon, s->rss_file, s->rss_shmem,  s->stack, s->swap,
                           s->pss,      s->uss,      s->cg_current, s->cg_max};
    for (int i = 0; i < 9; i++)
        ms_put64(out + 16 + 8 * i, v[i]);
    ms_put32(out + 88, s->threads);
    uint64_t kib = s->private_anon / 1024;
    ms_put32(out + 92, kib > UINT32_MAX ? UINT32_MAX : (uint32_t)kib);
}

static void decode(const unsigned char *p, struct ms_usage_sample *s)
{
    s->ts_ns = ms_get64(p);
    s->pid = ms_get32(p + 8);
    s->flags = ms_get32(p + 12);
    uint64_t *v[9] = {&s->rss_anon, &s->rss_file, &s->rss_shmem,  &s->stack, &s->swap,
                      &s->pss,      &s->uss,      &s->cg_current, &s->cg_max};
    for (int i = 0; i < 9; i++)
        *v[i] = ms_get64(p + 16 + 8 * i);
    s->threads = ms_get32(p + 88);
    s->private_anon = (uint64_t)ms_get32(p + 92) * 1024;
}

/* Reads exactly len bytes at the file's position; returns 1, 0 at the end (or a partial
 * read: a record cut short), or a negative errno. */
static int read_full(int fd, unsigned char *buf, size_t len)
{
    size_t n = 0;
    while (n < len) {
        ssize_t r = read(fd, buf + n, len - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            return 0;
        n += (size_t)r;
    }
    return 1;
}

int ms_usage_load(const char *path, struct ms_usage_sample **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    unsigned char hdr[MS_USAGE_HEADER], rec[MS_USAGE_RECORD];
    int rc = fstat(fd, &st) < 0 ? -errno : S_ISREG(st.st_mode) ? 0 : MS_EFORMAT;
    if (rc == 0) {
        int r = read_full(fd, hdr, sizeof hdr);
        if (r < 0)
            rc = r;
        else if (r == 0 || memcmp(hdr, MS_USAGE_MAGIC, 8) != 0)
            rc = MS_EFORMAT;
        else if (ms_get32(hdr + 8) > MS_USAGE_VERSION)
            rc = MS_EVERSION;
        else if (ms_get32(hdr + 8) == 0 || ms_get32(hdr + 12) != MS_USAGE_RECORD)
            rc = MS_EFORMAT;
    }
    /* the records a file of this size holds, within the cap: one allocation */
    size_t count = 0;
    if (rc == 0 && (uint64_t)st.st_size > MS_USAGE_HEADER)
        count = (size_t)(((uint64_t)st.st_size - MS_USAGE_HEADER) / MS_USAGE_RECORD);
    if (count > MS_USAGE_MAX_RECORDS)
        count = MS_USAGE_MAX_RECORDS; /* the first 16 Mi: a longer file is no sampler's */
    struct ms_usage_sample *v = NULL;
    if (rc == 0 && count && !(v = calloc(count, sizeof *v)))
        rc = MS_ENOMEM;
    size_t got = 0;
    while (rc == 0 && got < count) {
        int r = read_full(fd, rec, sizeof rec);
        if (r < 0)
            rc = r;
        if (r <= 0)
            break; /* shorter than when it was measured: what was read is kept */
        decode(rec, &v[got++]);
    }
    close(fd);
    if (rc < 0) {
        free(v);
        return rc == -ENOMEM ? MS_ENOMEM : rc;
    }
    *out = v;
    *n = got;
    return 0;
}

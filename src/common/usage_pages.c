/* usage_pages.c: the walk of a process's pagemap for the pages it holds alone, and the pages
 * file's encoder and bounded reader (layout and meaning in usage_pages.h).
 *
 * Called by the sampler of `memscope run` (src/cli/usage_sampler.c) for forked processes, at a
 * pace its cost sets (docs/usage.md: about 1 ms of CPU per 1 GiB of mappings walked), and by
 * the conversion (the reader, once per run). */
#include "usage_pages.h"
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

#define PM_PRESENT (1ull << 63)
#define PM_EXCLUSIVE (1ull << 56)
#define PM_CHUNK 4096 /* pagemap entries read at once: 32 KiB */

void ms_pages_walk_release(struct ms_pages_walk *w)
{
    if (!w)
        return;
    free(w->r);
    w->r = NULL;
    w->n = w->cap = 0;
    w->bytes = 0;
}

/* Appends [start, start + len) to w, merged with the last range when adjacent. */
static int add_range(struct ms_pages_walk *w, uint64_t start, uint64_t len)
{
    w->bytes += len;
    if (w->n && w->r[w->n - 1].start + w->r[w->n - 1].len == start) {
        w->r[w->n - 1].len += len;
        return 0;
    }
    if (w->n == w->cap) {
        if (w->cap >= MS_PAGES_MAX_RANGES) {
            w->bytes -= len;
            return -ENOMEM;
        }
        size_t nc = w->cap ? w->cap * 2 : 256;
        struct ms_pages_range *nr = realloc(w->r, nc * sizeof *nr);
        if (!nr) {
            w->bytes -= len;
            return -ENOMEM;
        }
        w->r = nr;
        w->cap = nc;
    }
    w->r[w->n].start = start;
    w->r[w->n].len = len;
    w->n++;
    return 0;
}

/* Reads the whole file at path into a new NUL-terminated buffer (*out, the caller frees it),
 * at most MS_PAGES_MAPS_MAX bytes. Returns 0 or a negative errno. */
static int read_all(const char *path, char **out)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t len = 0, cap = 16384;
    char *buf = malloc(cap);
    int rc = buf ? 0 : -ENOMEM;
    while (rc == 0) {
        if (len + 1 == cap) {
            char *nb = cap >= MS_PAGES_MAPS_MAX ? NULL : realloc(buf, cap * 2);
            if (!nb) {
                rc = -ENOMEM;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + len, cap - 1 - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            rc = -errno;
        else if (r == 0)
            break;
        else
            len += (size_t)r;
    }
    close(fd);
    if (rc < 0) {
        free(buf);
        return rc;
    }
    buf[len] = '\0';
    *out = buf;
    return 0;
}

/* Whether a /proc/PID/maps line names a mapping to walk: private, writable and anonymous (no
 * inode), the heap or a named anonymous mapping, not the main thread's stack. */
static int walk_this(const char *perms, unsigned long inode, const char *name)
{
    if (perms[1] != 'w' || perms[3] != 'p' || inode != 0)
        return 0;
    return !name[0] || !strcmp(name, "[heap]") || !strncmp(name, "[anon:", 6);
}

/* Adds the pages of [lo, hi) that are present and exclusively mapped, from pagemap fd. */
static int walk_range(int fd, uint64_t lo, uint64_t hi, uint64_t page, struct ms_pages_walk *w)
{
    uint64_t ent[PM_CHUNK];
    uint64_t run_start = 0, run_len = 0;
    int rc = 0;
    for (uint64_t at = lo; at < hi && rc == 0;) {
        uint64_t want = (hi - at) / page;
        if (want > PM_CHUNK)
            want = PM_CHUNK;
        ssize_t r = pread(fd, ent, want * 8, (off_t)(at / page * 8));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return errno == ESRCH ? -ESRCH : -errno;
        if (r < 8)
            break; /* the mapping went away meanwhile */
        size_t got = (size_t)r / 8;
        for (size_t i = 0; i < got; i++, at += page) {
            if ((ent[i] & (PM_PRESENT | PM_EXCLUSIVE)) == (PM_PRESENT | PM_EXCLUSIVE)) {
                if (run_len && run_start + run_len == at) {
                    run_len += page;
                    continue;
                }
                if (run_len && (rc = add_range(w, run_start, run_len)) < 0)
                    break;
                run_start = at;
                run_len = page;
            }
        }
    }
    if (rc == 0 && run_len)
        rc = add_range(w, run_start, run_len);
    return rc;
}

int ms_pages_walk(pid_t pid, struct ms_pages_walk *w)
{
    w->n = 0;
    w->bytes = 0;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    w->ts_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    w->pid = (uint32_t)pid;
    long ps = sysconf(_SC_PAGESIZE);
    uint64_t page = ps > 0 ? (uint64_t)ps : 4096;
    char path[64], *maps;
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    int rc = read_all(path, &maps);
    if (rc < 0)
        return rc == -ENOENT ? -ESRCH : rc;
    snprintf(path, sizeof path, "/proc/%d/pagemap", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        rc = errno == ENOENT ? -ESRCH : -errno;
        free(maps);
        return rc;
    }
    uint64_t walked = 0;
    for (char *l = maps, *next; rc == 0 && l && *l; l = next) {
        next = strchr(l, '\n');
        if (next)
            *next++ = '\0';
        unsigned long long lo, hi, off;
        unsigned long inode;
        unsigned maj, mnr;
        char perms[5];
        int name_at = 0;
        if (sscanf(l, "%llx-%llx %4s %llx %x:%x %lu %n", &lo, &hi, perms, &off, &maj, &mnr, &inode,
                   &name_at) < 7 ||
            strlen(perms) != 4 || hi <= lo)
            continue;
        const char *name = name_at ? l + name_at : "";
        if (!walk_this(perms, inode, name) || hi - lo > MS_PAGES_MAX_MAPPING ||
            walked + (hi - lo) > MS_PAGES_MAX_WALK)
            continue;
        walked += hi - lo;
        rc = walk_range(fd, lo, hi, page, w);
    }
    close(fd);
    free(maps);
    return rc;
}

int ms_pages_is_file(const char *name)
{
    size_t n = strlen(name), a = strlen("usage-"), b = strlen(MS_PAGES_SUFFIX);
    return n > a + b && !strncmp(name, "usage-", a) && !strcmp(name + n - b, MS_PAGES_SUFFIX);
}

void ms_pages_header(unsigned char *out)
{
    memset(out, 0, MS_PAGES_HEADER);
    memcpy(out, MS_PAGES_MAGIC, 8);
    ms_put32(out + 8, MS_PAGES_VERSION);
    ms_put32(out + 12, (uint32_t)sizeof(struct ms_pages_range));
}

void ms_pages_encode(const struct ms_pages_walk *w, unsigned char *out)
{
    ms_put64(out, w->ts_ns);
    ms_put32(out + 8, w->pid);
    ms_put32(out + 12, (uint32_t)w->n);
    ms_put64(out + 16, w->bytes);
}

_Static_assert(sizeof(struct ms_pages_range) == 16, "a range is two u64, as in the file");

int ms_pages_load(const char *path, struct ms_pages_walk **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return MS_EFORMAT;
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return MS_ENOMEM;
    }
    uint64_t left = (uint64_t)st.st_size; /* bytes not read yet: no record claims more */
    unsigned char hdr[MS_PAGES_HEADER], rec[MS_PAGES_RECORD];
    int rc = 0;
    if (fread(hdr, 1, sizeof hdr, f) != sizeof hdr || memcmp(hdr, MS_PAGES_MAGIC, 8) != 0)
        rc = MS_EFORMAT;
    else if (ms_get32(hdr + 8) > MS_PAGES_VERSION)
        rc = MS_EVERSION;
    else if (ms_get32(hdr + 8) == 0 || ms_get32(hdr + 12) != sizeof(struct ms_pages_range))
        rc = MS_EFORMAT;
    struct ms_pages_walk *v = NULL;
    size_t nv = 0, cap = 0;
    uint64_t total = 0;
    left = left > MS_PAGES_HEADER ? left - MS_PAGES_HEADER : 0;
    while (rc == 0 && fread(rec, 1, sizeof rec, f) == sizeof rec) {
        left = left > sizeof rec ? left - sizeof rec : 0;
        struct ms_pages_walk w = {0};
        w.ts_ns = ms_get64(rec);
        w.pid = ms_get32(rec + 8);
        uint32_t nr = ms_get32(rec + 12);
        uint64_t bytes = ms_get64(rec + 16);
        if (nr > MS_PAGES_MAX_RANGES || total + nr > MS_PAGES_MAX_TOTAL ||
            (uint64_t)nr * sizeof *w.r > left)
            break; /* no sampler's, or cut short: the walks before it are kept */
        left -= (uint64_t)nr * sizeof *w.r;
        if (nr && !(w.r = malloc((size_t)nr * sizeof *w.r))) {
            rc = MS_ENOMEM;
            break;
        }
        if (fread(w.r, sizeof *w.r, nr, f) != nr) {
            free(w.r);
            break; /* cut short */
        }
        w.n = w.cap = nr;
        int ok = 1;
        for (size_t i = 0; i < w.n && ok; i++) {
            const struct ms_pages_range *r = &w.r[i];
            ok = r->len && r->start + r->len > r->start &&
                 (i == 0 || r->start >= w.r[i - 1].start + w.r[i - 1].len);
            w.bytes += r->len;
        }
        if (!ok || w.bytes != bytes) {
            free(w.r);
            break; /* damaged */
        }
        if (nv == cap) {
            size_t nc = cap ? cap * 2 : 16;
            struct ms_pages_walk *nvp = realloc(v, nc * sizeof *nvp);
            if (!nvp) {
                free(w.r);
                rc = MS_ENOMEM;
                break;
            }
            v = nvp;
            cap = nc;
        }
        v[nv++] = w;
        total += nr;
    }
    fclose(f);
    if (rc < 0) {
        for (size_t i = 0; i < nv; i++)
            ms_pages_walk_release(&v[i]);
        free(v);
        return rc;
    }
    *out = v;
    *n = nv;
    return 0;
}

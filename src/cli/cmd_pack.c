/* cmd_pack.c: `memscope pack PATH...`: recodes raw traces (version 1, as the agent writes them)
 * into packed traces (version 2, src/trace/pack.h) in place. Also called by `memscope run` for
 * the traces it keeps. Workload: one file per traced process image, each packed by up to one
 * worker thread per CPU. */
#include "cli.h"

#include "common/ms_error.h"
#include "common/files.h"
#include "store/db_explain.h"
#include "trace/pack.h"
#include "trace/reader.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char pack_usage[] =
    "usage: memscope pack PATH... [-j N] [--force]\n"
    "\n"
    "Packs raw memscope traces in place: each PATH is a trace (*.mst) or a directory of them.\n"
    "A packed trace keeps every record and timestamp in about a third of the bytes; memscope\n"
    "import reads both kinds. Traces that are already packed are left as they are.\n"
    "A trace whose process is still running is left raw: the process may still be writing it.\n"
    "  -j, --jobs=N   worker threads (default: the number of CPUs)\n"
    "  --force        pack traces of running processes too (say, traces from another machine)\n";

static int force;

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

/* Packs one file in place, under the caller's lock (pack_one). Returns as pack_one does. */
static int pack_locked(const char *path, int workers, struct ms_pack_stats *total)
{
    struct ms_trace t;
    int rc = ms_trace_open(&t, path);
    if (rc == 0 && t.hdr.version != MS_TRACE_VERSION) {
        ms_trace_release(&t);
        return 0;
    }
    pid_t pid = rc == 0 ? (pid_t)t.hdr.pid : 0;
    ms_trace_release(&t);
    /* Packing replaces the file: events a live writer adds after that would be lost. A writer
     * holds the file open (a pid of another namespace, or reused, does not). */
    char real[PATH_MAX];
    if (rc == 0 && !force && pid > 0 && realpath(path, real) && cli_holds_file(pid, real)) {
        cli_log(2, "pack: %s: process %ld is still running and may be writing it; left raw", path,
                (long)pid);
        return 0;
    }
    if (rc < 0) {
        const char *kind = ms_file_kind(path);
        if (strcmp(kind, "a memscope trace file") != 0 && strcmp(kind, "unreadable") != 0)
            cli_error("pack: '%s' is not a memscope trace: it is %s", path, kind);
        else
            cli_error("pack: %s: %s", path,
                      rc == MS_EFORMAT ? "not a memscope trace" : ms_strerror(rc));
        return -1;
    }
    char tmp[PATH_MAX + 64];
    if (ms_temp_name(tmp, sizeof tmp, path, ".packing.") < 0) {
        cli_error("pack: %s: path too long", path);
        return -1;
    }
    struct ms_pack_stats st;
    ms_cleanup_add(tmp, 0); /* a name no one can guess: ms_pack_file creates it (O_EXCL) */
    rc = ms_pack_file(path, tmp, workers, &st);
    if (rc == 0 && rename(tmp, path) < 0)
        rc = -errno;
    ms_cleanup_forget(tmp);
    if (rc < 0) {
        if (rc != -EEXIST)
            unlink(tmp); /* created by ms_pack_file (O_EXCL), unless it was there already */
        cli_error("pack: %s: %s (the raw trace is unchanged)", path, ms_strerror(rc));
        return -1;
    }
    if (st.damaged)
        cli_log(2, "pack: %s: %llu damaged chunk%s packed up to the damage", path,
                (unsigned long long)st.damaged, st.damaged == 1 ? "" : "s");
    total->events += st.events;
    total->records += st.records;
    total->in_bytes += st.in_bytes;
    total->out_bytes += st.out_bytes;
    total->damaged += st.damaged;
    return 1;
}

/* Packs one file in place. Returns 1 packed, 0 already packed (or being packed by another
 * memscope), -1 failed (message printed). */
static int pack_one(const char *path, int workers, struct ms_pack_stats *total)
{
    /* Two packers of one directory (two runs writing into it, or a run and `memscope pack`)
     * must not both pack a trace: the second would read the file the first renamed over it.
     * The packer holds an exclusive lock on the trace while packing; one that cannot take it
     * leaves the trace to the other, and one that takes it checks that the path still names
     * the file it locked (the other may have packed and replaced it meanwhile). */
    int lk = open(path, O_RDONLY | O_CLOEXEC);
    if (lk >= 0 && flock(lk, LOCK_EX | LOCK_NB) < 0) {
        int busy = errno == EWOULDBLOCK;
        close(lk);
        if (busy) {
            cli_log(0, "pack: %s: being packed by another memscope; left to it", path);
            return 0;
        }
        lk = -1;
    }
    struct stat a, b;
    if (lk >= 0 &&
        (fstat(lk, &a) < 0 || stat(path, &b) < 0 || a.st_ino != b.st_ino || a.st_dev != b.st_dev)) {
        close(lk);
        return 0; /* replaced meanwhile: packed by the other */
    }
    int r = pack_locked(path, workers, total);
    if (lk >= 0)
        close(lk);
    return r;
}

int cli_pack_path(const char *path, int workers, time_t since, struct ms_pack_stats *total,
                  int *packed)
{
    /* Under a file-size limit (ulimit -f) a write past it must fail with EFBIG, which keeps
     * the raw trace, rather than kill memscope. Only ever called once no child is left to
     * inherit the disposition. */
    signal(SIGXFSZ, SIG_IGN);
    struct stat sb;
    if (stat(path, &sb) < 0)
        return cli_error("pack: %s: %s", path, strerror(errno));
    if (!S_ISDIR(sb.st_mode)) {
        int r = pack_one(path, workers, total);
        if (r > 0)
            ++*packed;
        return r < 0 ? -1 : 0;
    }
    DIR *d = opendir(path);
    if (!d)
        return cli_error("pack: %s: %s", path, strerror(errno));
    int failed = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!ends_with(e->d_name, ".mst"))
            continue;
        char p[PATH_MAX];
        struct stat fs;
        if (snprintf(p, sizeof p, "%s/%s", path, e->d_name) >= (int)sizeof p)
            continue;
        if (lstat(p, &fs) == 0 && !S_ISREG(fs.st_mode)) {
            cli_log(2, "pack: %s: not a regular file; skipped", p); /* a FIFO would block */
            continue;
        }
        if (since && (stat(p, &fs) < 0 || fs.st_mtime < since))
            continue;
        int r = pack_one(p, workers, total);
        if (r < 0)
            failed = 1;
        else if (r > 0)
            ++*packed;
    }
    closedir(d);
    return failed ? -1 : 0;
}

int cmd_pack(int argc, char **argv)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int workers = cpus > 0 ? (int)cpus : 1, npaths = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(pack_usage, stdout);
            return 0;
        } else if (!strcmp(a, "-j") || !strcmp(a, "--jobs")) {
            if (++i >= argc)
                return usage_error("pack: %s needs a number", a);
            v = argv[i];
        } else if (!strncmp(a, "--jobs=", 7)) {
            v = a + 7;
        } else if (!strncmp(a, "-j", 2) && a[2]) {
            v = a + 2;
        } else if (!strcmp(a, "--force")) {
            force = 1;
            continue;
        } else if (a[0] == '-' && a[1]) {
            return usage_error("pack: unknown option '%s'", a);
        } else {
            argv[++npaths] = argv[i];
            continue;
        }
        char *end;
        long n = strtol(v, &end, 10);
        if (!*v || *end || n < 1 || n > 64)
            return usage_error("pack: bad value '%s' for --jobs (1..64)", v);
        workers = (int)n;
    }
    if (!npaths)
        return usage_error("pack: no trace given");
    struct ms_pack_stats total = {0};
    int failed = 0, packed = 0;
    for (int i = 1; i <= npaths; i++)
        if (cli_pack_path(argv[i], workers, 0, &total, &packed) < 0)
            failed = 1;
    if (packed)
        cli_log(1, "packed %d trace%s: %llu events, %llu -> %llu bytes (%.2f bytes per event)",
                packed, packed == 1 ? "" : "s", (unsigned long long)total.events,
                (unsigned long long)total.in_bytes, (unsigned long long)total.out_bytes,
                total.events ? (double)total.out_bytes / (double)total.events : 0.0);
    return failed;
}

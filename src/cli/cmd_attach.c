/* cmd_attach.c: `memscope attach PID [-o out] [--duration=S]`: records a process that is
 * already running, from now on, without restarting it (docs/production.md, "Attach").
 *
 * Refuses first what must not be touched (inject_check: stopped, traced, another PID
 * namespace, not ours to trace); then makes one thread of the process, at a safe moment, call
 * dlopen on the agent and the agent's memscope__inject_start with the session's configuration
 * (inject.c; the agent's side is src/agent/inject.c), and lets it go. The process runs on and
 * its allocations go to the agent through its GOT (src/agent/attach.c). memscope then waits
 * for Ctrl-C (SIGINT, SIGTERM, SIGHUP), --duration or the process's end; a process still
 * running is made to call memscope__inject_stop the same way (its GOT slots get the C
 * library's functions back, the agent lets the trace file go, and stays loaded for the next
 * attach). The trace is converted into the compact database as `memscope run` does. */
#include "cli.h"
#include "inject.h"

#include "analyze/analyze.h"
#include "common/agent_api.h"
#include "common/ms_error.h"
#include "store/store.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define C_DEPTH 256         /* memscope run's default native depth (MS_RUN_C_DEPTH) */
#define SEIZE_TIMEOUT_S 5.0 /* to find a thread at a safe moment */
#define CALL_TIMEOUT_S 30.0 /* for dlopen and the agent's start or stop to return */
#define STOP_ATTEMPTS 5     /* stopping is retried: the process must not record on alone */

static const char usage_text[] =
    "usage: memscope attach PID [-o OUT] [--duration=S]\n"
    "  Records the heap of running process PID from now on (its earlier blocks are unknown),\n"
    "  until Ctrl-C, S seconds, or the end of the process; the process runs on, unchanged.\n"
    "  -o, --output OUT   the database (a path ending in .db) or a directory for it\n"
    "                     (default: memscopeDumpResults)\n"
    "  --duration=S       stop after S seconds\n"
    "  -v, --verbose      say how the process was entered\n";

static volatile int stop_signal;

static void on_signal(int sig)
{
    stop_signal = sig;
}

/* The process's name for messages. */
static void name_of(pid_t pid, char *buf, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/comm", (long)pid);
    FILE *f = fopen(path, "re");
    buf[0] = 0;
    if (f) {
        if (fgets(buf, (int)len, f))
            buf[strcspn(buf, "\n")] = 0;
        fclose(f);
    }
    if (!buf[0])
        snprintf(buf, len, "?");
}

/* Whether the process's environment (as it started) names a trace directory: the agent's
 * constructor would then start recording there on its own when it is loaded. */
static int env_has_trace_dir(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/environ", (long)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    size_t cap = 1 << 20; /* the kernel's limit on an environment is far below */
    char *buf = malloc(cap + 1);
    size_t n = buf ? fread(buf, 1, cap, f) : 0;
    fclose(f);
    int found = 0;
    const char *key = MS_ENV_TRACE_DIR "=";
    size_t kl = strlen(key);
    for (size_t i = 0; buf && i < n && !found; i += strnlen(buf + i, n - i) + 1)
        found = n - i >= kl && !memcmp(buf + i, key, kl);
    free(buf);
    return found;
}

/* The process's command line (for the database's meta), NULL-terminated; static storage. */
static const char *const *cmdline_of(pid_t pid)
{
    static char buf[8192];
    static const char *argv[64];
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/cmdline", (long)pid);
    FILE *f = fopen(path, "re");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = 0;
    int k = 0;
    for (size_t i = 0; i < n && k < 63; i += strlen(buf + i) + 1)
        argv[k++] = buf + i;
    argv[k] = NULL;
    return argv;
}

/* The user and group the process creates files as (the effective ids of /proc/PID/status's
 * Uid: and Gid: lines), or -1. */
static int owner_of(pid_t pid, uid_t *uid, gid_t *gid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    int got = 0;
    unsigned long r, e;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "Uid: %lu %lu", &r, &e) == 2)
            *uid = (uid_t)e, got |= 1;
        else if (sscanf(line, "Gid: %lu %lu", &r, &e) == 2)
            *gid = (gid_t)e, got |= 2;
    }
    fclose(f);
    return got == 3 ? 0 : -1;
}

/* What the agent's negative code means, for the user. */
static const char *agent_error(int rc)
{
    switch (rc) {
    case -EBUSY:
        return "it is already recorded by memscope (memscope run, memscope.start() or another "
               "memscope attach)";
    case -ENOTSUP:
        return "it uses another allocator than the C library's (jemalloc, tcmalloc): use "
               "memscope run for it";
    case -EINVAL: return "the agent was given no trace directory";
    default: return strerror(rc < 0 ? -rc : EIO);
    }
}

static void say_seized(const struct inject *in)
{
    cli_log(0, "thread %ld of process %ld taken after %d look%s at %d thread%s, %s", (long)in->tid,
            (long)in->pid, in->looks, in->looks == 1 ? "" : "s", in->tries,
            in->tries == 1 ? "" : "s",
            in->in_syscall ? "waiting in a system call" : "running its own code");
}

/* One call into the process: seizes a thread, runs fn with the given data written into its
 * stack (data_at[i]: where data i went, passed as argument i when pass[i]), lets it go.
 * Returns 0 with *ret, or -1 with why. */
struct call_data {
    const void *p;
    size_t n;
};

static int call_in(struct inject *in, uintptr_t fn, const struct call_data *data, int ndata,
                   uint64_t *ret, char *why, size_t len)
{
    if (inject_seize(in, SEIZE_TIMEOUT_S, why, len) < 0)
        return -1;
    say_seized(in);
    uint64_t args[6] = {0};
    for (int i = 0; i < ndata && i < 6; i++) {
        uintptr_t a;
        if (inject_write(in, data[i].p, data[i].n, &a, why, len) < 0) {
            inject_release(in);
            return -1;
        }
        args[i] = a;
    }
    int rc = inject_call(in, fn, args, ndata, ret, CALL_TIMEOUT_S, why, len);
    inject_release(in);
    return rc;
}

/* Loads the agent into the process (unless it is there from an earlier attach) and starts a
 * session with config (cfg_len bytes). 0, or -1 with why. */
static int start_session(struct inject *in, const char *agent, const char *cfg, size_t cfg_len,
                         char *why, size_t len)
{
    if (!inject_has_object(in, agent)) {
        uintptr_t dlopen_fn = 0, dlerror_fn = 0;
        int rc = inject_symbol(in, "libc.so.", NULL, "dlopen", &dlopen_fn, why, len);
        if (rc == -ESRCH) /* glibc before 2.34: dlopen is libdl's, when loaded */
            rc = inject_symbol(in, "libdl.so.", NULL, "dlopen", &dlopen_fn, why, len);
        if (rc == -ENOENT || rc == -ESRCH) /* else the C library's own entry */
            rc = inject_symbol(in, "libc.so.", NULL, "__libc_dlopen_mode", &dlopen_fn, why, len);
        if (rc < 0) {
            if (rc == -ENOENT || rc == -ESRCH)
                snprintf(why, len, "process %ld has no dlopen to load the agent with",
                         (long)in->pid);
            return -1;
        }
        if (inject_symbol(in, "libc.so.", NULL, "dlerror", &dlerror_fn, why, len) < 0)
            dlerror_fn = 0;
        struct call_data d[2] = {{agent, strlen(agent) + 1}, {NULL, 0}};
        uint64_t handle = 0;
        if (inject_seize(in, SEIZE_TIMEOUT_S, why, len) < 0)
            return -1;
        say_seized(in);
        uintptr_t path_at;
        if (inject_write(in, d[0].p, d[0].n, &path_at, why, len) < 0) {
            inject_release(in);
            return -1;
        }
        uint64_t args[2] = {path_at, RTLD_NOW | RTLD_LOCAL};
        if (inject_call(in, dlopen_fn, args, 2, &handle, CALL_TIMEOUT_S, why, len) < 0) {
            inject_release(in);
            return -1;
        }
        if (!handle) {
            char msg[512] = "";
            uint64_t m = 0;
            if (dlerror_fn &&
                inject_call(in, dlerror_fn, NULL, 0, &m, CALL_TIMEOUT_S, why, len) == 0)
                inject_read_string(in, (uintptr_t)m, msg, sizeof msg);
            inject_release(in);
            snprintf(why, len, "process %ld could not load the agent %s: %s", (long)in->pid, agent,
                     msg[0] ? msg : "dlopen failed");
            return -1;
        }
        inject_release(in);
    }
    uintptr_t start_fn;
    if (inject_symbol(in, NULL, agent, MS_INJECT_START, &start_fn, why, len) < 0)
        return -1;
    struct call_data d[1] = {{cfg, cfg_len}};
    uint64_t ret = 0;
    if (call_in(in, start_fn, d, 1, &ret, why, len) < 0)
        return -1;
    int rc = (int)(int32_t)ret;
    if (rc != 0) {
        snprintf(why, len, "the agent could not start recording in process %ld: %s", (long)in->pid,
                 agent_error(rc));
        return -1;
    }
    return 0;
}

/* Ends the session in the process. 0; 1 when the process had ended; -1 with why. */
static int stop_session(struct inject *in, const char *agent, char *why, size_t len)
{
    uintptr_t stop_fn;
    for (int attempt = 0; attempt < STOP_ATTEMPTS; attempt++) {
        if (inject_process_gone(in->pid))
            return 1;
        if (inject_symbol(in, NULL, agent, MS_INJECT_STOP, &stop_fn, why, len) < 0) {
            if (inject_process_gone(in->pid))
                return 1;
            return -1;
        }
        uint64_t ret = 0;
        if (call_in(in, stop_fn, NULL, 0, &ret, why, len) == 0)
            return 0;
        if (inject_process_gone(in->pid))
            return 1;
        cli_log(2, "cannot stop recording yet (%s); trying again", why);
    }
    return -1;
}

/* Waits until a signal, the duration (0: none) or the end of the process. Returns 1 when the
 * process ended. */
static int wait_session(pid_t pid, double duration)
{
    int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        if (stop_signal)
            return 0;
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        double el = (double)(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9;
        if (duration > 0 && el >= duration)
            break;
        int wait_ms = 200;
        if (duration > 0 && (duration - el) * 1000 < wait_ms)
            wait_ms = (int)((duration - el) * 1000) + 1;
        if (pfd >= 0) {
            struct pollfd p = {.fd = pfd, .events = POLLIN};
            if (poll(&p, 1, wait_ms) > 0) {
                close(pfd);
                return 1;
            }
        } else {
            if (inject_process_gone(pid))
                return 1;
            struct timespec ts = {0, wait_ms * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    if (pfd >= 0)
        close(pfd);
    return 0;
}

/* The attach-specific lines after the summary: frees of blocks made before the attach, and
 * what "live at exit" means here. */
static void say_attach_notes(const char *db_path, int ended)
{
    sqlite3 *db;
    long long unmatched = 0;
    if (sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(db,
                               "SELECT COALESCE(sum(s.unmatched_frees), 0) FROM process_stats s "
                               "JOIN layers l ON l.id = s.layer WHERE l.event_type = 'HOST'",
                               -1, &st, NULL) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW)
            unmatched = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    fprintf(stderr,
            "memscope: attached mid-run: %lld free%s of blocks memscope did not see allocated "
            "(made before the attach) counted apart as unmatched frees, not as errors\n",
            unmatched, unmatched == 1 ? "" : "s");
    if (!ended)
        fprintf(stderr, "memscope: the process runs on: \"live at exit\" above means still live "
                        "when memscope detached\n");
}

/* Appends s to buf (at *n, cap bytes) as a Python string literal. */
static void py_literal(char *buf, size_t cap, size_t *n, const char *s)
{
    char tmp[8];
    const char *parts[3] = {"'", NULL, "'"};
    for (int k = 0; k < 3; k++) {
        const char *p = k == 1 ? s : parts[k];
        for (; *p; p++) {
            unsigned char c = (unsigned char)*p;
            if (k == 1 && (c < 0x20 || c >= 0x7f || c == '\\' || c == '\''))
                snprintf(tmp, sizeof tmp, "\\x%02x", c);
            else
                tmp[0] = (char)c, tmp[1] = 0;
            for (const char *t = tmp; *t; t++)
                if (*n + 1 < cap)
                    buf[(*n)++] = *t;
        }
    }
    buf[*n < cap ? *n : cap - 1] = 0;
}

/* The directory holding the memscope Python package (build tree or install), into dir. */
static int python_package_dir(char *dir, size_t len)
{
    char bindir[PATH_MAX];
    if (run_exe_dir(bindir, sizeof bindir) < 0)
        return -1;
    const char *cands[] = {"/python", "/" MEMSCOPE_AGENT_RELDIR "/python"};
    for (size_t i = 0; i < 2; i++) {
        char cand[PATH_MAX + 64], real[PATH_MAX];
        snprintf(cand, sizeof cand, "%s%s/memscope", bindir, cands[i]);
        if (access(cand, R_OK) == 0 && realpath(cand, real)) {
            *strrchr(real, '/') = 0;
            snprintf(dir, len, "%s", real);
            return 0;
        }
    }
    return -1;
}

/* Whether the process is a Python interpreter (python, python3, python3.11 ...). */
static int python_process(pid_t pid)
{
    char path[64], exe[PATH_MAX];
    snprintf(path, sizeof path, "/proc/%ld/exe", (long)pid);
    ssize_t n = readlink(path, exe, sizeof exe - 1);
    if (n <= 0)
        return 0;
    exe[n] = 0;
    const char *b = strrchr(exe, '/');
    return ms_python_name(b ? b + 1 : exe);
}

/* The Python code a Python process runs at the session's start (install the stack hook,
 * memscope/_attach.py) into buf. Every failure goes to msg, never to the program. */
static void python_start_code(char *buf, size_t cap, const char *pydir, const char *agent,
                              const char *msg)
{
    char inner[3 * PATH_MAX + 1024];
    size_t n = 0;
    const char *pieces[] = {"import sys\np = ",
                            NULL,
                            "\ntry:\n    sys.path.insert(0, p)\n    try:\n        import "
                            "memscope._attach as a\n    finally:\n        sys.path.remove(p)\n "
                            "   a.start(",
                            NULL,
                            ", 1, ",
                            NULL,
                            ")\nexcept BaseException as e:\n    try:\n        open(",
                            NULL,
                            ", 'a').write('memscope agent: Python stacks: %s\\n' % (e,))\n    "
                            "except OSError:\n        pass\n"};
    const char *vals[] = {NULL, pydir, NULL, agent, NULL, msg, NULL, msg, NULL};
    for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++) {
        if (pieces[i]) {
            size_t l = strlen(pieces[i]);
            if (n + l < sizeof inner) {
                memcpy(inner + n, pieces[i], l + 1);
                n += l;
            }
        } else {
            py_literal(inner, sizeof inner, &n, vals[i]);
        }
    }
    size_t m = 0;
    const char *head = "exec(";
    memcpy(buf, head, strlen(head) + 1);
    m = strlen(head);
    py_literal(buf, cap, &m, inner);
    snprintf(buf + m, cap - m, ", {})");
}

/* Parses a duration in seconds (> 0). */
static int parse_duration(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v > 0) || v > 1e9)
        return -1;
    *out = v;
    return 0;
}

int cmd_attach(int argc, char **argv)
{
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'},   {"output-path", required_argument, NULL, 'o'},
        {"duration", required_argument, NULL, 'd'}, {"help", no_argument, NULL, 'h'},
        {"verbose", no_argument, NULL, 'v'},        {NULL, 0, NULL, 0}};
    const char *output = NULL;
    double duration = 0;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:hv", opts, NULL)) != -1) {
        switch (c) {
        case 'o': output = optarg; break;
        case 'd':
            if (parse_duration(optarg, &duration) < 0)
                return usage_error("attach: --duration: '%s' is not a number of seconds > 0",
                                   optarg);
            break;
        case 'h': fputs(usage_text, stdout); return 0;
        case 'v': cli_log_level = 0; break;
        default: fputs(usage_text, stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        fputs(usage_text, stderr);
        return 2;
    }
    char *end;
    errno = 0;
    long lpid = strtol(argv[optind], &end, 10);
    if (errno || end == argv[optind] || *end || lpid <= 0 || lpid > INT32_MAX)
        return usage_error("attach: '%s' is not a process id", argv[optind]);
    pid_t pid = (pid_t)lpid;

    char why[1024];
    if (inject_check(pid, why, sizeof why) < 0) {
        cli_error("cannot attach: %s", why);
        return 1;
    }
    char agent[PATH_MAX];
    if (run_find_agent(agent, sizeof agent) < 0) {
        cli_error("cannot find the agent libmemscope.so next to the memscope binary (set "
                  "MEMSCOPE_AGENT to its path)");
        return 1;
    }
    char comm[64];
    name_of(pid, comm, sizeof comm);
    if (env_has_trace_dir(pid)) {
        cli_error("cannot attach: process %ld (%s) has %s in its environment: it was started by "
                  "memscope run, or the variable leaked into it; the agent would record on its "
                  "own there",
                  (long)pid, comm, MS_ENV_TRACE_DIR);
        return 1;
    }
    struct inject in;
    if (inject_open(&in, pid, why, sizeof why) < 0) {
        cli_error("cannot attach: %s", why);
        inject_close(&in);
        return 1;
    }

    char other[PATH_MAX];
    if (inject_other_object(&in, "libmemscope.so", agent, other, sizeof other)) {
        cli_error("cannot attach: process %ld (%s) has another memscope agent loaded (%s): "
                  "attach with the memscope it came with",
                  (long)pid, comm, other);
        inject_close(&in);
        return 1;
    }

    /* ---- where the session writes ---- */
    time_t now = time(NULL);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y%m%d%H%M%S", localtime(&now));
    const char *out = output ? output : "memscopeDumpResults";
    size_t ol = strlen(out);
    char out_dir[PATH_MAX], db_path[PATH_MAX + 128], made[PATH_MAX];
    if (ol >= PATH_MAX - 128) {
        inject_close(&in);
        return usage_error("attach: -o: path too long");
    }
    int out_is_file = ol > 3 && !strcmp(out + ol - 3, ".db");
    snprintf(out_dir, sizeof out_dir, "%s", out);
    if (out_is_file) {
        char *slash = strrchr(out_dir, '/');
        if (!slash)
            snprintf(out_dir, sizeof out_dir, ".");
        else if (slash == out_dir)
            out_dir[1] = 0;
        else
            *slash = 0;
        snprintf(db_path, sizeof db_path, "%s", out);
    }
    int rc = run_mkdir_p(out_dir, made, sizeof made);
    if (rc < 0) {
        cli_error("cannot create output directory '%s': %s", out_dir, ms_strerror(rc));
        inject_close(&in);
        return 1;
    }
    if (!out_is_file)
        snprintf(db_path, sizeof db_path, "%s/memscope_attach_%ld_%s.db", out_dir, (long)pid,
                 stamp);
    if (access(out_dir, W_OK) != 0) {
        cli_error("cannot write to output directory '%s': %s", out_dir, strerror(errno));
        inject_close(&in);
        return 1;
    }
    /* The trace directory: the process creates its files there, as its own user; beside the
     * output when that is memscope's user, else a private directory in TMPDIR handed to it. */
    uid_t uid;
    gid_t gid;
    if (owner_of(pid, &uid, &gid) < 0) {
        cli_error("cannot attach: process %ld ended", (long)pid);
        inject_close(&in);
        return 1;
    }
    char trace_dir[PATH_MAX + 128];
    if (uid == geteuid()) {
        snprintf(trace_dir, sizeof trace_dir, "%s/.memscope-attach-%ld-%s", out_dir, (long)getpid(),
                 stamp);
        if (mkdir(trace_dir, 0700) < 0) {
            cli_error("cannot create trace directory '%s': %s", trace_dir, strerror(errno));
            inject_close(&in);
            return 1;
        }
    } else {
        const char *tmp = getenv("TMPDIR");
        snprintf(trace_dir, sizeof trace_dir, "%s/memscope-attach-XXXXXX",
                 tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(trace_dir) || chown(trace_dir, uid, gid) != 0) {
            cli_error("cannot create a trace directory for process %ld's user: %s", (long)pid,
                      strerror(errno));
            inject_close(&in);
            return 1;
        }
    }
    char abs_trace[PATH_MAX];
    if (!realpath(trace_dir, abs_trace)) {
        cli_error("cannot resolve '%s': %s", trace_dir, strerror(errno));
        rmdir(trace_dir);
        inject_close(&in);
        return 1;
    }

    /* The session's configuration: memscope run's variables, as a block (agent_api.h). The
     * agent's messages go to <pid>.msg (MEMSCOPE_STDERR names no file), never to the
     * process's own stderr. */
    /* A Python program's default stacks are its Python ones, as under memscope run. */
    static char cfg[8192], py_start[4096], msg[PATH_MAX + 64], pydir[PATH_MAX];
    int python = python_process(pid) && python_package_dir(pydir, sizeof pydir) == 0;
    unsigned c_depth = python ? 0 : C_DEPTH;
    char c_depth_s[16];
    snprintf(c_depth_s, sizeof c_depth_s, "%u", c_depth);
    char owner_s[24];
    snprintf(owner_s, sizeof owner_s, "%ld", (long)getpid());
    const char *items[16] = {MS_ENV_TRACE_DIR, abs_trace, MS_ENV_DEPTH,  c_depth_s,
                             MS_ENV_UNWIND,    "dwarf",   MS_ENV_STDERR, "0:0",
                             MS_CFG_OWNER,     owner_s};
    size_t nitems = 10;
    if (python) {
        snprintf(msg, sizeof msg, "%s/%ld.msg", abs_trace, (long)pid);
        python_start_code(py_start, sizeof py_start, pydir, agent, msg);
        items[nitems++] = MS_ENV_PY_DEPTH;
        items[nitems++] = "32";
        items[nitems++] = MS_CFG_PY_START;
        items[nitems++] = py_start;
        items[nitems++] = MS_CFG_PY_STOP;
        items[nitems++] =
            "exec('try:\\n    import sys\\n    m = sys.modules.get(\"memscope._attach\")"
            "\\n    m and m.stop()\\nexcept BaseException:\\n    pass\\n', {})";
    }
    size_t cl = 0;
    for (size_t i = 0; i < nitems && cl < sizeof cfg; i += 2)
        cl += (size_t)snprintf(cfg + cl, sizeof cfg - cl, "%s=%s", items[i], items[i + 1]) + 1;
    if (cl + 1 >= sizeof cfg) {
        cli_error("cannot attach: the agent's configuration is too long (paths too long)");
        run_remove_tree(abs_trace);
        inject_close(&in);
        return 1;
    }
    cfg[cl++] = 0;

    /* ---- the attach: no signal of ours may leave the process in the middle of a call ---- */
    sigset_t fatal, old;
    sigemptyset(&fatal);
    sigaddset(&fatal, SIGINT);
    sigaddset(&fatal, SIGTERM);
    sigaddset(&fatal, SIGHUP);
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sigprocmask(SIG_BLOCK, &fatal, &old);
    rc = start_session(&in, agent, cfg, cl, why, sizeof why);
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (rc < 0) {
        run_print_agent_messages(abs_trace);
        cli_error("cannot attach: %s; process %ld was left as it was", why, (long)pid);
        run_remove_tree(abs_trace);
        inject_close(&in);
        return 1;
    }
    if (cli_log_level <= 1) {
        if (duration > 0)
            fprintf(stderr, "memscope: recording process %ld (%s) for %g s (Ctrl-C stops sooner)\n",
                    (long)pid, comm, duration);
        else
            fprintf(stderr, "memscope: recording process %ld (%s); Ctrl-C stops\n", (long)pid,
                    comm);
    }
    int ended = wait_session(pid, duration);
    int interrupted = stop_signal;
    stop_signal = 0;
    if (!ended) {
        sigprocmask(SIG_BLOCK, &fatal, &old);
        rc = stop_session(&in, agent, why, sizeof why);
        sigprocmask(SIG_SETMASK, &old, NULL);
        if (rc < 0) {
            cli_error("cannot stop recording in process %ld: %s; it records on into %s, which "
                      "is kept",
                      (long)pid, why, abs_trace);
            inject_close(&in);
            return 1;
        }
        ended = rc == 1;
    }
    inject_close(&in);
    if (cli_log_level <= 1)
        fprintf(stderr, "memscope: %s; writing the database\n",
                ended         ? "the process ended"
                : interrupted ? "stopped: the process runs on, as before the attach"
                              : "duration reached: the process runs on, as before the attach");
    run_print_agent_messages(abs_trace);

    /* ---- the database ---- */
    struct ms_store_options so = {
        .trace_dir = abs_trace,
        .db_path = db_path,
        .argv = cmdline_of(pid),
        .exit_status = -1,
        .call_stack_c = c_depth,
        .stop = &stop_signal,
        .symbolize = 1,
        .compact = 1,
    };
    struct ms_store_result res;
    char err[512] = "";
    rc = run_convert(&so, &stop_signal, &res, err, sizeof err);
    if (rc == -EINTR && stop_signal) {
        cli_error("stopped by %s during the conversion; the traces are kept in %s (convert them "
                  "with: memscope import %s -o %s)",
                  strsignal(stop_signal), abs_trace, abs_trace, db_path);
        return 128 + stop_signal;
    }
    if (rc < 0) {
        cli_error("cannot write the database: %s; the raw traces are kept in %s", err, abs_trace);
        return 1;
    }
    if (res.lost_events)
        cli_log(2, "%llu events were lost (the agent could not record them)",
                (unsigned long long)res.lost_events);
    if (cli_log_level <= 1) {
        ms_analyze_summary(db_path, stderr);
        say_attach_notes(db_path, ended);
    }
    run_remove_tree(abs_trace);
    if (cli_log_level <= 1)
        fprintf(stderr, "memscope: database written to %s\n", db_path);
    return 0;
}

/* cmd_run.c: `memscope run [options] [--] program [args]`: runs a program under the agent and
 * turns its traces into a database (or CSV, or keeps the raw traces).
 *
 * The program runs as a child with LD_PRELOAD=libmemscope.so and the agent's settings in its
 * environment; memscope waits for it (ignoring SIGINT/SIGQUIT, which the terminal delivers to
 * the program too, and forwarding SIGTERM/SIGHUP), then converts whatever the agents wrote,
 * even when the program died of a signal, prints a short summary on stderr, and exits with the
 * program's status (128+N for signal N). */
#include "cli.h"
#include "run.h"
#include "usage_sampler.h"
#include "monitor.h"
#include "common/agent_api.h"

#include "analyze/analyze.h"
#include "common/ms_error.h"
#include "common/files.h"
#include "trace/pack.h"
#include "store/store.h"
#include "version.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The CSV's database beside it: "<out>.csv.db.<pid>.<16 hex digits>" (files.h). */
#define CSV_DB_TAG ".db."

/* Where a run writes (plan_output). */
struct run_paths {
    time_t run_start;
    char stamp[32];                 /* the run's time, in file names */
    const char *suffix;             /* .db or .csv */
    char out_dir[PATH_MAX];         /* the output's directory (the run's folder, if made) */
    char out_file[PATH_MAX + 128];  /* the database or CSV; "" until known */
    char trace_dir[PATH_MAX + 128]; /* where the agent writes */
    char abs_trace[PATH_MAX];       /* trace_dir, absolute */
    char base_dir[PATH_MAX];        /* the directory named by -o */
    int out_is_file;                /* -o named the file itself */
    char made_dir[PATH_MAX];        /* the outermost directory made for the output, or "" */
    int made_run_dir, made_trace_dir;
};

#define ENV_MAX 26 /* environment additions, NULL included */

/* Whether prog names a Python interpreter: python, python3, python3.11 ... (any directory). */
static int python_program(const char *prog)
{
    const char *base = strrchr(prog, '/');
    return ms_python_name(base ? base + 1 : prog);
}

/* The K of an oom[:K] item of the --analysis list (0: none given). */
static unsigned oom_k_of(const char *list)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *it = strtok_r(buf, ",", &save); it; it = strtok_r(NULL, ",", &save))
        if (ms_oom_k(it))
            return ms_oom_k(it);
    return 0;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* ---- child management ---- */

static volatile pid_t child_pid;
static volatile int stop_signal; /* SIGINT, SIGTERM or SIGHUP received during the conversion */

static void on_stop_signal(int sig)
{
    stop_signal = sig;
}

static void forward_signal(int sig)
{
    if (child_pid > 0)
        kill(child_pid, sig);
}

/* Starts argv[0] with the agent. Returns the child's pid, or -1 (message printed) when the
 * program cannot be started; *exec_errno gets the reason. */
static pid_t spawn(char **argv, char *const *env_add, int *exec_errno)
{
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0)
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        *exec_errno = errno;
        close(pfd[0]);
        close(pfd[1]);
        return -1;
    }
    if (pid == 0) {
        close(pfd[0]);
        unsetenv(MS_ENV_STEPS); /* only this run's --steps, never one left in the environment */
        unsetenv(MS_ENV_ANALYSIS);
        for (size_t i = 0; env_add[i]; i++)
            putenv(env_add[i]);
        signal(SIGINT, SIG_DFL);
        signal(SIGQUIT, SIG_DFL);
        execvp(argv[0], argv);
        int e = errno;
        ssize_t w = write(pfd[1], &e, sizeof e);
        (void)w;
        _exit(127);
    }
    close(pfd[1]);
    int e = 0;
    ssize_t r;
    do
        r = read(pfd[0], &e, sizeof e);
    while (r < 0 && errno == EINTR);
    close(pfd[0]);
    if (r == (ssize_t)sizeof e) {
        waitpid(pid, NULL, 0);
        *exec_errno = e;
        return -1;
    }
    return pid;
}

/* Waits for the program: its exit status, or 128+N when it died of signal N (*signo = N, else
 * 0; *core: it dumped core). */
static int wait_child(pid_t pid, int *signo, int *core)
{
    int status;
    *signo = *core = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return 1;
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) {
        *signo = WTERMSIG(status);
        *core = WCOREDUMP(status) != 0;
        return 128 + WTERMSIG(status);
    }
    return 1;
}

/* ---- the command ---- */

/* Packs the traces this run wrote in dir (modified since run_start); a failure leaves a file
 * raw, which every reader reads too. */
static void pack_traces(const char *dir, time_t run_start)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    struct ms_pack_stats st = {0};
    int packed = 0;
    cli_pack_path(dir, cpus > 0 ? (int)cpus : 1, run_start, &st, &packed);
    if (packed)
        cli_log(0, "packed %d trace%s: %llu events, %llu -> %llu bytes", packed,
                packed == 1 ? "" : "s", (unsigned long long)st.events,
                (unsigned long long)st.in_bytes, (unsigned long long)st.out_bytes);
}

/* Decides where the run writes (docs/cli.md, "Files") and makes sure it can, before the
 * program runs: the output directory (created), the database or CSV path, the run's folder
 * for a directory output, the output's lock and the trace directory. Returns 0, or the exit
 * status (1, 2) after saying why. */
static int plan_output(const struct run_options *o, struct run_paths *p)
{
    /* Decide the output paths and make sure they can be written before running anything. */
    time_t now = time(NULL);
    p->run_start = now;
    strftime(p->stamp, sizeof p->stamp, "%Y%m%d%H%M%S", localtime(&now));
    p->suffix = o->format == FMT_CSV ? ".csv" : ".db";
    const char *output = o->output ? o->output : "memscopeDumpResults";
    /* out_dir is at most PATH_MAX - 128 bytes (checked below): the others have room for it. */
    p->out_is_file = o->format != FMT_TRACE && ends_with(output, p->suffix);
    if (strlen(output) >= PATH_MAX - 128)
        return usage_error("--output-path: path too long");
    if (p->out_is_file) {
        snprintf(p->out_file, sizeof p->out_file, "%s", output);
        snprintf(p->out_dir, sizeof p->out_dir, "%s", output);
        char *slash = strrchr(p->out_dir, '/');
        if (!slash)
            strcpy(p->out_dir, ".");
        else if (slash == p->out_dir)
            p->out_dir[1] = 0; /* a file in / */
        else
            *slash = 0;
    } else {
        snprintf(p->out_dir, sizeof p->out_dir, "%s", output);
        size_t l = strlen(p->out_dir); /* "dir/" names dir: no "dir//file" in messages */
        while (l > 1 && p->out_dir[l - 1] == '/')
            p->out_dir[--l] = 0;
    }
    snprintf(p->base_dir, sizeof p->base_dir, "%s", p->out_dir); /* for undo_output too */
    int rc = run_mkdir_p(p->out_dir, p->made_dir, sizeof p->made_dir);
    if (rc < 0) {
        cli_error("cannot create output directory '%s': %s", p->out_dir, ms_strerror(rc));
        return 1;
    }
    struct stat out_st;
    if (p->out_is_file && stat(p->out_file, &out_st) == 0 && S_ISDIR(out_st.st_mode)) {
        cli_error("cannot write '%s': it is a directory", p->out_file);
        return 1;
    }
    if (p->out_is_file && o->format != FMT_CSV && lstat(p->out_file, &out_st) == 0 &&
        !S_ISREG(out_st.st_mode)) { /* a database is renamed into place: never over a FIFO */
        cli_error("cannot write '%s': it exists and is not a regular file", p->out_file);
        return 1;
    }
    if (p->out_is_file && (rc = run_lock_output(p->out_file)) < 0) {
        if (rc == -EBUSY)
            cli_error("'%s' is being written by another memscope run; choose another output "
                      "(the program was not started)",
                      p->out_file);
        else
            cli_error("cannot lock '%s.lock': %s", p->out_file, strerror(-rc));
        return 1;
    }
    if (access(p->out_dir, W_OK) != 0) {
        cli_error("cannot write to output directory '%s': %s", p->out_dir, strerror(errno));
        return 1;
    }
    /* A directory receives msMemScope's layout: a folder of this run, memscope_<pid>_<stamp>
     * (<pid>: memscope's own, so that runs in the same second stay apart), holding
     * memscope_dump_<stamp>.db or .csv (docs/cli.md). */
    p->made_run_dir = 0;
    if (!p->out_is_file && o->format != FMT_TRACE) {
        char run_dir[PATH_MAX + 64];
        snprintf(run_dir, sizeof run_dir, "%s/memscope_%ld_%s", p->base_dir, (long)getpid(),
                 p->stamp);
        if (strlen(run_dir) >= sizeof p->out_dir) /* cannot happen: base_dir is short enough */
            return usage_error("--output-path: path too long");
        if (mkdir(run_dir, 0700) < 0) { /* memscope's directories: 0700 (docs/cli.md) */
            cli_error("cannot create '%s': %s", run_dir, strerror(errno));
            return 1;
        }
        memcpy(p->out_dir, run_dir, strlen(run_dir) + 1);
        p->made_run_dir = 1;
    }
    if (o->format == FMT_TRACE)
        snprintf(p->trace_dir, sizeof p->trace_dir, "%s", p->out_dir);
    else {
        snprintf(p->trace_dir, sizeof p->trace_dir, "%s/.memscope-trace-%ld-%s", p->out_dir,
                 (long)getpid(), p->stamp);
        if (mkdir(p->trace_dir, 0700) < 0) {
            cli_error("cannot create trace directory '%s': %s", p->trace_dir, strerror(errno));
            return 1;
        }
        p->made_trace_dir = 1;
    }
    if (!realpath(p->trace_dir, p->abs_trace)) {
        cli_error("cannot resolve '%s': %s", p->trace_dir, strerror(errno));
        return 1;
    }
    if (o->format == FMT_TRACE)
        return 0;
    if (!p->out_is_file)
        snprintf(p->out_file, sizeof p->out_file, "%s/%s_%s%s", p->out_dir,
                 o->format == FMT_COMPACT ? "memscope" : "memscope_dump", p->stamp, p->suffix);
    /* SQLite opens no path longer than MS_SQLITE_PATH_MAX: said now, before the program runs,
     * not after it (the database's temporary name, and a CSV's database, as cmd_run names it) */
    char probe[PATH_MAX + 160];
    snprintf(probe, sizeof probe, "%s%s", p->out_file,
             o->format == FMT_CSV ? CSV_DB_TAG "4194304.0123456789abcdef" : "");
    if (ms_db_path_check(probe) < 0) {
        cli_error("cannot write '%s': the path is too long (SQLite opens databases whose "
                  "absolute path, with the temporary name memscope adds, is at most %d bytes); "
                  "the program was not started",
                  p->out_file, MS_SQLITE_PATH_MAX - (int)sizeof "-journal" + 1);
        return 1;
    }
    return 0;
}

/* Removes what plan_output made for a run that recorded nothing (the program could not be
 * started, or ran untraced): the trace directory, the output's lock, the run's folder and the
 * output directories it created, each only when it is empty; nothing that was there before. */
static void undo_output(struct run_paths *p)
{
    if (p->made_trace_dir)
        run_remove_tree(p->trace_dir); /* ours: the agent's files in it too */
    run_unlock_output();
    if (p->made_run_dir)
        rmdir(p->out_dir);
    run_rmdirs(p->base_dir, p->made_dir);
}

/* The program's environment additions (putenv keeps the pointers: static storage) into
 * env_add (room for ENV_MAX, NULL-terminated): the agent, its configuration, the Python
 * package; the stack defaults of a Python program are settled here (o->c_depth,
 * o->py_depth). */
static void agent_environment(struct run_options *o, const struct run_paths *p,
                              const char *agent_path, char **env_add)
{
    /* The child's environment additions (putenv keeps the pointers: static storage). */
    static char env_preload[PATH_MAX * 2 + 32], env_dir[PATH_MAX + 32], env_depth[48],
        env_deferred[32], env_nofollow[32], env_unwind[32], env_pydepth[48], env_events[160],
        env_level[96], env_watch[600], env_outdir[PATH_MAX + 32], env_stepon[96];
    const char *old_pre = getenv("LD_PRELOAD");
    snprintf(env_preload, sizeof env_preload, "LD_PRELOAD=%s%s%s", agent_path,
             old_pre && *old_pre ? ":" : "", old_pre ? old_pre : "");
    snprintf(env_dir, sizeof env_dir, MS_ENV_TRACE_DIR "=%s", p->abs_trace);
    /* (MEMSCOPE_DEPTH and MEMSCOPE_PY_DEPTH are written below, once the default for Python
     * programs is known.) */
    snprintf(env_deferred, sizeof env_deferred, MS_ENV_DEFERRED "=%d",
             o->deferred || o->events_none);
    snprintf(env_nofollow, sizeof env_nofollow, MS_ENV_NO_FOLLOW "=%d", o->no_follow);
    snprintf(env_unwind, sizeof env_unwind, MS_ENV_UNWIND "=%s", o->unwind_dwarf ? "dwarf" : "fp");
    /* The Python package (python/): <bin>/python in the build tree, <bin>/../lib/memscope/python
     * when installed; prepended to PYTHONPATH so `import memscope` works in the program. */
    static char env_pypath[PATH_MAX * 3 + 32];
    char pydir[PATH_MAX + 64] = "", bindir[PATH_MAX];
    if (run_exe_dir(bindir, sizeof bindir) == 0) {
        const char *pyc[] = {"/python", "/" MEMSCOPE_AGENT_RELDIR "/python"};
        for (size_t i = 0; i < 2 && !pydir[0]; i++) {
            char cand[PATH_MAX + 64];
            snprintf(cand, sizeof cand, "%s%s/memscope", bindir, pyc[i]);
            if (access(cand, R_OK) == 0 && realpath(cand, pydir))
                *strrchr(pydir, '/') = 0;
        }
    }
    static char env_auto[40];
    int stacks_auto = 0;
    if (!o->stack_given && pydir[0] && python_program(o->prog[0])) {
        /* A Python program's native frames are the interpreter's (and cost 1.45x against 1.05x
         * on a PyTorch script, bench/RESULTS.md): its default is its Python stack, when the
         * Python package is there to report it. */
        o->c_depth = 0;
        o->py_depth = 32;
    } else if (!o->stack_given && pydir[0]) {
        /* A shell, env or launcher that starts Python programs: each process takes the default
         * of what it is (the agent looks at its own executable), as if run directly. */
        o->py_depth = 32;
        stacks_auto = 1;
        snprintf(env_auto, sizeof env_auto, MS_ENV_STACKS_AUTO "=1");
    }
    snprintf(env_depth, sizeof env_depth, MS_ENV_DEPTH "=%u", o->c_depth);
    snprintf(env_pydepth, sizeof env_pydepth, MS_ENV_PY_DEPTH "=%u", o->py_depth);
    const char *old_pp = getenv("PYTHONPATH");
    snprintf(env_pypath, sizeof env_pypath, "PYTHONPATH=%s%s%s", pydir,
             pydir[0] && old_pp && *old_pp ? ":" : "", old_pp ? old_pp : "");
    /* Sampling mode and the trace's cap: always written, so that none is left over from the
     * environment memscope was started in. */
    static char env_sampling[48], env_maxtrace[48], env_ring[48];
    snprintf(env_sampling, sizeof env_sampling, MS_ENV_SAMPLING "=%llu",
             (unsigned long long)o->sampling);
    snprintf(env_maxtrace, sizeof env_maxtrace, MS_ENV_MAX_TRACE_SIZE "=%llu",
             (unsigned long long)o->max_trace);
    snprintf(env_ring, sizeof env_ring, MS_ENV_TRACE_RING "=%llu",
             (unsigned long long)o->trace_ring);
    const char *base[] = {env_preload, env_dir,     env_depth,    env_deferred, env_nofollow,
                          env_unwind,  env_pydepth, env_sampling, env_maxtrace, env_ring};
    size_t nenv = 0;
    for (; nenv < sizeof base / sizeof base[0]; nenv++)
        env_add[nenv] = (char *)base[nenv];
    if (pydir[0])
        env_add[nenv++] = env_pypath;
    if (stacks_auto)
        env_add[nenv++] = env_auto;
    /* What the Python layer reads (docs/torch.md): only what the user asked for; a
     * MEMSCOPE_OUTPUT_DIR already in the environment wins over the output directory. */
    char abs_out[PATH_MAX];
    if (!getenv(MS_ENV_OUTPUT_DIR) && realpath(p->out_dir, abs_out)) {
        snprintf(env_outdir, sizeof env_outdir, MS_ENV_OUTPUT_DIR "=%s", abs_out);
        env_add[nenv++] = env_outdir;
    }
    if (o->events_given) {
        snprintf(env_events, sizeof env_events, MS_ENV_EVENTS "=%s", o->events);
        env_add[nenv++] = env_events;
    }
    if (o->level && strlen(o->level) < 64) {
        snprintf(env_level, sizeof env_level, MS_ENV_LEVEL "=%s", o->level);
        env_add[nenv++] = env_level;
    }
    if (o->watch) {
        snprintf(env_watch, sizeof env_watch, MS_ENV_WATCH "=%s", o->watch);
        env_add[nenv++] = env_watch;
    }
    if (o->step_on) {
        snprintf(env_stepon, sizeof env_stepon, MS_ENV_STEP_ON "=%s", o->step_on);
        env_add[nenv++] = env_stepon;
    }
    /* NVTX ranges and marks reach the agent through NVTX's injection (docs/cuda.md), unless
     * the user named another injection library (Nsight): that one keeps them. */
    static char env_nvtx[PATH_MAX + 32];
    const char *old_nvtx = getenv("NVTX_INJECTION64_PATH");
    if (!old_nvtx || !*old_nvtx) {
        snprintf(env_nvtx, sizeof env_nvtx, "NVTX_INJECTION64_PATH=%s", agent_path);
        env_add[nenv++] = env_nvtx;
    } else {
        cli_log(1, "NVTX_INJECTION64_PATH is set (%s): NVTX ranges go there, not to memscope",
                old_nvtx);
    }
    /* The agent speaks on this stderr only while the program's fd 2 is still it (a program
     * that reopened fd 2 as its own file gets nothing written there): its device and inode. */
    static char env_stderr[64];
    struct stat err_st;
    if (fstat(2, &err_st) == 0) {
        snprintf(env_stderr, sizeof env_stderr, MS_ENV_STDERR "=%llu:%llu",
                 (unsigned long long)err_st.st_dev, (unsigned long long)err_st.st_ino);
        env_add[nenv++] = env_stderr;
    }
    static char env_device[128];
    if (o->device) {
        snprintf(env_device, sizeof env_device, MS_ENV_DEVICE "=%s", o->device);
        env_add[nenv++] = env_device;
    }
    static char env_analysis[300];
    if (o->analysis[0] && !o->steps[0]) { /* the Python layer's activation owners */
        snprintf(env_analysis, sizeof env_analysis, MS_ENV_ANALYSIS "=%s", o->analysis);
        env_add[nenv++] = env_analysis;
    }
    static char env_steps[96];
    if (o->steps[0]) {
        snprintf(env_steps, sizeof env_steps, MS_ENV_STEPS "=%s", o->steps);
        env_add[nenv++] = env_steps;
    }
    env_add[nenv] = NULL;
}

/* The live monitor of this run (--metrics, --limit, --warn-before): released when memscope
 * exits (cmd_run), so that the last values are served through the conversion. */
static struct monitor run_monitor;

/* Opens the live monitor before anything runs: a port in use stops the run before the program
 * starts. Returns 0, or 1 after saying why. */
static int monitor_plan(const struct run_options *o, const struct run_paths *rp)
{
    if (!o->metrics && !o->limit && !o->warn_before)
        return 0;
    struct monitor_opts mo = {.trace_dir = rp->trace_dir,
                              .listen = o->metrics,
                              .rank = o->rank,
                              .limit = o->limit,
                              .warn_before = o->warn_before ? o->warn_before : 60,
                              .report_dir = rp->out_dir,
                              .own_processes = 1};
    char err[512];
    if (monitor_open(&run_monitor, &mo, err, sizeof err) < 0) {
        cli_error("--metrics: %s; nothing was run", err);
        return 1;
    }
    return 0;
}

static int run_main(int argc, char **argv);

int cmd_run(int argc, char **argv)
{
    run_monitor.lfd = -1;
    int rc = run_main(argc, argv);
    monitor_release(&run_monitor);
    return rc;
}

static int run_main(int argc, char **argv)
{
    struct run_options o = {
        .c_depth = MS_RUN_C_DEPTH, .format = FMT_COMPACT, .symbolize = 1, .unwind_dwarf = 1};
    int rc = run_parse_options(argc, argv, &o);
    if (rc >= 0)
        return rc;
    char agent_path[PATH_MAX];
    if (run_find_agent(agent_path, sizeof agent_path) < 0) {
        cli_error("cannot find the agent libmemscope.so next to the memscope binary or in "
                  "../%s (set MEMSCOPE_AGENT to its path)",
                  "lib/memscope");
        return 1;
    }
    char why[300];
    if (run_sanitized_program(o.prog[0], why, sizeof why)) {
        /* never started: under the agent it would abort (or spin) at start (docs/cli.md) */
        cli_error("cannot trace '%s': %s; run a build without the sanitizer under memscope "
                  "(nothing was run)",
                  o.prog[0], why);
        return 2;
    }

    struct run_paths rp;
    memset(&rp, 0, sizeof rp);
    if ((rc = plan_output(&o, &rp)) != 0) {
        undo_output(&rp);
        return rc;
    }
    if (monitor_plan(&o, &rp) != 0) {
        undo_output(&rp);
        return 1;
    }
    char *env_add[ENV_MAX];
    agent_environment(&o, &rp, agent_path, env_add);

    struct sigaction ign = {.sa_handler = SIG_IGN}, fwd = {.sa_handler = forward_signal}, old_int,
                     old_quit;
    sigaction(SIGINT, &ign, &old_int);
    sigaction(SIGQUIT, &ign, &old_quit);
    sigaction(SIGTERM, &fwd, NULL);
    sigaction(SIGHUP, &fwd, NULL);
    int exec_errno = 0;
    pid_t pid = spawn(o.prog, env_add, &exec_errno);
    if (pid < 0) {
        struct stat pst;
        const char *why = strerror(exec_errno);
        if (exec_errno == EACCES && strchr(o.prog[0], '/') && stat(o.prog[0], &pst) == 0)
            why = S_ISDIR(pst.st_mode) ? "it is a directory" : "it is not executable";
        else if (exec_errno == ENOENT && !strchr(o.prog[0], '/'))
            why = "no such program on PATH";
        cli_error("cannot run '%s': %s; nothing was recorded", o.prog[0], why);
        undo_output(&rp);
        return 127;
    }
    child_pid = pid;
    struct usage_sampler sampler = {0};
    if (!o.usage_off && usage_sampler_start(&sampler, rp.trace_dir, pid,
                                            o.usage_interval ? o.usage_interval : 0.1) < 0)
        cli_log(2, "cannot sample memory usage into %s; the run goes on without it", rp.trace_dir);
    if (run_monitor.f.dir[0] && monitor_start(&run_monitor) < 0)
        cli_log(2, "cannot start the live monitor; the run goes on without it");
    int signo, core;
    int status = wait_child(pid, &signo, &core);
    child_pid = 0;
    monitor_programs_ended(&run_monitor);
    usage_sampler_stop(&sampler);
    cli_log(0,
            "usage sampler: %llu samples in %llu ticks, %.1f ms of CPU; %llu pagemap walks "
            "(%.1f ms of CPU), %llu written; %llu PSS/USS reads (%.1f ms of CPU); %llu "
            "directory listings",
            (unsigned long long)sampler.samples, (unsigned long long)sampler.ticks,
            sampler.cpu_ns / 1e6, (unsigned long long)sampler.walks, sampler.walk_cpu_ns / 1e6,
            (unsigned long long)sampler.walks_written, (unsigned long long)sampler.smaps_reads,
            sampler.smaps_cpu_ns / 1e6, (unsigned long long)sampler.listings);
    if (signo)
        run_say_killed(signo, core);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGQUIT, &old_quit, NULL);
    /* From here on a SIGINT, SIGTERM or SIGHUP stops the conversion cleanly: what is
     * half-written goes, the traces stay, and memscope exits with the signal's status. */
    struct sigaction stop = {.sa_handler = on_stop_signal};
    sigaction(SIGINT, &stop, NULL);
    sigaction(SIGTERM, &stop, NULL);
    sigaction(SIGHUP, &stop, NULL);
    run_print_agent_messages(rp.trace_dir);

    if (o.format == FMT_TRACE) {
        if (!o.no_pack)
            pack_traces(rp.trace_dir, rp.run_start);
        if (cli_log_level <= 1)
            fprintf(stderr,
                    "memscope: traces kept in %s (convert with memscope import %s "
                    "-o run.db)\n",
                    rp.trace_dir, rp.trace_dir);
        return status;
    }
    char db_path[PATH_MAX + 160]; /* out_file: named by plan_output */
    if (o.format == FMT_CSV) {    /* the CSV's database: a name beside it no one can guess */
        if (ms_temp_name(db_path, sizeof db_path, rp.out_file, CSV_DB_TAG) < 0)
            snprintf(db_path, sizeof db_path, "%s.tmp.db", rp.out_file);
    } else {
        snprintf(db_path, sizeof db_path, "%s", rp.out_file);
    }

    struct ms_store_options so = {
        .trace_dir = rp.abs_trace,
        .db_path = db_path,
        .argv = (const char *const *)o.prog,
        .exit_status = status,
        .call_stack_c = o.c_depth,
        .events = o.events,
        .oom_k = oom_k_of(o.analysis),
        .stop = &stop_signal,
        .symbolize = o.symbolize,
        .compact = o.format == FMT_COMPACT,
    };
    struct ms_store_result res;
    char err[512] = "";
    monitor_stop(&run_monitor); /* its last tick done; the conversion forks: no thread may run */
    rc = run_convert(&so, &stop_signal, &res, err, sizeof err);
    if (rc == -EINTR && stop_signal) {
        cli_error("stopped by %s during the conversion; the traces are kept in %s (convert them "
                  "with: memscope import %s -o %s)",
                  strsignal(stop_signal), rp.trace_dir, rp.trace_dir, db_path);
        return 128 + stop_signal;
    }
    if (rc == MS_ENOTFOUND && run_dir_empty(rp.trace_dir)) {
        /* The agent never loaded: say why, and the program's status is the answer. */
        char why[256];
        run_untraceable_reason(o.prog[0], why, sizeof why);
        cli_error("'%s' ran untraced: %s; nothing was recorded", o.prog[0], why);
        undo_output(&rp);
        return run_budgets_status(&o, status, run_budgets_unchecked(&o));
    }
    struct stat tst;
    if (rc < 0 && lstat(rp.trace_dir, &tst) != 0) {
        /* removed while the program ran (a program that cleans its output directory) */
        int out_gone = lstat(rp.out_dir, &tst) != 0;
        cli_error("cannot write the database: the trace directory %s was removed while the program "
                  "ran%s%s; nothing recorded remains",
                  rp.trace_dir, out_gone ? ", and the output directory " : "",
                  out_gone ? rp.out_dir : "");
        return status ? status : 1;
    }
    if (rc < 0) {
        cli_error("cannot write the database: %s; the raw traces are kept in %s", err,
                  rp.trace_dir);
        return status ? status : 1;
    }
    if (res.warning[0])
        cli_log(2, "some trace data was damaged and skipped: %s", res.warning);
    if (res.lost_events)
        cli_log(2,
                "%llu events of the program were lost (the agent could not record them): the "
                "counts, peaks and leaks leave them out",
                (unsigned long long)res.lost_events);
    if (o.format == FMT_CSV) {
        struct ms_output mo;
        rc = ms_output_open(&mo, rp.out_file); /* renamed over out_file when complete */
        FILE *f = rc == 0 ? fdopen(mo.fd, "w") : NULL;
        if (!f) {
            cli_error("cannot write '%s': %s", rp.out_file, strerror(rc < 0 ? -rc : errno));
            ms_output_abort(&mo);
            return status ? status : 1;
        }
        rc = ms_store_export_csv(db_path, f, err, sizeof err);
        if (fclose(f) != 0 && rc == 0)
            rc = -errno;
        mo.fd = -1; /* fclose closed it */
        if (rc == 0)
            rc = ms_output_commit(&mo);
        if (rc < 0) {
            ms_output_abort(&mo);
            cli_error("cannot write '%s': %s", rp.out_file, err[0] ? err : ms_strerror(rc));
            return status ? status : 1;
        }
    }
    if (cli_log_level <= 1)
        ms_analyze_summary(db_path, stderr);
    if (o.analysis[0] && o.steps[0]) {
        /* the trace holds some steps only: a block freed in a step left out looks live */
        cli_log(2, "--steps %s: the run records some steps only; --analysis=%s not run", o.steps,
                o.analysis);
    } else if (o.analysis[0]) {
        struct ms_analyze_opts ao;
        ms_analyze_opts_init(&ao);
        ao.write_back = 1; /* as msMemScope: inefficient findings land in the run's database */
        ao.leak_rule = MS_LEAKS_MSMEMSCOPE; /* --analysis=leaks is msMemScope's option */
        fflush(stderr);
        if (ms_analyze_run_list(db_path, o.analysis, &ao, stderr, err, sizeof err) < 0)
            cli_error("analysis: %s", err);
    }
    int budgets = run_budgets_check(&o, db_path); /* docs/ci.md */
    if (o.format == FMT_CSV)
        unlink(db_path);
    long running = run_running_writer(rp.trace_dir);
    if (running > 0) {
        /* a descendant that outlived the program (a daemon) still writes its trace: the
         * database has what it wrote so far; nothing it writes is deleted */
        cli_log(2,
                "process %ld (started by the program) is still running and writing its "
                "trace: the traces are kept in %s (convert them again with memscope import %s "
                "-o NEW.db once it has ended)",
                running, rp.trace_dir, rp.trace_dir);
    } else if (!o.keep_trace)
        run_remove_tree(rp.trace_dir);
    else if (!o.no_pack)
        pack_traces(rp.trace_dir, rp.run_start);
    if (cli_log_level <= 1)
        fprintf(stderr, "memscope: %s written to %s%s%s\n",
                o.format == FMT_CSV ? "CSV" : "database", rp.out_file,
                o.keep_trace ? "; traces kept in " : "", o.keep_trace ? rp.trace_dir : "");
    if (cli_log_level <= 1 && o.format == FMT_COMPACT) /* what used to be there */
        fprintf(stderr,
                "memscope: a compact database, for memscope analyze; one row per event "
                "(what MindStudio Insight opens: memscope_dump_<stamp>.db beside it): "
                "memscope export %s --format=db\n",
                rp.out_file);
    return run_budgets_status(&o, status, budgets);
}

/* exec.c: the programs this image starts (issue 37). Each exec (execve and the functions that
 * end in it: execv, execvp, execvpe, execl, execlp, execle, fexecve) and each posix_spawn is
 * written as an EXEC record (trace/format.h) before the exec, saying whether the new program
 * can be traced and, when it cannot, why: its environment lacks the agent (a wrapper that sets
 * its own LD_PRELOAD, `env -i`), or the program cannot load it (static, 32-bit, a setuid
 * program, a sanitizer runtime that must load first: common/elf_probe.h). An exec that returns
 * is followed by EXEC_FAILED. The converter matches each EXEC with the trace the program wrote,
 * or reports it untraced (table untraced), which also catches a program whose agent could not
 * create its trace (after a change of user). With --no-follow, or after a seccomp filter
 * stopped the agent (sandbox.c), nothing is written: those programs run untraced on purpose.
 * A program that starts another with an inline system call instruction, or through glibc's
 * system() and popen() (which call the kernel themselves, with the process's own environment),
 * is not seen here. Workload: a few calls per exec. */
#include "agent.h"

#include "common/elf_probe.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

extern char **environ;

/* The real functions (RTLD_NEXT), looked up at start (agent_exec_init), or at first use by an
 * exec that comes before it (in another library's constructor). */
static void *real(const char *name, void **slot)
{
    void *f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (!f) {
        agent_tls.internal++; /* dlsym may allocate: memscope's own */
        f = dlsym(RTLD_NEXT, name);
        agent_tls.internal--;
        __atomic_store_n(slot, f, __ATOMIC_RELEASE);
    }
    return f;
}
static void *real_execve, *real_execvpe, *real_fexecve, *real_posix_spawn, *real_posix_spawnp;
#define REAL(type, name) type name##_fn = (type)real(#name, &real_##name)

void agent_exec_init(void)
{
    /* Now, not at the first exec: a forked child of a multi-threaded program may call only
     * async-signal-safe functions before its exec, and dlsym takes the loader's lock. */
    real("execve", &real_execve);
    real("execvpe", &real_execvpe);
    real("fexecve", &real_fexecve);
    real("posix_spawn", &real_posix_spawn);
    real("posix_spawnp", &real_posix_spawnp);
}

/* The value of NAME= in envp, or NULL. */
static const char *env_get(char *const envp[], const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; envp && envp[i] && i < 1000000; i++)
        if (!strncmp(envp[i], name, n) && envp[i][n] == '=')
            return envp[i] + n + 1;
    return NULL;
}

/* Whether an LD_PRELOAD value names the agent (a libmemscope.so word, separated by ':' or
 * spaces, as the loader reads it). */
static int names_agent(const char *v)
{
    while (v && *v) {
        while (*v == ' ' || *v == ':')
            v++;
        const char *e = v;
        while (*e && *e != ' ' && *e != ':')
            e++;
        if (e - v >= 14 && !memcmp(e - 14, "libmemscope.so", 14))
            return 1;
        v = e;
    }
    return 0;
}

/* Why the program in file (open at fd) cannot load the agent, or MS_EXEC_TRACED. A script
 * ("#!") is judged by its interpreter (depth 0 only: the kernel allows a few levels, the
 * first one says enough). */
static int judge_file(int fd, int depth)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        return MS_EXEC_TRACED;
    if (((st.st_mode & S_ISUID) && st.st_uid != geteuid()) ||
        ((st.st_mode & S_ISGID) && st.st_gid != getegid()))
        return MS_EXEC_SETUID;
    struct ms_elf_info ei;
    if (ms_elf_inspect(fd, &ei) < 0)
        return MS_EXEC_TRACED;
    if (ei.elf) {
        if (!ei.native)
            return MS_EXEC_FOREIGN;
        if (!ei.dynamic)
            return MS_EXEC_STATIC;
        if (ei.sanitizer_blocks)
            return MS_EXEC_SANITIZER;
        return MS_EXEC_TRACED;
    }
    char line[256];
    ssize_t n = depth ? -1 : pread(fd, line, sizeof line - 1, 0);
    if (n < 3 || line[0] != '#' || line[1] != '!')
        return MS_EXEC_TRACED;
    line[n] = 0;
    char *p = line + 2;
    while (*p == ' ' || *p == '\t')
        p++;
    char *e = p;
    while (*e && *e != ' ' && *e != '\t' && *e != '\n')
        e++;
    *e = 0;
    int ifd = *p ? open(p, O_RDONLY | O_CLOEXEC | O_NONBLOCK) : -1;
    if (ifd < 0)
        return MS_EXEC_TRACED;
    int why = judge_file(ifd, depth + 1);
    close(ifd);
    return why == MS_EXEC_SETUID ? MS_EXEC_TRACED : why; /* the kernel ignores setuid there */
}

/* Why the program at path, started with environment envp, will not be traced, or
 * MS_EXEC_TRACED. What the file is comes first: it holds whatever the environment. */
static int judge(const char *path, int fd, char *const envp[])
{
    int own = fd < 0;
    if (own)
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    int why = fd >= 0 ? judge_file(fd, 0) : MS_EXEC_TRACED;
    if (own && fd >= 0)
        close(fd);
    if (why != MS_EXEC_TRACED)
        return why;
    if (!names_agent(env_get(envp, "LD_PRELOAD")))
        return MS_EXEC_NO_PRELOAD;
    const char *dir = env_get(envp, MS_ENV_TRACE_DIR);
    if (!dir || !*dir)
        return MS_EXEC_NO_DIR;
    return MS_EXEC_TRACED;
}

/* file found on PATH as execvp finds it (a name with '/' is itself), into buf; NULL when
 * there is none (the exec fails: nothing to record). */
static const char *search(const char *file, char *buf, size_t len)
{
    if (!file || !*file)
        return NULL;
    if (strchr(file, '/'))
        return file;
    const char *path = getenv("PATH");
    if (!path)
        path = "/bin:/usr/bin"; /* glibc's default */
    size_t fl = strlen(file);
    for (const char *s = path;; s++) {
        const char *e = strchr(s, ':');
        size_t dl = e ? (size_t)(e - s) : strlen(s);
        if (dl + fl + 2 <= len) {
            if (dl)
                memcpy(buf, s, dl);
            else
                buf[0] = '.', dl = 1;
            buf[dl] = '/';
            memcpy(buf + dl + 1, file, fl + 1);
            struct stat st;
            if (access(buf, X_OK) == 0 && stat(buf, &st) == 0 && S_ISREG(st.st_mode))
                return buf;
        }
        if (!e)
            return NULL;
        s = e;
    }
}

/* This process's pid as memscope run sees it (/proc/self counts in the namespace of the
 * /proc mount): in a vfork child too, which shares its parent's agent state. */
static uint64_t outer_pid(void)
{
    char buf[32];
    ssize_t n = readlink("/proc/self", buf, sizeof buf - 1);
    uint64_t v = 0;
    for (ssize_t i = 0; i < n && buf[i] >= '0' && buf[i] <= '9'; i++)
        v = v * 10 + (uint64_t)(buf[i] - '0');
    return v ? v : (uint64_t)getpid();
}

static int watching(void)
{
    return agent.initialized && !agent.broken && !agent.sandboxed && !agent.no_follow &&
           !agent_tls.guard && !agent_tls.internal;
}

/* Writes the EXEC record of program file (searched on PATH when search) about to start in
 * process pid (0: this one) with envp (fd >= 0: fexecve's file). Returns 1 when written;
 * *why (when not NULL): the record's reason. */
static int exec_note(const char *file, int search_path, int fd, char *const envp[], uint64_t pid,
                     int *why)
{
    if (why)
        *why = MS_EXEC_TRACED;
    if (!watching())
        return 0;
    int e = errno;
    char buf[PATH_MAX];
    const char *path = search_path ? search(file, buf, sizeof buf) : file;
    int written = 0;
    if (path) {
        uint64_t v[2] = {pid ? pid : outer_pid(), (uint64_t)judge(path, fd, envp)};
        if (why)
            *why = (int)v[1];
        agent_tls.step_record = 1; /* written in a step --steps leaves out too */
        written = agent_record_ext(MS_EXT_EXEC, v, 2, path, NULL, 0) == 0;
        agent_tls.step_record = 0;
    }
    errno = e;
    return written;
}

/* After an exec that returned (errno kept). */
static void exec_failed(int written)
{
    if (!written)
        return;
    int e = errno;
    agent_tls.step_record = 1;
    agent_record_ext(MS_EXT_EXEC_FAILED, NULL, 0, NULL, NULL, 0);
    agent_tls.step_record = 0;
    errno = e;
}

/* A program built with AddressSanitizer aborts when the agent is loaded before its runtime
 * (and spins with verify_asan_link_order=0): it gets envp without the agent (LD_PRELOAD's
 * libmemscope.so word, MEMSCOPE_TRACE_DIR, an NVTX injection naming the agent) and runs
 * untraced, as its EXEC record says. The copy lives in a private mapping (no malloc: this may
 * be a vfork child); NULL when it cannot be made (envp is then used as it is). */
struct env_copy {
    char **envp;
    size_t len;
};

static int agent_entry(const char *e)
{
    size_t dl = strlen(MS_ENV_TRACE_DIR);
    if (!strncmp(e, MS_ENV_TRACE_DIR, dl) && e[dl] == '=')
        return 1;
    if (!strncmp(e, "NVTX_INJECTION64_PATH=", 22)) {
        size_t n = strlen(e);
        return n >= 14 && !memcmp(e + n - 14, "libmemscope.so", 14);
    }
    return 0;
}

static char **without_agent(char *const envp[], struct env_copy *c)
{
    size_t n = 0, bytes = 0;
    while (envp && envp[n] && n < 1000000)
        n++;
    const char *pre = NULL;
    for (size_t i = 0; i < n; i++)
        if (!strncmp(envp[i], "LD_PRELOAD=", 11))
            pre = envp[i];
    bytes = (n + 1) * sizeof(char *) + (pre ? strlen(pre) + 1 : 0);
    c->len = (bytes + 4095) & ~(size_t)4095;
    void *m = sys_mmap(NULL, c->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return c->envp = NULL;
    char **out = m, *text = (char *)(out + n + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (agent_entry(envp[i]))
            continue;
        if (strncmp(envp[i], "LD_PRELOAD=", 11)) {
            out[k++] = envp[i];
            continue;
        }
        /* LD_PRELOAD without the agent's word; dropped when nothing else is left */
        char *w = text;
        memcpy(w, "LD_PRELOAD=", 11);
        w += 11;
        for (const char *v = envp[i] + 11; *v;) {
            while (*v == ' ' || *v == ':')
                v++;
            const char *e = v;
            while (*e && *e != ' ' && *e != ':')
                e++;
            int ours = e - v >= 14 && !memcmp(e - 14, "libmemscope.so", 14);
            if (e > v && !ours) {
                if (w > text + 11)
                    *w++ = ':';
                memcpy(w, v, (size_t)(e - v));
                w += e - v;
            }
            v = e;
        }
        *w = 0;
        if (w > text + 11)
            out[k++] = text;
    }
    out[k] = NULL;
    return c->envp = out;
}

static void env_copy_release(struct env_copy *c)
{
    if (c->envp)
        sys_munmap(c->envp, c->len);
    c->envp = NULL;
}

typedef int (*execve_t)(const char *, char *const[], char *const[]);
typedef int (*fexecve_t)(int, char *const[], char *const[]);
typedef int (*spawn_t)(pid_t *, const char *, const posix_spawn_file_actions_t *,
                       const posix_spawnattr_t *, char *const[], char *const[]);

AGENT_API int execve(const char *path, char *const argv[], char *const envp[])
{
    REAL(execve_t, execve);
    int why, w = exec_note(path, 0, -1, envp, 0, &why);
    struct env_copy ec = {0};
    char *const *env = why == MS_EXEC_SANITIZER && without_agent(envp, &ec) ? ec.envp : envp;
    int rc = execve_fn ? execve_fn(path, argv, env) : (errno = ENOSYS, -1);
    exec_failed(w);
    env_copy_release(&ec);
    return rc;
}

AGENT_API int execv(const char *path, char *const argv[])
{
    return execve(path, argv, environ); /* glibc's execv is exactly this */
}

AGENT_API int execvpe(const char *file, char *const argv[], char *const envp[])
{
    REAL(execve_t, execvpe);
    int why, w = exec_note(file, 1, -1, envp, 0, &why);
    struct env_copy ec = {0};
    char *const *env = why == MS_EXEC_SANITIZER && without_agent(envp, &ec) ? ec.envp : envp;
    int rc = execvpe_fn ? execvpe_fn(file, argv, env) : (errno = ENOSYS, -1);
    exec_failed(w);
    env_copy_release(&ec);
    return rc;
}

AGENT_API int execvp(const char *file, char *const argv[])
{
    return execvpe(file, argv, environ); /* glibc's execvp is exactly this */
}

AGENT_API int fexecve(int fd, char *const argv[], char *const envp[])
{
    REAL(fexecve_t, fexecve);
    char path[64] = "/proc/self/fd/";
    char *p = path + 14, tmp[16];
    int n = 0;
    for (unsigned v = fd >= 0 ? (unsigned)fd : 0; n == 0 || v; v /= 10)
        tmp[n++] = (char)('0' + v % 10);
    while (n)
        *p++ = tmp[--n];
    *p = 0;
    int why, w = exec_note(path, 0, fd, envp, 0, &why);
    struct env_copy ec = {0};
    char *const *env = why == MS_EXEC_SANITIZER && without_agent(envp, &ec) ? ec.envp : envp;
    int rc = fexecve_fn ? fexecve_fn(fd, argv, env) : (errno = ENOSYS, -1);
    exec_failed(w);
    env_copy_release(&ec);
    return rc;
}

/* execl, execlp, execle: their arguments as an argv (on the stack, as glibc's own do). */
#define LIST_ARGV(arg, ap, argv, envp_out) \
    size_t argc_ = 1;                      \
    va_start(ap, arg);                     \
    while (va_arg(ap, const char *))       \
        argc_++;                           \
    va_end(ap);                            \
    char *argv[argc_ + 1];                 \
    argv[0] = (char *)arg;                 \
    va_start(ap, arg);                     \
    for (size_t i_ = 1; i_ <= argc_; i_++) \
        argv[i_] = va_arg(ap, char *);     \
    envp_out = va_arg(ap, char *const *);  \
    va_end(ap)

AGENT_API int execl(const char *path, const char *arg, ...)
{
    va_list ap;
    char *const *unused;
    LIST_ARGV(arg, ap, argv, unused);
    (void)unused;
    return execv(path, argv);
}

AGENT_API int execlp(const char *file, const char *arg, ...)
{
    va_list ap;
    char *const *unused;
    LIST_ARGV(arg, ap, argv, unused);
    (void)unused;
    return execvp(file, argv);
}

AGENT_API int execle(const char *path, const char *arg, ...)
{
    va_list ap;
    char *const *envp;
    LIST_ARGV(arg, ap, argv, envp);
    return execve(path, argv, envp);
}

/* posix_spawn: the child is another process, found by its pid once it started (the record is
 * written then); a sanitized program is judged before, to start it without the agent. */
static int spawn(spawn_t fn, int search_path, pid_t *pid, const char *file,
                 const posix_spawn_file_actions_t *fa, const posix_spawnattr_t *attr,
                 char *const argv[], char *const envp[])
{
    pid_t child = 0;
    char buf[PATH_MAX];
    const char *path = search_path ? search(file, buf, sizeof buf) : file;
    struct env_copy ec = {0};
    char *const *env = envp ? envp : environ;
    if (watching() && path && judge(path, -1, env) == MS_EXEC_SANITIZER && without_agent(env, &ec))
        env = ec.envp;
    int rc = fn ? fn(&child, file, fa, attr, argv, env) : ENOSYS;
    env_copy_release(&ec);
    if (pid)
        *pid = child;
    if (rc == 0 && child > 0)
        exec_note(file, search_path, -1, envp ? envp : environ, (uint64_t)child, NULL);
    return rc;
}

AGENT_API int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                          const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
    REAL(spawn_t, posix_spawn);
    return spawn(posix_spawn_fn, 0, pid, path, fa, attr, argv, envp);
}

AGENT_API int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
                           const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
    REAL(spawn_t, posix_spawnp);
    return spawn(posix_spawnp_fn, 1, pid, file, fa, attr, argv, envp);
}

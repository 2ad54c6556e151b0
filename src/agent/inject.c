/* inject.c: the agent's side of `memscope attach PID` (src/cli/cmd_attach.c): entry points that
 * memscope calls inside a running process it has loaded the agent into with ptrace
 * (src/cli/inject.c makes one of the process's threads call dlopen, then these).
 *
 * memscope__inject_start(config) starts a session: the configuration comes as a block of
 * "NAME=value" strings (the MEMSCOPE_* variables memscope run puts in a program's environment,
 * common/agent_api.h), since the process's environment is the user's and stays untouched;
 * the first session starts the agent (agent_start), later ones give it a new trace file
 * (agent_restart); then memscope__attach() redirects the process's GOT slots of malloc & co.
 * to the agent (attach.c). memscope__inject_stop() ends it: the slots get the C library's
 * functions back (memscope__detach), recording stops, and the trace file is let go
 * (inject_release): every mapping of it in the process becomes anonymous memory at the same
 * address (a thread still writing a record there writes into memory no one reads, never into
 * an unmapped page) and its descriptor is closed, so that the process keeps neither the file
 * nor its disk space; each thread's chunk address is unmapped by the thread itself when it
 * next takes a chunk (a later session) or exits (writer.c). The agent stays loaded (it is
 * linked -z nodelete: pointers to its functions taken while attached stay valid), so a second
 * attach finds it and calls memscope__inject_start again, with no new memory but the new
 * trace file's chunks.
 *
 * In a Python process the session's start and stop also hand Python code to the interpreter
 * (python_run_later): memscope._attach installs and removes the Python stack hook.
 *
 * Called once per attach and detach, by one thread, while the process's other threads run:
 * the cost is secondary to never harming the process. */
#include "agent.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#define CFG_MAX 8192 /* bytes of configuration (a path and a few numbers) */

static char cfg[CFG_MAX];
static size_t cfg_len;    /* 0: no block (the environment rules) */
static int session;       /* 1 between inject_start and inject_stop */
static int owner_fd = -1; /* a pidfd of memscope attach during a session, or -1 */
static int orphan_lock;   /* one thread lets an orphaned session go */
static void owner_close(void);

/* ---- Python processes ----
 * The Python stack hook (the memscope package's _native) is installed by Python code, which
 * may only run in the interpreter's own time: Py_AddPendingCall() (callable from any thread,
 * without the GIL) has the main thread run PyRun_SimpleString(code) at its next check between
 * bytecodes. The code lives in static buffers, one per kind, until then. */
#define PY_CODE_MAX 4096
static char py_start_code[PY_CODE_MAX], py_stop_code[PY_CODE_MAX];
static int py_session; /* the start code was handed to the interpreter */

static int (*py_run)(const char *); /* PyRun_SimpleString */

/* The pending call: runs the code with this thread's allocations not recorded (memscope's own
 * imports and hook are not the program's memory; memscope__quiet). */
static int py_pending(void *code)
{
    agent_tls.quiet++;
    int rc = py_run((const char *)code);
    agent_tls.quiet--;
    return rc;
}

/* Hands the value of cfg key to the interpreter through buf; 1 when it was. */
static int python_run_later(const char *key, char *buf)
{
    const char *code = agent_getenv(key);
    if (!code || !*code || strlen(code) >= PY_CODE_MAX)
        return 0;
    int (*initialized)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "Py_IsInitialized");
    int (*add)(int (*)(void *), void *) =
        (int (*)(int (*)(void *), void *))dlsym(RTLD_DEFAULT, "Py_AddPendingCall");
    py_run = (int (*)(const char *))dlsym(RTLD_DEFAULT, "PyRun_SimpleString");
    if (!initialized || !add || !py_run || !initialized())
        return 0;
    memcpy(buf, code, strlen(code) + 1);
    return add(py_pending, buf) == 0;
}

const char *agent_getenv(const char *name)
{
    if (!cfg_len)
        return getenv(name);
    size_t nl = strlen(name);
    for (size_t i = 0; i < cfg_len;) {
        const char *e = cfg + i;
        size_t l = strnlen(e, cfg_len - i);
        if (l > nl && !memcmp(e, name, nl) && e[nl] == '=')
            return e + nl + 1;
        i += l + 1;
    }
    return NULL;
}

/* Parses the start of a /proc/self/maps line [s, e): "lo-hi perms offset maj:min inode".
 * Returns 1 and fills the numbers when the line has that form. */
static int maps_line(const char *s, const char *e, unsigned long v[7])
{
    /* v: 0 lo, 1 hi, 2 perms (not kept), 3 offset, 4 major, 5 minor, 6 inode */
    static const char sep[6] = {'-', ' ', ' ', ' ', ':', ' '};
    int f = 0, digits = 0;
    for (int i = 0; i < 7; i++)
        v[i] = 0;
    for (; s < e; s++) {
        char c = *s;
        if (f < 6 && c == sep[f]) {
            if (!digits && f != 2)
                return 0;
            f++, digits = 0;
            continue;
        }
        if (f == 2) { /* perms: rwxp */
            digits = 1;
            continue;
        }
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0 || (f == 6 && d > 9))
            break;
        v[f] = v[f] * (f == 6 ? 10 : 16) + (unsigned long)d;
        digits++;
    }
    return f == 6 && digits;
}

/* The trace file's mappings in this process, from /proc/self/maps (read with raw system calls
 * into a buffer on the stack: no allocation), each replaced by anonymous memory. */
static void unmap_trace_file(void)
{
    if (!agent.fd_ino)
        return;
    unsigned long want_maj = major((dev_t)agent.fd_dev), want_min = minor((dev_t)agent.fd_dev);
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    /* The ranges first, replaced once the file is read: it is not read while it changes. */
    enum { MAX_RANGES = 4096 };
    static uintptr_t ranges[MAX_RANGES][2];
    unsigned n = 0;
    char buf[8192];
    size_t have = 0;
    for (;;) {
        ssize_t r = read(fd, buf + have, sizeof buf - have);
        if (r <= 0)
            break;
        have += (size_t)r;
        size_t start = 0;
        for (size_t i = 0; i < have; i++) {
            if (buf[i] != '\n')
                continue;
            unsigned long v[7];
            if (maps_line(buf + start, buf + i, v) && v[6] == (unsigned long)agent.fd_ino &&
                v[4] == want_maj && v[5] == want_min && v[1] > v[0] && n < MAX_RANGES) {
                ranges[n][0] = v[0];
                ranges[n][1] = v[1];
                n++;
            }
            start = i + 1;
        }
        if (start == 0 && have == sizeof buf)
            start = have; /* a line longer than the buffer (a long path): its start was read */
        memmove(buf, buf + start, have - start);
        have -= start;
    }
    close(fd);
    for (unsigned i = 0; i < n; i++)
        sys_mmap((void *)ranges[i][0], ranges[i][1] - ranges[i][0], PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
}

/* Lets the trace file go (see the top of the file). */
static void inject_release(void)
{
    unmap_trace_file();
    int fd = agent.fd;
    agent.fd = -1;
    if (fd >= 0 && agent_fd_is(fd, agent.fd_dev, agent.fd_ino))
        close(fd);
    /* agent.hdr stays: a late writer_lost() finds the anonymous page there (unmapped by the
     * next session's agent_restart) */
}

void inject_after_fork_child(void)
{
    if (!session)
        return; /* detached: no file to let go (every fork after a session costs nothing) */
    __atomic_store_n(&agent.recording, 0, __ATOMIC_RELEASE);
    session = 0;
    agent_tls.internal++;
    inject_release();
    owner_close(); /* the child's copy */
    agent_tls.internal--;
}

/* The owner's pidfd, opened when the session starts (at a high descriptor number, as the trace
 * file's: out of the program's way), closed when it ends. */
static void owner_open(void)
{
    const char *v = agent_getenv(MS_CFG_OWNER);
    long pid = v ? strtol(v, NULL, 10) : 0;
    owner_fd = -1;
    if (pid <= 0)
        return;
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (fd < 0)
        return; /* a kernel without pidfds (before 5.3): no watch */
    int high = fcntl(fd, F_DUPFD_CLOEXEC, 800);
    if (high >= 0) {
        close(fd);
        fd = high;
    }
    owner_fd = fd;
}

static void owner_close(void)
{
    int fd = owner_fd;
    owner_fd = -1;
    if (fd >= 0)
        close(fd);
}

int inject_orphaned(void)
{
    int fd = __atomic_load_n(&owner_fd, __ATOMIC_ACQUIRE);
    if (fd < 0)
        return 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 0) <= 0)
        return 0; /* alive (or the descriptor is not a pidfd any more: nothing known) */
    if (!spin_trylock(&orphan_lock))
        return 1; /* another thread is letting it go */
    if (session) {
        __atomic_store_n(&agent.recording, 0, __ATOMIC_RELEASE);
        session = 0;
        agent_tls.internal++;
        inject_release(); /* the GOT stays redirected: the agent forwards, nothing is written */
        owner_close();
        agent_tls.internal--;
        agent_say("memscope attach ended without stopping the recording: stopped", NULL);
    }
    spin_unlock(&orphan_lock);
    return 1;
}

/* Starts a session: config is the block "NAME=value\0...NAME=value\0\0" (at most CFG_MAX
 * bytes), copied. Returns 0, or -EBUSY when the agent was loaded otherwise (memscope run's
 * LD_PRELOAD, the Python package's memscope.start()) or a session is running, -EINVAL for a
 * bad block or no trace directory in it, -ENOTSUP when another allocator is in use, or the
 * -errno of creating the trace file. */
AGENT_API int memscope__inject_start(const char *config)
{
    if (session)
        return -EBUSY;
    if (agent.initialized && !agent.injected)
        return -EBUSY;
    if (!config)
        return -EINVAL;
    size_t n = 0;
    while (n + 1 < CFG_MAX && (config[n] || config[n + 1]))
        n++;
    if (n + 1 >= CFG_MAX)
        return -EINVAL;
    int err = errno;
    agent_tls.internal++;
    memcpy(cfg, config, n + 1);
    cfg[n + 1] = 0;
    cfg_len = n + 1;
    int rc;
    if (!agent.initialized) {
        agent.injected = 1;
        rc = agent_start();
    } else {
        struct ms_trace_file_header *old = agent.hdr;
        rc = agent_restart();
        if (old && old != agent.hdr)
            sys_munmap(old, MS_TRACE_HEADER_SIZE); /* the last session's, anonymous now */
    }
    if (rc == 0) {
        rc = memscope__attach();
        if (rc < 0) {
            __atomic_store_n(&agent.recording, 0, __ATOMIC_RELEASE);
            inject_release();
        }
    }
    session = rc == 0;
    if (session)
        owner_open();
    if (session)
        py_session = python_run_later(MS_CFG_PY_START, py_start_code);
    agent_tls.internal--;
    errno = err;
    return rc;
}

/* Ends the session: the GOT slots back to the C library, recording off, the trace file let
 * go. Returns 0, or -EINVAL when no session runs. */
AGENT_API int memscope__inject_stop(void)
{
    if (!session)
        return -EINVAL;
    int err = errno;
    memscope__detach();
    __atomic_store_n(&agent.recording, 0, __ATOMIC_RELEASE);
    agent_tls.internal++;
    inject_release();
    owner_close();
    if (py_session)
        python_run_later(MS_CFG_PY_STOP, py_stop_code);
    py_session = 0;
    agent_tls.internal--;
    session = 0;
    errno = err;
    return 0;
}

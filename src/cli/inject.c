/* inject.c: calls into another running process with ptrace (inject.h), for `memscope attach`
 * (cmd_attach.c). x86-64 Linux only. Once per attach and per detach: a few system calls, the
 * wait for a safe moment, and the call itself (a dlopen: milliseconds).
 *
 * Why these rules (what gdb-driven attach tools get wrong):
 *  - only PTRACE_SEIZE and PTRACE_INTERRUPT: no SIGSTOP is sent, so a process that blocks
 *    signals, or a job-control shell around it, sees nothing;
 *  - one thread is seized, the others run on: a lock the call needs that another thread holds
 *    is released as usual (stopping every thread, as gdb does, deadlocks the call on it);
 *  - the seized thread is taken at a safe moment only, since the call (dlopen, the agent's
 *    start) allocates and takes the dynamic loader's locks: a thread stopped inside malloc holds
 *    its arena's lock, which is not recursive. Safe: blocked in a system call that only waits
 *    (the list in safe_syscall), or running code that is not the C library's, the dynamic
 *    loader's or the agent's. Else the thread runs on for a millisecond and is looked at again;
 *  - during the call every signal is blocked but the ones a fault raises (a fault while they
 *    are blocked would reset the program's handler to the default), so no handler of the
 *    program runs on top of it and none can longjmp out of it; the call returns to address 0,
 *    and the fault that makes is the tracer's to see and is never delivered;
 *  - the registers put back are those found, orig_rax included, so that a system call the
 *    thread was waiting in is restarted by the kernel as after any signal.
 * NEEDSWORK: a thread caught in a safe-looking state that still holds a lock of the C library
 * (inside a dl_iterate_phdr callback, a fork handler) is not recognized; a thread running on a
 * small alternate signal stack may not have room for the call. */
#include "inject.h"

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef PTRACE_GETSIGMASK
#define PTRACE_GETSIGMASK 0x420a
#define PTRACE_SETSIGMASK 0x420b
#endif
#ifndef PTRACE_EVENT_STOP
#define PTRACE_EVENT_STOP 128
#endif

static void say(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *why, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void nap_ms(int ms)
{
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* Reads a small file into buf (NUL-terminated); its length, or -1. */
static ssize_t read_file(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t n = 0;
    ssize_t r;
    while (n + 1 < cap && (r = read(fd, buf + n, cap - 1 - n)) > 0)
        n += (size_t)r;
    close(fd);
    buf[n] = 0;
    return (ssize_t)n;
}

/* The value of "Key:" in /proc/PID/status (its first number), or -1. */
static long status_field(pid_t pid, const char *key)
{
    char path[64], buf[8192];
    snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
    if (read_file(path, buf, sizeof buf) < 0)
        return -1;
    size_t kl = strlen(key);
    for (char *l = buf; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
        if (!strncmp(l, key, kl) && l[kl] == ':')
            return strtol(l + kl + 1, NULL, 10);
    return -1;
}

/* The process's name (comm) into buf. */
static void comm_of(pid_t pid, char *buf, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/comm", (long)pid);
    if (read_file(path, buf, len) <= 0)
        snprintf(buf, len, "?");
    buf[strcspn(buf, "\n")] = 0;
}

/* Whether this process has CAP_SYS_PTRACE (bit 19 of CapEff). */
static int have_cap_ptrace(void)
{
    char buf[8192];
    if (read_file("/proc/self/status", buf, sizeof buf) < 0)
        return 0;
    const char *p = strstr(buf, "\nCapEff:");
    if (!p)
        return 0;
    unsigned long long caps = strtoull(p + 8, NULL, 16);
    return (caps >> 19) & 1;
}

int inject_check(pid_t pid, char *why, size_t len)
{
    char path[64], buf[1024];
    if (pid <= 0) {
        say(why, len, "%ld is not a process id", (long)pid);
        return -1;
    }
    if (pid == getpid()) {
        say(why, len, "process %ld is memscope itself", (long)pid);
        return -1;
    }
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    if (read_file(path, buf, sizeof buf) <= 0) {
        say(why, len, "no process %ld", (long)pid);
        return -1;
    }
    /* a thread id that is not a process: /proc/TID exists too, but its Tgid differs */
    long tgid = status_field(pid, "Tgid");
    if (tgid > 0 && tgid != pid) {
        say(why, len, "%ld is a thread of process %ld: attach to the process", (long)pid, tgid);
        return -1;
    }
    const char *rp = strrchr(buf, ')');
    char state = rp && rp[1] == ' ' ? rp[2] : '?';
    char comm[64];
    comm_of(pid, comm, sizeof comm);
    if (state == 'Z' || state == 'X') {
        say(why, len, "process %ld (%s) has exited", (long)pid, comm);
        return -1;
    }
    if (state == 'T' || state == 't') {
        say(why, len,
            "process %ld (%s) is stopped (state %c: by a signal such as SIGSTOP or Ctrl-Z, or by "
            "a debugger); continue it first (kill -CONT %ld) and attach again",
            (long)pid, comm, state, (long)pid);
        return -1;
    }
    long tracer = status_field(pid, "TracerPid");
    if (tracer > 0) {
        char tc[64];
        comm_of((pid_t)tracer, tc, sizeof tc);
        say(why, len,
            "process %ld (%s) is already traced by process %ld (%s): a process has one tracer at "
            "a time; detach that one first",
            (long)pid, comm, tracer, tc);
        return -1;
    }
    if (status_field(pid, "Seccomp") == 2) {
        say(why, len,
            "process %ld (%s) runs under a seccomp filter (Seccomp: 2 in /proc/%ld/status): "
            "the system calls of loading the agent (open, mmap ...) could be what it forbids, and "
            "kill it; start it under memscope run instead",
            (long)pid, comm, (long)pid);
        return -1;
    }
    char mine[128], theirs[128];
    snprintf(path, sizeof path, "/proc/%ld/ns/pid", (long)pid);
    ssize_t a = readlink("/proc/self/ns/pid", mine, sizeof mine - 1);
    ssize_t b = readlink(path, theirs, sizeof theirs - 1);
    if (a > 0 && b > 0) {
        mine[a] = theirs[b] = 0;
        if (strcmp(mine, theirs)) {
            say(why, len,
                "process %ld (%s) runs in another PID namespace (a container) than memscope: "
                "its agent could not name its processes nor reach memscope's files; run "
                "memscope attach inside that namespace (e.g. with nsenter or docker exec)",
                (long)pid, comm);
            return -1;
        }
    } else if (b < 0 && errno == EACCES) {
        say(why, len, "process %ld (%s) is not ours to trace: permission denied reading %s",
            (long)pid, comm, path);
        return -1;
    }
    int cap = have_cap_ptrace();
    char scope_s[16];
    if (read_file("/proc/sys/kernel/yama/ptrace_scope", scope_s, sizeof scope_s) > 0) {
        int scope = atoi(scope_s);
        if (scope == 3) {
            say(why, len,
                "the kernel forbids tracing any process (kernel.yama.ptrace_scope = 3, until the "
                "next reboot): memscope attach cannot work here; start the program under "
                "memscope run instead");
            return -1;
        }
        if (scope == 2 && !cap) {
            say(why, len,
                "kernel.yama.ptrace_scope = 2: only a process with CAP_SYS_PTRACE may trace "
                "another; run memscope attach as root");
            return -1;
        }
        if (scope == 1 && !cap) {
            say(why, len,
                "kernel.yama.ptrace_scope = 1: a process may only trace its own descendants, "
                "and process %ld (%s) is not memscope's; run memscope attach as root (or with "
                "CAP_SYS_PTRACE), or set it to 0 (sysctl kernel.yama.ptrace_scope=0)",
                (long)pid, comm);
            return -1;
        }
    }
    long uid = -1;
    snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
    char st[8192];
    if (read_file(path, st, sizeof st) > 0) {
        const char *u = strstr(st, "\nUid:");
        if (u) {
            long r, e, s;
            if (sscanf(u + 5, "%ld %ld %ld", &r, &e, &s) == 3 && !cap &&
                (r != (long)geteuid() || e != (long)geteuid() || s != (long)geteuid()))
                uid = r != (long)geteuid() ? r : e != (long)geteuid() ? e : s;
        }
    }
    struct stat pst;
    snprintf(path, sizeof path, "/proc/%ld", (long)pid);
    if (uid < 0 && !cap && stat(path, &pst) == 0 && pst.st_uid != geteuid()) {
        say(why, len,
            "process %ld (%s) is not ours to trace: it is not dumpable (a set-user-ID program, "
            "or one that called prctl(PR_SET_DUMPABLE, 0)); only root (CAP_SYS_PTRACE) may "
            "trace it",
            (long)pid, comm);
        return -1;
    }
    if (uid >= 0) {
        say(why, len,
            "process %ld (%s) is not ours to trace: it runs as user %ld and memscope as user "
            "%ld without CAP_SYS_PTRACE; run memscope attach as that user or as root",
            (long)pid, comm, uid, (long)geteuid());
        return -1;
    }
    return 0;
}

/* ---- the process's objects ---- */

/* One line of /proc/PID/maps. */
struct map_line {
    uintptr_t lo, hi, off;
    char perms[8];
    unsigned maj, min;
    unsigned long ino;
    char path[PATH_MAX];
};

static int parse_map(const char *l, struct map_line *m)
{
    int n = 0;
    m->path[0] = 0;
    if (sscanf(l, "%lx-%lx %7s %lx %x:%x %lu %n", &m->lo, &m->hi, m->perms, &m->off, &m->maj,
               &m->min, &m->ino, &n) < 7)
        return 0;
    snprintf(m->path, sizeof m->path, "%s", l + n);
    m->path[strcspn(m->path, "\n")] = 0;
    return 1;
}

static FILE *open_maps(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/maps", (long)pid);
    return fopen(path, "re");
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static int unsafe_object(const char *path)
{
    const char *b = base_name(path);
    return !strncmp(b, "libc.so.", 8) || !strncmp(b, "ld-linux", 8) || !strncmp(b, "libc-2.", 7) ||
           !strncmp(b, "libmemscope.so", 14) || !strncmp(b, "libpthread", 10) ||
           !strncmp(b, "libdl.so", 8);
}

int inject_open(struct inject *in, pid_t pid, char *why, size_t len)
{
    memset(in, 0, sizeof *in);
    in->pid = pid;
    in->mem_fd = -1;
    FILE *f = open_maps(pid);
    if (!f) {
        say(why, len, "cannot read the memory map of process %ld: %s", (long)pid, strerror(errno));
        return -1;
    }
    char line[PATH_MAX + 256];
    struct map_line m;
    int libc = 0;
    while (fgets(line, sizeof line, f)) {
        if (!parse_map(line, &m) || m.path[0] != '/')
            continue;
        if (!strncmp(base_name(m.path), "libc.so.", 8))
            libc = 1;
        if (strchr(m.perms, 'x') && unsafe_object(m.path) && in->nunsafe < INJECT_MAX_RANGES) {
            in->unsafe[in->nunsafe][0] = m.lo;
            in->unsafe[in->nunsafe][1] = m.hi;
            in->nunsafe++;
        }
    }
    fclose(f);
    if (!libc) {
        say(why, len,
            "process %ld does not use the shared C library (a static or non-glibc program, or a "
            "kernel thread): memscope attach loads its agent with the C library's dlopen",
            (long)pid);
        return -1;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/mem", (long)pid);
    in->mem_fd = open(path, O_RDWR | O_CLOEXEC);
    if (in->mem_fd < 0) {
        say(why, len, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

void inject_close(struct inject *in)
{
    if (in->tid)
        inject_release(in);
    if (in->mem_fd >= 0)
        close(in->mem_fd);
    in->mem_fd = -1;
}

/* Finds the mapping at file offset 0 of the object (by prefix of its file name, or path).
 * Returns 1 with *m filled. */
static int find_object(pid_t pid, const char *prefix, const char *path, struct stat *want,
                       struct map_line *m)
{
    FILE *f = open_maps(pid);
    if (!f)
        return 0;
    char line[PATH_MAX + 256];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        if (!parse_map(line, m) || m->off != 0 || m->path[0] != '/')
            continue;
        if (prefix)
            found = !strncmp(base_name(m->path), prefix, strlen(prefix));
        else
            found = want && m->ino == (unsigned long)want->st_ino &&
                    makedev(m->maj, m->min) == want->st_dev;
        (void)path;
    }
    fclose(f);
    return found;
}

int inject_other_object(struct inject *in, const char *prefix, const char *path, char *found,
                        size_t len)
{
    struct stat want;
    if (stat(path, &want) != 0)
        return 0;
    FILE *f = open_maps(in->pid);
    if (!f)
        return 0;
    char line[PATH_MAX + 256];
    struct map_line m;
    int other = 0;
    while (!other && fgets(line, sizeof line, f)) {
        if (!parse_map(line, &m) || m.path[0] != '/' ||
            strncmp(base_name(m.path), prefix, strlen(prefix)))
            continue;
        if (m.ino != (unsigned long)want.st_ino || makedev(m.maj, m.min) != want.st_dev) {
            other = 1;
            snprintf(found, len, "%s", m.path);
        }
    }
    fclose(f);
    return other;
}

int inject_has_object(struct inject *in, const char *path)
{
    struct stat st;
    struct map_line m;
    return stat(path, &st) == 0 && find_object(in->pid, NULL, path, &st, &m);
}

/* Reads n bytes at off of fd; 0 or -1. */
static int pread_all(int fd, void *buf, size_t n, off_t off)
{
    return pread(fd, buf, n, off) == (ssize_t)n ? 0 : -1;
}

int inject_symbol(struct inject *in, const char *prefix, const char *path, const char *name,
                  uintptr_t *addr, char *why, size_t len)
{
    struct stat want;
    struct map_line m;
    if (path && stat(path, &want) != 0) {
        say(why, len, "cannot read %s: %s", path, strerror(errno));
        return -ENOENT;
    }
    if (!find_object(in->pid, prefix, path, path ? &want : NULL, &m))
        return -ENOENT;
    int fd = open(m.path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_ino != m.ino || st.st_dev != makedev(m.maj, m.min)) {
        say(why, len,
            "%s in process %ld is not the file of that name on disk (replaced since the process "
            "loaded it, or in another mount namespace)",
            m.path, (long)in->pid);
        if (fd >= 0)
            close(fd);
        return -ESTALE;
    }
    int rc = -ESRCH;
    Elf64_Ehdr eh;
    Elf64_Shdr *sh = NULL;
    Elf64_Phdr ph;
    if (pread_all(fd, &eh, sizeof eh, 0) < 0 || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
        eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_shentsize != sizeof(Elf64_Shdr) ||
        eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_shnum == 0 || eh.e_shnum > 4096) {
        rc = -ENOEXEC;
        goto out;
    }
    /* the load bias: where the first PT_LOAD's page went */
    uintptr_t first = UINTPTR_MAX;
    for (int i = 0; i < eh.e_phnum; i++)
        if (pread_all(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + (uint64_t)i * sizeof ph)) == 0 &&
            ph.p_type == PT_LOAD && ph.p_vaddr < first)
            first = ph.p_vaddr;
    if (first == UINTPTR_MAX) {
        rc = -ENOEXEC;
        goto out;
    }
    uintptr_t bias = m.lo - (first & ~(uintptr_t)4095);
    sh = calloc(eh.e_shnum, sizeof *sh);
    if (!sh || pread_all(fd, sh, eh.e_shnum * sizeof *sh, (off_t)eh.e_shoff) < 0) {
        rc = -ENOEXEC;
        goto out;
    }
    for (int i = 0; i < eh.e_shnum && rc == -ESRCH; i++) {
        if (sh[i].sh_type != SHT_DYNSYM || sh[i].sh_link >= eh.e_shnum ||
            sh[i].sh_entsize != sizeof(Elf64_Sym) || sh[i].sh_size > (64u << 20))
            continue;
        const Elf64_Shdr *strs = &sh[sh[i].sh_link];
        if (strs->sh_size > (64u << 20))
            continue;
        size_t nsym = sh[i].sh_size / sizeof(Elf64_Sym);
        Elf64_Sym *syms = malloc(sh[i].sh_size + 1);
        char *str = malloc(strs->sh_size + 1);
        if (syms && str && pread_all(fd, syms, sh[i].sh_size, (off_t)sh[i].sh_offset) == 0 &&
            pread_all(fd, str, strs->sh_size, (off_t)strs->sh_offset) == 0) {
            str[strs->sh_size] = 0;
            for (size_t k = 0; k < nsym; k++) {
                if (syms[k].st_name >= strs->sh_size || syms[k].st_shndx == SHN_UNDEF ||
                    ELF64_ST_TYPE(syms[k].st_info) != STT_FUNC || syms[k].st_value == 0)
                    continue;
                if (!strcmp(str + syms[k].st_name, name)) {
                    *addr = bias + syms[k].st_value;
                    rc = 0;
                    break;
                }
            }
        }
        free(syms);
        free(str);
    }
    if (rc == -ESRCH)
        say(why, len, "%s does not define %s", m.path, name);
out:
    if (rc == -ENOEXEC)
        say(why, len, "cannot read the symbols of %s", m.path);
    free(sh);
    close(fd);
    return rc;
}

/* ---- the seized thread ---- */

/* Waits for a stop (or the end) of tid; the wait status, or -1 (gone). */
static int wait_tid(pid_t tid)
{
    int st;
    for (;;) {
        pid_t r = waitpid(tid, &st, __WALL);
        if (r == tid)
            return st;
        if (r < 0 && errno != EINTR)
            return -1;
    }
}

/* Whether a system call that the thread is blocked in (or has just made) only waits: no lock
 * of the C library is held around it. */
static int safe_syscall(pid_t pid, const struct user_regs_struct *r)
{
    long nr = (long)r->orig_rax;
    switch (nr) {
    case SYS_nanosleep:
    case SYS_clock_nanosleep:
    case SYS_pause:
    case SYS_rt_sigsuspend:
    case SYS_rt_sigtimedwait:
    case SYS_poll:
    case SYS_ppoll:
    case SYS_select:
    case SYS_pselect6:
    case SYS_epoll_wait:
    case SYS_epoll_pwait:
    case SYS_wait4:
    case SYS_waitid:
    case SYS_accept:
    case SYS_accept4:
    case SYS_recvfrom:
    case SYS_recvmsg: return 1;
    case SYS_futex: /* a condition variable, a join, a semaphore; not a low-level lock's wait */
        return (r->rsi & 127) == 9 /* FUTEX_WAIT_BITSET */;
    case SYS_read:
    case SYS_readv: {
        /* from a pipe, socket or terminal (the dynamic loader reads regular files only) */
        char path[64], target[256];
        snprintf(path, sizeof path, "/proc/%ld/fd/%lu", (long)pid, (unsigned long)r->rdi);
        ssize_t n = readlink(path, target, sizeof target - 1);
        if (n <= 0)
            return 0;
        target[n] = 0;
        return !strncmp(target, "pipe:", 5) || !strncmp(target, "socket:", 7) ||
               !strncmp(target, "/dev/pts/", 9) || !strncmp(target, "/dev/tty", 8);
    }
    default: return 0;
    }
}

static int safe_moment(struct inject *in, const struct user_regs_struct *r)
{
    if ((long)r->orig_rax >= 0)
        return safe_syscall(in->pid, r);
    for (int i = 0; i < in->nunsafe; i++)
        if (r->rip >= in->unsafe[i][0] && r->rip < in->unsafe[i][1])
            return 0;
    return 1;
}

/* Tries thread tid until deadline: 1 seized at a safe moment, 0 not (let go), -1 gone or not
 * traceable (errno). */
static int try_thread(struct inject *in, pid_t tid, double deadline, int *perm)
{
    if (ptrace(PTRACE_SEIZE, tid, 0, 0) < 0) {
        if (errno == EPERM)
            *perm = 1;
        return -1;
    }
    int pending = 0; /* a signal that arrived meanwhile: delivered when the thread goes on */
    for (;;) {
        if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) < 0)
            return -1;
        int st = wait_tid(tid);
        if (st < 0 || !WIFSTOPPED(st))
            return -1;
        if (st >> 16 != PTRACE_EVENT_STOP) {
            /* a signal-delivery stop: the signal goes on, then look again */
            pending = WSTOPSIG(st);
            ptrace(PTRACE_CONT, tid, 0, (void *)(long)pending);
            continue;
        }
        struct user_regs_struct r;
        if (ptrace(PTRACE_GETREGS, tid, 0, &r) < 0) {
            ptrace(PTRACE_DETACH, tid, 0, 0);
            return -1;
        }
        in->looks++;
        if (safe_moment(in, &r)) {
            in->in_syscall = (long)r.orig_rax >= 0;
            in->tid = tid;
            in->saved = r;
            if (ptrace(PTRACE_GETSIGMASK, tid, (void *)sizeof in->saved_mask, &in->saved_mask) < 0)
                in->saved_mask = 0;
            in->scratch = (r.rsp - 512) & ~(uintptr_t)15; /* below the red zone, with room */
            return 1;
        }
        if (now_s() > deadline) {
            ptrace(PTRACE_DETACH, tid, 0, 0);
            return 0;
        }
        ptrace(PTRACE_CONT, tid, 0, 0);
        nap_ms(1);
    }
}

int inject_process_gone(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    if (read_file(path, buf, sizeof buf) <= 0)
        return 1;
    const char *rp = strrchr(buf, ')');
    return rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X');
}

int inject_seize(struct inject *in, double timeout_s, char *why, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/task", (long)in->pid);
    pid_t tids[256];
    int n = 0;
    tids[n++] = in->pid; /* the main thread first */
    DIR *d = opendir(path);
    if (!d) {
        say(why, len, "process %ld has ended", (long)in->pid);
        return -1;
    }
    struct dirent *e;
    while ((e = readdir(d)) && n < 256) {
        long t = strtol(e->d_name, NULL, 10);
        if (t > 0 && t != in->pid)
            tids[n++] = (pid_t)t;
    }
    closedir(d);
    double end = now_s() + timeout_s;
    int perm = 0, any = 0;
    in->tries = in->looks = 0;
    /* each thread gets its share of the time, then another round while time is left */
    for (int round = 0; round < 3 && now_s() < end; round++) {
        for (int i = 0; i < n; i++) {
            double left = end - now_s();
            if (left <= 0)
                break;
            double share = left / (n - i);
            in->tries++;
            int rc = try_thread(in, tids[i], now_s() + (share < 0.05 ? 0.05 : share), &perm);
            if (rc == 1)
                return 0;
            if (rc == 0)
                any = 1;
        }
    }
    if (inject_process_gone(in->pid))
        say(why, len, "process %ld ended during the attach", (long)in->pid);
    else if (perm)
        say(why, len, "process %ld is not ours to trace: ptrace: %s", (long)in->pid,
            strerror(EPERM));
    else if (!any)
        say(why, len, "process %ld ended during the attach, or cannot be traced", (long)in->pid);
    else
        say(why, len,
            "no thread of process %ld was at a safe moment (outside the C library, or waiting in "
            "a system call) within %.0f s; it was left untouched: try again",
            (long)in->pid, timeout_s);
    return -1;
}

int inject_write(struct inject *in, const void *data, size_t n, uintptr_t *addr, char *why,
                 size_t len)
{
    uintptr_t a = (in->scratch - n) & ~(uintptr_t)15;
    if (pwrite(in->mem_fd, data, n, (off_t)a) != (ssize_t)n) {
        say(why, len, "cannot write into process %ld: %s", (long)in->pid, strerror(errno));
        return -1;
    }
    in->scratch = a;
    *addr = a;
    return 0;
}

void inject_read_string(struct inject *in, uintptr_t addr, char *buf, size_t n)
{
    buf[0] = 0;
    if (!addr || n == 0)
        return;
    ssize_t r = pread(in->mem_fd, buf, n - 1, (off_t)addr);
    buf[r > 0 ? r : 0] = 0;
}

static int fault_signal(int sig)
{
    return sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE || sig == SIGTRAP;
}

int inject_call(struct inject *in, uintptr_t fn, const uint64_t *args, int nargs, uint64_t *ret,
                double timeout_s, char *why, size_t len)
{
    pid_t tid = in->tid;
    struct user_regs_struct r = in->saved;
    uintptr_t sp = (in->scratch - 64) & ~(uintptr_t)15;
    sp -= 8; /* as after a call: the return address at sp, sp + 8 aligned */
    uint64_t zero = 0;
    if (pwrite(in->mem_fd, &zero, sizeof zero, (off_t)sp) != (ssize_t)sizeof zero) {
        say(why, len, "cannot write into process %ld: %s", (long)in->pid, strerror(errno));
        return -1;
    }
    unsigned long long *regs[6] = {&r.rdi, &r.rsi, &r.rdx, &r.rcx, &r.r8, &r.r9};
    for (int i = 0; i < nargs && i < 6; i++)
        *regs[i] = args[i];
    r.rip = fn;
    r.rsp = sp;
    r.rax = 0;
    r.orig_rax = (unsigned long long)-1; /* no system call to restart under these registers */
    r.eflags &= ~0x400ull;               /* DF clear, as the ABI wants at a call */
    uint64_t mask = ~0ull;
    int faults[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP};
    for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++)
        mask &= ~(1ull << (faults[i] - 1));
    if (ptrace(PTRACE_SETREGS, tid, 0, &r) < 0 ||
        ptrace(PTRACE_SETSIGMASK, tid, (void *)sizeof mask, &mask) < 0 ||
        ptrace(PTRACE_CONT, tid, 0, 0) < 0) {
        say(why, len, "cannot start the call in process %ld: %s", (long)in->pid, strerror(errno));
        return -1;
    }
    double end = now_s() + timeout_s;
    for (;;) {
        int st;
        pid_t w = waitpid(tid, &st, __WALL | WNOHANG);
        if (w < 0 && errno != EINTR) {
            in->tid = 0; /* gone */
            say(why, len, "process %ld ended during the attach", (long)in->pid);
            return -1;
        }
        if (w == 0) {
            if (now_s() > end) {
                say(why, len, "the call in process %ld did not return within %.0f s", (long)in->pid,
                    timeout_s);
                ptrace(PTRACE_INTERRUPT, tid, 0, 0);
                wait_tid(tid);
                return -1; /* inject_release puts the registers back */
            }
            nap_ms(1);
            continue;
        }
        if (w != tid)
            continue;
        if (WIFEXITED(st) || WIFSIGNALED(st)) {
            in->tid = 0;
            say(why, len, "process %ld ended during the attach", (long)in->pid);
            return -1;
        }
        if (!WIFSTOPPED(st))
            continue;
        int sig = WSTOPSIG(st);
        if (st >> 16 == PTRACE_EVENT_STOP) { /* a group stop or our interrupt: go on */
            ptrace(PTRACE_CONT, tid, 0, 0);
            continue;
        }
        struct user_regs_struct now;
        if (ptrace(PTRACE_GETREGS, tid, 0, &now) < 0) {
            say(why, len, "cannot read the registers of process %ld: %s", (long)in->pid,
                strerror(errno));
            return -1;
        }
        if (sig == SIGSEGV && now.rip == 0) {
            *ret = now.rax;
            return 0;
        }
        if (fault_signal(sig)) {
            say(why, len,
                "the call in process %ld faulted (%s at %#llx); its registers were put "
                "back",
                (long)in->pid, strsignal(sig), (unsigned long long)now.rip);
            return -1;
        }
        ptrace(PTRACE_CONT, tid, 0, (void *)(long)sig); /* cannot be: every other one is blocked */
    }
}

void inject_release(struct inject *in)
{
    if (!in->tid)
        return;
    ptrace(PTRACE_SETREGS, in->tid, 0, &in->saved);
    ptrace(PTRACE_SETSIGMASK, in->tid, (void *)sizeof in->saved_mask, &in->saved_mask);
    ptrace(PTRACE_DETACH, in->tid, 0, 0);
    in->tid = 0;
}

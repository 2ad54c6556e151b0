/* sandbox.c: seccomp filters the program installs (issue 37). A filter that kills on system
 * calls it does not list (systemd's SystemCallFilter=, sshd's privilege-separated child, a
 * browser's renderer) would kill the program on a call only the agent makes (fallocate for a
 * new chunk, openat of /proc/self/maps for a new thread ...), with SIGSYS. So the agent sees
 * the filter before the kernel does: `prctl(PR_SET_SECCOMP, ...)` and `syscall(SYS_seccomp,
 * ...)` (and `syscall(SYS_prctl, ...)`) are interposed, and the filter, a classic BPF program,
 * is run here on each system call the agent may make from then on, with the arguments it
 * passes. When every one would be allowed (ALLOW, LOG, or ERRNO: a failed call is an error the
 * agent handles), recording goes on. Otherwise (KILL_PROCESS, KILL_THREAD, TRAP, TRACE,
 * USER_NOTIF: the call would not simply return), and for strict mode, the agent says so once
 * on stderr while it still may, stops recording for good (the header's stopped_errno: EPERM)
 * and makes no system call again (agent.sandboxed); exec'd programs, which inherit the filter,
 * are not followed. What it recorded before stays.
 * Not seen: a filter installed with an inline system call instruction (no libc call), or one
 * inherited from a parent the agent was not in (docs/cli.md, "Sandboxes").
 * Workload: a few calls per process; the filter's reading is bounded (BPF_MAXINSNS). */
#include "agent.h"

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>

#if defined(__x86_64__)
#define SANDBOX_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define SANDBOX_ARCH AUDIT_ARCH_AARCH64
#endif

/* A system call, as glibc's syscall() makes it, without going through any interposer (ours
 * included: the agent's own calls to syscall() bind to the interposer below). */
static long raw_syscall(long n, long a, long b, long c, long d, long e, long f)
{
#if defined(__x86_64__)
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    long ret;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
#elif defined(__aarch64__)
    register long x8 __asm__("x8") = n;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    register long x3 __asm__("x3") = d;
    register long x4 __asm__("x4") = e;
    register long x5 __asm__("x5") = f;
    __asm__ volatile("svc #0"
                     : "+r"(x0)
                     : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
                     : "memory");
    long ret = x0;
#else
#error "raw_syscall: unsupported architecture"
#endif
    if ((unsigned long)ret > -4096ul) {
        errno = (int)-ret;
        return -1;
    }
    return ret;
}

/* Runs classic BPF program f (n instructions, as the kernel checked them: forward jumps only)
 * on d; returns its verdict, or SECCOMP_RET_KILL_PROCESS for anything the kernel would have
 * refused (an unknown instruction, falling off the end). */
static uint32_t bpf_run(const struct sock_filter *f, unsigned n, const struct seccomp_data *d)
{
    uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = {0};
    for (unsigned pc = 0; pc < n; pc++) {
        const struct sock_filter *i = &f[pc];
        uint32_t k = i->k, src = BPF_SRC(i->code) == BPF_X ? x : k;
        switch (BPF_CLASS(i->code)) {
        case BPF_LD:
        case BPF_LDX: {
            uint32_t v;
            switch (BPF_MODE(i->code)) {
            case BPF_ABS:
                if (k > sizeof *d - 4 || (k & 3))
                    return SECCOMP_RET_KILL_PROCESS;
                memcpy(&v, (const char *)d + k, 4);
                break;
            case BPF_LEN: v = sizeof *d; break;
            case BPF_IMM: v = k; break;
            case BPF_MEM:
                if (k >= BPF_MEMWORDS)
                    return SECCOMP_RET_KILL_PROCESS;
                v = mem[k];
                break;
            default: return SECCOMP_RET_KILL_PROCESS;
            }
            if (BPF_CLASS(i->code) == BPF_LD)
                a = v;
            else
                x = v;
            break;
        }
        case BPF_ST:
        case BPF_STX:
            if (k >= BPF_MEMWORDS)
                return SECCOMP_RET_KILL_PROCESS;
            mem[k] = BPF_CLASS(i->code) == BPF_ST ? a : x;
            break;
        case BPF_ALU:
            switch (BPF_OP(i->code)) {
            case BPF_ADD: a += src; break;
            case BPF_SUB: a -= src; break;
            case BPF_MUL: a *= src; break;
            case BPF_DIV:
                if (!src)
                    return SECCOMP_RET_KILL_PROCESS;
                a /= src;
                break;
            case BPF_MOD:
                if (!src)
                    return SECCOMP_RET_KILL_PROCESS;
                a %= src;
                break;
            case BPF_OR: a |= src; break;
            case BPF_AND: a &= src; break;
            case BPF_XOR: a ^= src; break;
            case BPF_LSH: a = src < 32 ? a << src : 0; break;
            case BPF_RSH: a = src < 32 ? a >> src : 0; break;
            case BPF_NEG: a = -a; break;
            default: return SECCOMP_RET_KILL_PROCESS;
            }
            break;
        case BPF_JMP: {
            int taken;
            switch (BPF_OP(i->code)) {
            case BPF_JA:
                if (k >= n - pc - 1)
                    return SECCOMP_RET_KILL_PROCESS;
                pc += k;
                continue;
            case BPF_JEQ: taken = a == src; break;
            case BPF_JGT: taken = a > src; break;
            case BPF_JGE: taken = a >= src; break;
            case BPF_JSET: taken = (a & src) != 0; break;
            default: return SECCOMP_RET_KILL_PROCESS;
            }
            pc += taken ? i->jt : i->jf; /* at most 255 ahead: the loop's bound ends it */
            break;
        }
        case BPF_RET: return BPF_RVAL(i->code) == BPF_A ? a : k;
        case BPF_MISC:
            if (BPF_MISCOP(i->code) == BPF_TAX)
                x = a;
            else
                a = x;
            break;
        }
    }
    return SECCOMP_RET_KILL_PROCESS;
}

/* The system calls the agent makes while it records (writer.c, stacks.c, clock.c, unwind.c,
 * fork and thread set-up), with the arguments that matter to a filter. */
static void agent_calls(struct seccomp_data *d, unsigned *n)
{
    long fd = agent.fd >= 0 ? agent.fd : 900;
    const struct {
        long nr, a[6];
    } calls[] = {
        {SYS_fallocate, {fd, 0, 0, 4096}},
        {SYS_mmap, {0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0}},
        {SYS_mmap, {0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0}},
        {SYS_munmap, {0, 4096}},
        {SYS_newfstatat, {fd, 0, 0, AT_EMPTY_PATH}},
#ifdef SYS_fstat
        {SYS_fstat, {fd}},
#endif
        {SYS_prlimit64, {0, RLIMIT_FSIZE, 0}},
        {SYS_prlimit64, {0, RLIMIT_NOFILE, 0}},
        {SYS_ftruncate, {fd}},
        {SYS_gettid, {0}},
        {SYS_getpid, {0}},
        {SYS_openat, {AT_FDCWD, 0, O_RDONLY | O_CLOEXEC}},
        {SYS_read, {fd}},
        {SYS_close, {fd}},
        {SYS_clock_gettime, {CLOCK_MONOTONIC}},
        {SYS_clock_gettime, {CLOCK_REALTIME}},
        {SYS_sched_yield, {0}},
        {SYS_rt_sigprocmask, {SIG_SETMASK}},
        {SYS_madvise, {0, 4096, MADV_WIPEONFORK}},
        {SYS_madvise, {0, 4096, MADV_DONTNEED}}, /* emptied stack tables (stack_table.c) */
        {SYS_fcntl, {fd, F_GETFD}},
        {SYS_readlinkat, {AT_FDCWD}},
        {SYS_write, {2}},
    };
    unsigned k = 0;
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++, k++) {
        memset(&d[k], 0, sizeof d[k]);
        d[k].nr = (int)calls[i].nr;
        d[k].arch = SANDBOX_ARCH;
        for (int j = 0; j < 6; j++)
            d[k].args[j] = (uint64_t)calls[i].a[j];
    }
    *n = k;
}

static const char *call_name(int nr)
{
    switch (nr) {
    case SYS_fallocate: return "fallocate";
    case SYS_mmap: return "mmap";
    case SYS_munmap: return "munmap";
    case SYS_newfstatat: return "newfstatat";
#ifdef SYS_fstat
    case SYS_fstat: return "fstat";
#endif
    case SYS_prlimit64: return "prlimit64";
    case SYS_ftruncate: return "ftruncate";
    case SYS_gettid: return "gettid";
    case SYS_getpid: return "getpid";
    case SYS_openat: return "openat";
    case SYS_read: return "read";
    case SYS_close: return "close";
    case SYS_clock_gettime: return "clock_gettime";
    case SYS_sched_yield: return "sched_yield";
    case SYS_rt_sigprocmask: return "rt_sigprocmask";
    case SYS_madvise: return "madvise";
    case SYS_fcntl: return "fcntl";
    case SYS_readlinkat: return "readlinkat";
    case SYS_write: return "write";
    }
    return "a system call";
}

/* Whether a verdict lets the call return to the agent as a plain call does. */
static int harmless(uint32_t verdict)
{
    uint32_t action = verdict & SECCOMP_RET_ACTION_FULL;
    return action == SECCOMP_RET_ALLOW || action == SECCOMP_RET_LOG || action == SECCOMP_RET_ERRNO;
}

static struct sock_filter filter_copy[BPF_MAXINSNS];
static int filter_lock;

/* The agent stops for good before a filter it cannot live with is installed. */
static void stand_down(const char *why)
{
    if (agent.sandboxed)
        return;
    int was_recording = agent.initialized && !agent.broken;
    agent_tls.internal++;   /* setenv allocates: memscope's own, not recorded nor counted lost */
    agent_stop_following(); /* exec'd programs inherit the filter: no agent in them */
    agent_tls.internal--;
    if (agent.hdr && !agent.broken)
        __atomic_store_n(&agent.hdr->stopped_errno, (uint64_t)EPERM, __ATOMIC_RELAXED);
    __atomic_store_n(&agent.broken, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&agent.recording, 0, __ATOMIC_RELEASE);
    if (was_recording)
        agent_say("recording stopped", why);
    __atomic_store_n(&agent.sandboxed, 1, __ATOMIC_RELEASE);
}

/* Called before the program installs a seccomp filter (prog: its struct sock_fprog) or strict
 * mode (prog NULL). */
static void filter_coming(const void *prog)
{
    if (agent.sandboxed || !agent.initialized || agent.broken)
        return;
    char why[256];
    if (!prog) {
        stand_down("the program enters seccomp strict mode, where any system call of memscope's "
                   "agent would kill it; the program runs on");
        return;
    }
    struct sock_fprog fp;
    spin_lock(&filter_lock);
    /* Read in place, as the kernel will: a pointer the kernel would refuse with EFAULT would
     * fault here first, but a system call that reads memory safely (process_vm_readv) is one
     * an inherited filter may kill on. */
    memcpy(&fp, prog, sizeof fp);
    int ok = fp.len > 0 && fp.len <= BPF_MAXINSNS && fp.filter;
    if (ok)
        memcpy(filter_copy, fp.filter, fp.len * sizeof filter_copy[0]);
    const char *bad = NULL;
    if (ok) {
        struct seccomp_data d[32];
        unsigned n;
        agent_calls(d, &n);
        for (unsigned i = 0; i < n && !bad; i++)
            if (!harmless(bpf_run(filter_copy, fp.len, &d[i])))
                bad = call_name(d[i].nr);
    }
    spin_unlock(&filter_lock);
    if (!ok)
        return; /* the kernel refuses it too (EINVAL): nothing changes */
    if (!bad)
        return;
    char *w = why;
    const char *parts[] = {"the program installs a seccomp filter that would stop it on ", bad,
                           ", a system call memscope's agent makes; the program runs on"};
    for (size_t i = 0; i < 3; i++)
        for (const char *s = parts[i]; *s && w < why + sizeof why - 1; s++)
            *w++ = *s;
    *w = 0;
    stand_down(why);
}

/* prctl(2): PR_SET_SECCOMP is looked at; everything goes to the kernel as glibc's would. */
AGENT_API int prctl(int option, ...)
{
    va_list ap;
    va_start(ap, option);
    unsigned long a2 = va_arg(ap, unsigned long), a3 = va_arg(ap, unsigned long),
                  a4 = va_arg(ap, unsigned long), a5 = va_arg(ap, unsigned long);
    va_end(ap);
    if (option == PR_SET_SECCOMP)
        filter_coming(a2 == SECCOMP_MODE_FILTER ? (const void *)a3 : NULL);
    return (int)raw_syscall(SYS_prctl, option, (long)a2, (long)a3, (long)a4, (long)a5, 0);
}

/* syscall(2): seccomp(2) and prctl(2) made this way (libseccomp's seccomp_load) are looked at;
 * every call goes to the kernel as glibc's syscall() would make it. */
AGENT_API long syscall(long number, ...)
{
    va_list ap;
    va_start(ap, number);
    long a = va_arg(ap, long), b = va_arg(ap, long), c = va_arg(ap, long), d = va_arg(ap, long),
         e = va_arg(ap, long), f = va_arg(ap, long);
    va_end(ap);
    if (unlikely(number == SYS_seccomp)) {
        if (a == SECCOMP_SET_MODE_STRICT)
            filter_coming(NULL);
        else if (a == SECCOMP_SET_MODE_FILTER)
            filter_coming((const void *)c);
    } else if (unlikely(number == SYS_prctl && a == PR_SET_SECCOMP)) {
        filter_coming(b == SECCOMP_MODE_FILTER ? (const void *)c : NULL);
    }
    return raw_syscall(number, a, b, c, d, e, f);
}

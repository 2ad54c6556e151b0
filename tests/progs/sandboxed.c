/* sandboxed: a program that confines itself with a seccomp filter, as systemd's
 * SystemCallFilter=, sshd's privilege-separated child or a browser's renderer do.
 *
 *   sandboxed kill|kill_process|lenient|die
 *
 * Allocates 3 x 50001 bytes, then installs a filter: `kill` (prctl, SECCOMP_RET_KILL, which is
 * KILL_THREAD) and `kill_process` (the seccomp system call through syscall(),
 * SECCOMP_RET_KILL_PROCESS) allow only what this program needs (read, write, brk, mmap,
 * munmap, mremap, madvise, newfstatat/fstat, futex, the signal returns and exits) and kill on
 * anything else; `lenient` (prctl) kills on ptrace only. Then makes 20000 allocations of
 * 100..149 bytes (every tenth kept, 2000 blocks of size 100 among them: i % 50 == 0, kept when
 * i % 10 == 0 too), prints "sandboxed MODE done 20000" and exits with status 5. `die` installs
 * kill's filter, prints "sandboxed die", then calls getppid, which the filter does not allow:
 * it dies of SIGSYS (status 159) before its loop.
 * Run by tests/integration/test_sandbox.sh (issue 37 item 5): under memscope it must end as it
 * does alone. */
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ALLOW(n) \
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (n), 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)

__attribute__((noinline)) void *ms_progs_sandboxed_alloc(size_t n)
{
    return malloc(n);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    const char *mode = argv[1];
    for (int i = 0; i < 3; i++)
        if (!ms_progs_sandboxed_alloc(50001))
            return 1;
    unsigned kill = !strcmp(mode, "kill_process") ? SECCOMP_RET_KILL_PROCESS : SECCOMP_RET_KILL;
    struct sock_filter strict[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, kill),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        ALLOW(SYS_read),
        ALLOW(SYS_write),
        ALLOW(SYS_brk),
        ALLOW(SYS_mmap),
        ALLOW(SYS_munmap),
        ALLOW(SYS_mremap),
        ALLOW(SYS_madvise),
        ALLOW(SYS_newfstatat),
        ALLOW(SYS_fstat),
        ALLOW(SYS_futex),
        ALLOW(SYS_rt_sigreturn),
        ALLOW(SYS_exit),
        ALLOW(SYS_exit_group),
        BPF_STMT(BPF_RET | BPF_K, kill),
    };
    struct sock_filter lenient[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_ptrace, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    int is_lenient = !strcmp(mode, "lenient");
    struct sock_fprog prog = {
        .len = is_lenient ? sizeof lenient / sizeof lenient[0] : sizeof strict / sizeof strict[0],
        .filter = is_lenient ? lenient : strict,
    };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
        perror("sandboxed: PR_SET_NO_NEW_PRIVS");
        return 1;
    }
    int rc = !strcmp(mode, "kill_process")
                 ? (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog)
                 : prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
    if (rc != 0) {
        perror("sandboxed: seccomp");
        return 1;
    }
    if (!strcmp(mode, "die")) {
        printf("sandboxed die\n");
        fflush(stdout);
        getppid();
        return 1;
    }
    for (int i = 0; i < 20000; i++) {
        void *p = ms_progs_sandboxed_alloc(100 + (size_t)(i % 50));
        if (!p)
            return 1;
        if (i % 10)
            free(p);
    }
    printf("sandboxed %s done 20000\n", mode);
    return 5;
}

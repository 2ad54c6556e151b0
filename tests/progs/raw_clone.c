/* raw_clone: a child made without glibc's fork() (no atfork handlers run in it), for checking
 * that it is traced like a forked child and that it never writes into its parent's trace.
 *
 *   raw_clone MODE PIDFILE      MODE: syscall | clone3 | asm | glibc
 *
 * syscall: libc's syscall(SYS_clone, SIGCHLD, 0, ...); clone3: syscall(SYS_clone3, ...) with
 * exit_signal SIGCHLD; asm: the clone system call issued by an inline `syscall` instruction (no
 * library function the agent could interpose); glibc: glibc's clone() wrapper on a stack of our
 * own, without CLONE_VM. Run by tests/integration/test_raw_clone.sh, with the counts of
 * forker.c: before the clone the parent allocates 5 x 40001 bytes (kept); the child allocates
 * 7 x 40003 and frees them; the parent allocates 3 x 40005, waits for the child, frees them,
 * then allocates and frees 200 x 40007 (records that land where the child's would have, in a
 * shared trace chunk). PIDFILE receives "PARENT CHILD\n". Exit status 0 when the child exited
 * 0. */
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

__attribute__((noinline)) void *ms_progs_clone_alloc(size_t n)
{
    return malloc(n);
}

static int child_work(void *arg)
{
    void *after[7];
    (void)arg;
    for (int i = 0; i < 7; i++)
        if (!(after[i] = ms_progs_clone_alloc(40003)))
            return 1;
    for (int i = 0; i < 7; i++)
        free(after[i]);
    return 0;
}

/* clone(SIGCHLD) through the syscall instruction itself: returns twice like fork(). */
static long clone_asm(void)
{
    register long r10 __asm__("r10") = 0;
    register long r8 __asm__("r8") = 0;
    long ret;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "0"((long)SYS_clone), "D"((long)SIGCHLD), "S"(0L), "d"(0L), "r"(r10),
                       "r"(r8)
                     : "rcx", "r11", "memory");
    return ret;
}

static char child_stack[256 << 10] __attribute__((aligned(16)));

int main(int argc, char **argv)
{
    void *before[5], *after[200];
    long child;

    if (argc != 3)
        return 2;
    for (int i = 0; i < 5; i++)
        if (!(before[i] = ms_progs_clone_alloc(40001)))
            return 1;
    fflush(NULL);
    if (!strcmp(argv[1], "syscall")) {
        child = syscall(SYS_clone, (long)SIGCHLD, 0L, 0L, 0L, 0L);
    } else if (!strcmp(argv[1], "clone3")) {
        struct clone_args ca;
        memset(&ca, 0, sizeof ca);
        ca.exit_signal = SIGCHLD;
        child = syscall(SYS_clone3, &ca, sizeof ca);
    } else if (!strcmp(argv[1], "asm")) {
        child = clone_asm();
    } else if (!strcmp(argv[1], "glibc")) {
        child = clone(child_work, child_stack + sizeof child_stack, SIGCHLD, NULL);
        if (child == 0) /* never: the child runs child_work and exits with its value */
            _exit(3);
    } else {
        return 2;
    }
    if (child < 0)
        return 1;
    if (child == 0)
        _exit(child_work(NULL));
    for (int i = 0; i < 3; i++)
        if (!(after[i] = ms_progs_clone_alloc(40005)))
            return 1;
    int st;
    if (waitpid((pid_t)child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return 1;
    for (int i = 0; i < 3; i++)
        free(after[i]);
    for (int i = 0; i < 200; i++)
        if (!(after[i] = ms_progs_clone_alloc(40007)))
            return 1;
    for (int i = 0; i < 200; i++)
        free(after[i]);
    FILE *f = fopen(argv[2], "w");
    if (!f)
        return 1;
    fprintf(f, "%ld %ld\n", (long)getpid(), child);
    if (fclose(f) != 0)
        return 1;
    printf("raw_clone ok\n");
    return 0;
}

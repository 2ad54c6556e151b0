/* attach_target: a running process for `memscope attach` (tests/integration/test_attach_pid.sh)
 * that makes known allocations when told to, through files in DIR:
 *
 *   attach_target DIR [churn] [blocksig] [seccomp]
 *
 * Start: 3 x malloc(3333) (before any attach: unknown to memscope), 2 worker threads that wait
 * on a condition variable, then DIR/ready. "churn": the main thread runs a malloc(77)/free
 * loop all the time it waits, with a few microseconds of its own work between two (an attach
 * catches it in the middle of its allocations); "blocksig": every thread blocks every signal
 * it can; "seccomp": a seccomp filter (that forbids kexec_load only).
 * It then waits for files to appear in DIR, one phase each, and writes DIR/<name>.done after:
 *   go1: main: 5 x malloc(4001) at attach_site_main (4 freed); each worker: 7 x malloc(4003)
 *        at attach_site_worker, all freed; the 3 blocks of 3333 freed (unmatched frees);
 *   go2: main: 6 x calloc(1, 5001) at attach_site_main2, all freed; then forks a child that
 *        makes 9 x malloc(6007) (not recorded: memscope attach records its process only) and
 *        exits 0, waited for;
 *   end: checks its heap still works (malloc/realloc/free of 1000 blocks, contents kept),
 *        frees what is left, prints "attach_target ok" and exits 0.
 * Exit 1 on an internal error (a heap block with wrong contents). */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *dir;
static int phase; /* 1 after go1 */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int workers_done;

static int exists(const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

static void touch(const char *name)
{
    char path[4096], tmp[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name);
    FILE *f = fopen(tmp, "w");
    if (f)
        fclose(f);
    rename(tmp, path);
}

/* A lenient seccomp filter: kills on kexec_load only (Seccomp: 2 in /proc/PID/status). */
static int seccomp_filter(void)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_kexec_load, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof f / sizeof f[0], f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -1;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

static void block_signals(void)
{
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
}

__attribute__((noinline)) static void *attach_site_worker(void)
{
    return malloc(4003);
}

static void *worker(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    while (phase < 1)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    void *p[7];
    for (int i = 0; i < 7; i++)
        p[i] = attach_site_worker();
    for (int i = 0; i < 7; i++)
        free(p[i]);
    pthread_mutex_lock(&mu);
    workers_done++;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    return NULL;
}

__attribute__((noinline)) static void *attach_site_main(void)
{
    return malloc(4001);
}

__attribute__((noinline)) static void *attach_site_main2(void)
{
    return calloc(1, 5001);
}

/* Waits for DIR/name: a nap, or the churn loop between looks. */
static void wait_for(const char *name, int churn)
{
    struct timespec nap = {0, 5 * 1000000L};
    while (!exists(name)) {
        if (!churn) {
            nanosleep(&nap, NULL);
            continue;
        }
        for (int i = 0; i < 200; i++) {
            volatile char *q = malloc(77);
            q[0] = (char)i;
            free((void *)q);
            for (volatile int k = 0; k < 2000; k++) /* some work of its own between */
                ;
        }
    }
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    dir = argv[1];
    int churn = 0, blocksig = 0;
    for (int i = 2; i < argc; i++) {
        churn |= !strcmp(argv[i], "churn");
        blocksig |= !strcmp(argv[i], "blocksig");
        if (!strcmp(argv[i], "seccomp") && seccomp_filter() != 0)
            return 1;
    }
    if (blocksig)
        block_signals(); /* before the threads: they inherit the mask */
    void *pre[3];
    for (int i = 0; i < 3; i++)
        pre[i] = malloc(3333);
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        if (pthread_create(&t[i], NULL, worker, NULL) != 0)
            return 1;
    touch("ready");

    wait_for("go1", churn);
    void *m[5];
    for (int i = 0; i < 5; i++)
        m[i] = attach_site_main();
    for (int i = 0; i < 4; i++)
        free(m[i]);
    for (int i = 0; i < 3; i++)
        free(pre[i]);
    pthread_mutex_lock(&mu);
    phase = 1;
    pthread_cond_broadcast(&cv);
    while (workers_done < 2)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    touch("go1.done");

    wait_for("go2", churn);
    void *c[6];
    for (int i = 0; i < 6; i++)
        c[i] = attach_site_main2();
    for (int i = 0; i < 6; i++)
        free(c[i]);
    pid_t child = fork();
    if (child == 0) {
        for (int i = 0; i < 9; i++)
            free(malloc(6007));
        _exit(0);
    }
    int st = 1;
    if (child < 0 || waitpid(child, &st, 0) != child || st != 0)
        return 1;
    touch("go2.done");

    wait_for("end", churn);
    /* the heap still works: blocks keep their contents through realloc */
    enum { N = 1000 };
    char **b = malloc(N * sizeof *b);
    if (!b)
        return 1;
    for (int i = 0; i < N; i++) {
        b[i] = malloc((size_t)(i % 50) + 8);
        if (!b[i])
            return 1;
        memset(b[i], i & 0xff, 8);
    }
    for (int i = 0; i < N; i++) {
        b[i] = realloc(b[i], (size_t)(i % 70) + 16);
        for (int k = 0; k < 8; k++)
            if (!b[i] || (unsigned char)b[i][k] != (i & 0xff))
                return 1;
    }
    for (int i = 0; i < N; i++)
        free(b[i]);
    free(b);
    free(m[4]);
    printf("attach_target ok\n");
    return 0;
}

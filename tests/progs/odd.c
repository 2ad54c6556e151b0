/* odd: programs that do unusual things to processes, threads, signals and descriptors, each
 * with exact allocation counts, for the stress suite (tests/integration/test_stress.sh, issue
 * 24). stdout is the same under memscope as without it; each mode allocates its own size, so
 * the test counts its events exactly.
 *
 *   odd vfork             10 x 50001 kept, then vfork + exec of /bin/true, 5 times
 *   odd spawn             20 times: malloc(50002), posix_spawn /bin/true, wait, free
 *   odd threads N         N threads at once, each malloc(50003) + free
 *   odd storm FILE        1 kHz SIGALRM for 300 ms, the handler allocating (malloc(50004) +
 *                         free) while the main thread maps and unmaps 53248-byte regions;
 *                         FILE receives "HANDLER_RUNS MAPS"
 *   odd forkthreads       4 threads each 5000 x (malloc(50007) + free), while the main thread
 *                         forks 20 children that each malloc(50006) + free and exit
 *   odd execloop N        malloc(50008) kept, then exec of itself with N-1, down to 0
 *   odd nofile            RLIMIT_NOFILE 16 set at run time: opens /dev/null until EMFILE
 *                         (prints the first descriptor and the count), closes them, forks a
 *                         child that mallocs 3 x 50009 + frees
 *   odd dlopen LIB N      N x (dlopen LIB, dlclose): malloc(50010) + free around each
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;
void *odd_kept[11]; /* what is kept to the end: live at exit */

__attribute__((noinline)) static void *odd_alloc(size_t n)
{
    void *p = malloc(n);
    if (!p)
        exit(3);
    return p;
}

static int wait_ok(pid_t pid)
{
    int st;
    while (waitpid(pid, &st, 0) < 0)
        ;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static int do_vfork(void)
{
    for (int i = 0; i < 10; i++)
        odd_kept[i] = odd_alloc(50001);
    for (int i = 0; i < 5; i++) {
        pid_t pid = vfork();
        if (pid == 0) {
            char *argv[] = {"true", NULL};
            execve("/bin/true", argv, environ);
            _exit(127);
        }
        if (pid < 0 || !wait_ok(pid))
            return 1;
    }
    printf("odd vfork ok\n");
    return 0;
}

static int do_spawn(void)
{
    for (int i = 0; i < 20; i++) {
        void *p = odd_alloc(50002);
        pid_t pid;
        char *argv[] = {"true", NULL};
        if (posix_spawn(&pid, "/bin/true", NULL, NULL, argv, environ) != 0 || !wait_ok(pid))
            return 1;
        free(p);
    }
    printf("odd spawn ok\n");
    return 0;
}

static void *thread_main(void *arg)
{
    (void)arg;
    free(odd_alloc(50003));
    return NULL;
}

static int do_threads(int n)
{
    pthread_t *t = calloc((size_t)n, sizeof *t);
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setstacksize(&a, 64 << 10);
    int made = 0;
    for (; made < n; made++)
        if (pthread_create(&t[made], &a, thread_main, NULL) != 0)
            break;
    for (int i = 0; i < made; i++)
        pthread_join(t[i], NULL);
    free(t);
    printf("odd threads %d of %d\n", made, n);
    return made == n ? 0 : 1;
}

static volatile sig_atomic_t handler_runs;

static void on_alarm(int sig)
{
    (void)sig;
    free(odd_alloc(50004));
    handler_runs++;
}

static int do_storm(const char *file)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 1000}, {0, 1000}};
    setitimer(ITIMER_REAL, &it, NULL);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long maps = 0;
    do {
        void *p = mmap(NULL, 53248, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return 1;
        munmap(p, 53248);
        maps++;
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 300000000L);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    signal(SIGALRM, SIG_IGN);
    FILE *f = fopen(file, "w");
    if (!f)
        return 1;
    fprintf(f, "%ld %ld\n", (long)handler_runs, maps);
    fclose(f);
    printf("odd storm ok\n");
    return handler_runs > 10 ? 0 : 1;
}

static void *churn_main(void *arg)
{
    (void)arg;
    for (int i = 0; i < 5000; i++)
        free(odd_alloc(50007));
    return NULL;
}

static int do_forkthreads(void)
{
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, churn_main, NULL);
    int ok = 1;
    for (int i = 0; i < 20; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            free(odd_alloc(50006));
            _exit(0);
        }
        ok &= pid > 0 && wait_ok(pid);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    printf("odd forkthreads %s\n", ok ? "ok" : "failed");
    return !ok;
}

static int do_execloop(const char *self, int n)
{
    odd_kept[10] = odd_alloc(50008);
    if (n <= 0) {
        printf("odd execloop ok\n");
        return 0;
    }
    char num[16];
    snprintf(num, sizeof num, "%d", n - 1);
    char *argv[] = {(char *)self, "execloop", num, NULL};
    fflush(stdout);
    execv("/proc/self/exe", argv);
    return 1;
}

static int do_nofile(void)
{
    struct rlimit rl = {16, 16};
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 1;
    int fds[16], n = 0;
    while (n < 16 && (fds[n] = open("/dev/null", O_RDONLY)) >= 0)
        n++;
    printf("odd nofile first %d count %d\n", n ? fds[0] : -1, n);
    for (int i = 0; i < n; i++)
        close(fds[i]);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        void *p[3];
        for (int i = 0; i < 3; i++)
            p[i] = odd_alloc(50009);
        for (int i = 0; i < 3; i++)
            free(p[i]);
        _exit(0);
    }
    return pid > 0 && wait_ok(pid) ? 0 : 1;
}

static int do_dlopen(const char *lib, int n)
{
    for (int i = 0; i < n; i++) {
        void *p = odd_alloc(50010);
        void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
        if (!h)
            return 1;
        dlclose(h);
        free(p);
    }
    printf("odd dlopen %d ok\n", n);
    return 0;
}

int main(int argc, char **argv)
{
    const char *m = argc > 1 ? argv[1] : "";
    if (!strcmp(m, "vfork"))
        return do_vfork();
    if (!strcmp(m, "spawn"))
        return do_spawn();
    if (!strcmp(m, "threads") && argc == 3)
        return do_threads(atoi(argv[2]));
    if (!strcmp(m, "storm") && argc == 3)
        return do_storm(argv[2]);
    if (!strcmp(m, "forkthreads"))
        return do_forkthreads();
    if (!strcmp(m, "execloop") && argc == 3)
        return do_execloop(argv[0], atoi(argv[2]));
    if (!strcmp(m, "nofile"))
        return do_nofile();
    if (!strcmp(m, "dlopen") && argc == 4)
        return do_dlopen(argv[2], atoi(argv[3]));
    fprintf(stderr, "usage: odd MODE ...\n");
    return 2;
}

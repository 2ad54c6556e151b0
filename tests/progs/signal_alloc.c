/* signal_alloc: a signal handler that allocates while the main thread allocates.
 *
 *   signal_alloc [SIGNALS=200]
 *
 * Run by tests/integration/test_signal.sh. The main thread loops on malloc(901)/free until a
 * helper thread has delivered SIGNALS SIGUSR1s to it, one at a time (it waits for each to be
 * handled before sending the next; after 1000000 rounds it stops allocating and only waits, which
 * bounds the trace). The handler does malloc(1013)/free once per signal. Both
 * sizes are warmed up first so that, in glibc, both paths stay in their own tcache bins and take
 * no lock: calling malloc from a handler is not async-signal-safe in general, but is safe here,
 * and the point is to interrupt the tracer's own hot path. Prints
 * "signal_alloc LOOPS HANDLED" and exits 0; the test compares those numbers with the database. */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

static volatile sig_atomic_t handled;
static volatile int done;
static pthread_t main_thread;
static long nsignals = 200;

__attribute__((noinline)) void *ms_progs_handler_alloc(size_t n)
{
    return malloc(n);
}

static void on_usr1(int sig)
{
    (void)sig;
    volatile char *p = ms_progs_handler_alloc(1013);
    if (p) {
        p[0] = 1;
        free((void *)p);
    }
    handled = handled + 1;
}

static void *sender(void *arg)
{
    (void)arg;
    for (long i = 0; i < nsignals; i++) {
        pthread_kill(main_thread, SIGUSR1);
        while (handled == i)
            sched_yield();
    }
    done = 1;
    return NULL;
}

int main(int argc, char **argv)
{
    struct sigaction sa = {0};
    pthread_t t;
    long loops = 0;

    if (argc > 1)
        nsignals = atol(argv[1]);
    free(malloc(901)); /* warm up both tcache bins */
    free(malloc(1013));
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (sigaction(SIGUSR1, &sa, NULL) != 0)
        return 1;
    main_thread = pthread_self();
    if (pthread_create(&t, NULL, sender, NULL) != 0)
        return 1;
    while (!done && loops < 1000000) {
        volatile char *p = malloc(901);
        if (!p)
            return 1;
        p[0] = 2;
        free((void *)p);
        loops++;
    }
    while (!done)
        sched_yield();
    pthread_join(t, NULL);
    printf("signal_alloc %ld %ld\n", loops, (long)handled);
    return handled == nsignals ? 0 : 1;
}

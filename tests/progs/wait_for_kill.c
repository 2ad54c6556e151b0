/* wait_for_kill: allocates, says it is ready, and waits to be killed.
 *
 *   wait_for_kill N READYFILE
 *
 * Run by tests/integration/test_sigkill.sh. Allocates N blocks of 70001 bytes (kept), then N
 * blocks of 70003 bytes from a second thread (kept), writes "PID\n" to READYFILE (written to a
 * temporary name and renamed, so a reader never sees a partial line) and sleeps until killed.
 * Exit status 1 on error; otherwise it never returns by itself. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static long n;

__attribute__((noinline)) void *ms_progs_kill_alloc(size_t size)
{
    void *p = malloc(size);
    if (p)
        memset(p, 0x77, 64);
    return p;
}

static void *second(void *arg)
{
    (void)arg;
    for (long i = 0; i < n; i++)
        if (!ms_progs_kill_alloc(70003))
            return (void *)1;
    return NULL;
}

int main(int argc, char **argv)
{
    char tmp[4096];
    pthread_t t;
    void *r;

    if (argc != 3 || (n = atol(argv[1])) < 0)
        return 2;
    for (long i = 0; i < n; i++)
        if (!ms_progs_kill_alloc(70001))
            return 1;
    if (pthread_create(&t, NULL, second, NULL) != 0 || pthread_join(t, &r) != 0 || r)
        return 1;
    snprintf(tmp, sizeof tmp, "%s.tmp", argv[2]);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return 1;
    fprintf(f, "%ld\n", (long)getpid());
    if (fclose(f) != 0 || rename(tmp, argv[2]) != 0)
        return 1;
    for (;;)
        pause();
}

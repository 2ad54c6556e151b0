/* sample_skew: skewed allocation sizes for sampling mode (tests/integration/test_sampling.sh,
 * bench/sampling.sh): each size comes from a site of its own, so that an estimate per site can
 * be checked against the exact run.
 *
 *   sample_skew [SCALE=1] [alive]
 *
 * Per unit of SCALE: site_tiny 200000 x 16 B, site_small 100000 x 64 B, site_page 2000 x 4096 B,
 * all freed; site_big 20 x 1 MiB allocated by a thread, 17 of them freed by the main thread and
 * 3 leaked; site_grow a 1000-byte block realloc'd to 2 MiB, then freed. With `alive`, a thread
 * that allocated and freed 1000 blocks of 100 bytes is still running (blocked) when the process
 * exits. */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

static long scale = 1;
static void *big[64];

#define SITE(name, size)                              \
    __attribute__((noinline)) static void *name(void) \
    {                                                 \
        void *p = malloc(size);                       \
        if (p)                                        \
            memset(p, 1, 8);                          \
        __asm__ volatile("" ::: "memory");            \
        return p;                                     \
    }
SITE(site_tiny, 16)
SITE(site_small, 64)
SITE(site_page, 4096)
SITE(site_big, 1 << 20)

/* Allocates n blocks at site and frees them in order of allocation, keep at a time. */
static void churn(void *(*site)(void), long n)
{
    static void *keep[256];
    for (long i = 0; i < n; i++) {
        free(keep[i & 255]);
        keep[i & 255] = site();
    }
    for (int i = 0; i < 256; i++) {
        free(keep[i]);
        keep[i] = NULL;
    }
}

static void *bigs(void *arg)
{
    (void)arg;
    for (int i = 0; i < 20; i++)
        big[i] = site_big();
    return NULL;
}

__attribute__((noinline)) static void site_grow(void)
{
    char *p = malloc(1000);
    char *q = p ? realloc(p, 2 << 20) : NULL;
    if (q)
        q[0] = 1;
    free(q ? q : p);
}

static volatile int alive_ready;

static void *alive(void *arg)
{
    (void)arg;
    for (int i = 0; i < 1000; i++)
        free(malloc(100));
    alive_ready = 1;
    for (;;)
        pause();
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        scale = atol(argv[1]);
    if (scale < 1 || scale > 1000)
        return 2;
    for (long s = 0; s < scale; s++) {
        churn(site_tiny, 200000);
        churn(site_small, 100000);
        churn(site_page, 2000);
    }
    pthread_t t;
    if (pthread_create(&t, NULL, bigs, NULL) != 0 || pthread_join(t, NULL) != 0)
        return 1;
    for (int i = 3; i < 20; i++)
        free(big[i]); /* big[0..2] leak */
    site_grow();
    if (argc > 2 && !strcmp(argv[2], "alive")) {
        pthread_t a;
        if (pthread_create(&a, NULL, alive, NULL) != 0)
            return 1;
        while (!alive_ready)
            usleep(1000);
    }
    puts("sample_skew done");
    return 0;
}

/* an_temp: a known-answer program for `memscope analyze temporary` (tests/analyze).
 *
 * Temporary = freed before any other allocation or free on its thread (heaptrack's rule, per
 * thread). Exact counts:
 *   an_temp_pair      100 x malloc(64) then free              100 temporary of 100
 *   an_temp_thread    200 x malloc(96) then free, on a thread  200 temporary of 200
 *   an_temp_overlap    50 x a = malloc(32); b = malloc(48); free(a); free(b)
 *                      a: another allocation in between; b: another free in between
 *                      -> 0 temporary of 100
 *   an_temp_realloc    10 x p = malloc(16); p = realloc(p, 4096); free(p)
 *                      malloc(16): its FREE (the realloc) comes next -> temporary;
 *                      the realloc'd block: freed next -> temporary  -> 20 of 20
 * Prints "an_temp ok" and exits 0, with or without the agent. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *volatile sink;

__attribute__((noinline)) static void an_temp_pair(void)
{
    char *p = malloc(64);
    memset(p, 1, 64);
    sink = p;
    free(p);
}

__attribute__((noinline)) static void *an_temp_thread(void *arg)
{
    (void)arg;
    for (int i = 0; i < 200; i++) {
        char *p = malloc(96);
        memset(p, 2, 96);
        sink = p;
        free(p);
    }
    return NULL;
}

__attribute__((noinline)) static void an_temp_overlap(void)
{
    char *a = malloc(32);
    char *b = malloc(48);
    sink = a;
    sink = b;
    free(a);
    free(b);
}

__attribute__((noinline)) static void an_temp_realloc(void)
{
    char *p = malloc(16);
    p = realloc(p, 4096);
    sink = p;
    free(p);
}

int main(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, an_temp_thread, NULL) != 0)
        return 1;
    for (int i = 0; i < 100; i++)
        an_temp_pair();
    for (int i = 0; i < 50; i++)
        an_temp_overlap();
    for (int i = 0; i < 10; i++)
        an_temp_realloc();
    pthread_join(t, NULL);
    puts("an_temp ok");
    return 0;
}

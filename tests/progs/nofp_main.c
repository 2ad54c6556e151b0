/* nofp_main: a known-answer program for the default unwinder on code built the way most code is
 * (plain -O2 -g: no frame pointers), run by tests/integration/test_unwind.sh.
 *
 *   nofp_main
 *
 * Each allocation has a size that names it and a known chain of callers:
 *   1001  main -> nofp_outer -> nofp_middle -> nofp_leaf -> malloc
 *   1002  main -> nofp_lib_alloc (libms_nofp_lib.so, -O2 without frame pointers) -> malloc
 *   1003  main -> qsort (the C library) -> ... -> nofp_cmp -> malloc (once per comparison)
 *   1004  main -> nofp_rec x 32 (depth 31 down to 0) -> malloc
 *   1005  main -> raise -> (signal frame) -> nofp_on_signal -> malloc
 *   1006  a thread: start_thread -> nofp_thread -> nofp_leaf2 -> malloc
 *   1007  main -> nofp_fp_lib_alloc (libms_fp_lib.so, with frame pointers) -> nofp_callback
 *         (back in this program, without) -> malloc
 *   1008  main -> nofp_via_a -> nofp_leaf3 -> malloc    } 50 times each, alternately: the two
 *   1009  main -> nofp_via_b -> nofp_leaf3 -> malloc    } callers' frames lie at the same place,
 *         so a walk from nofp_leaf3 meets the last walk's state there and must see that the
 *         caller above it changed (the unwinder's reuse of the last walk, unwind.c)
 * Prints "nofp ok". */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

void *nofp_lib_alloc(size_t n);
void *nofp_fp_lib_alloc(void *(*cb)(size_t), size_t n);

void *volatile nofp_sink;

__attribute__((noinline)) static void *nofp_leaf(size_t n)
{
    void *p = malloc(n);
    __asm__ volatile("" ::: "memory");
    return p;
}

__attribute__((noinline)) static void *nofp_middle(size_t n)
{
    void *p = nofp_leaf(n + 1);
    __asm__ volatile("" ::: "memory");
    return p;
}

__attribute__((noinline)) static void *nofp_outer(size_t n)
{
    void *p = nofp_middle(n - 1);
    __asm__ volatile("" ::: "memory");
    return p;
}

__attribute__((noinline)) static int nofp_cmp(const void *a, const void *b)
{
    nofp_sink = malloc(1003);
    free(nofp_sink);
    return *(const int *)a - *(const int *)b;
}

__attribute__((noinline)) static int nofp_rec(int d)
{
    if (d == 0) {
        nofp_sink = malloc(1004);
        free(nofp_sink);
        return 0;
    }
    int r = nofp_rec(d - 1);
    __asm__ volatile("" ::: "memory"); /* keep the recursion from becoming a loop */
    return r + 1;
}

__attribute__((noinline)) static void nofp_on_signal(int sig)
{
    (void)sig;
    nofp_sink = malloc(1005);
    free(nofp_sink);
}

__attribute__((noinline)) static void *nofp_leaf2(size_t n)
{
    char *p = malloc(n);
    if (p)
        p[0] = 6; /* a body of its own: identical functions would be folded into one */
    __asm__ volatile("" ::: "memory");
    return p;
}

__attribute__((noinline)) static void *nofp_thread(void *arg)
{
    (void)arg;
    void *p = nofp_leaf2(1006);
    __asm__ volatile("" ::: "memory");
    free(p);
    return NULL;
}

__attribute__((noinline)) static void *nofp_callback(size_t n)
{
    char *p = malloc(n);
    if (p)
        p[0] = 7;
    __asm__ volatile("" ::: "memory");
    return p;
}

__attribute__((noinline)) static void *nofp_leaf3(size_t n)
{
    char *p = malloc(n);
    if (p)
        p[0] = 8;
    __asm__ volatile("" ::: "memory");
    return p;
}

__attribute__((noinline)) static void *nofp_via_a(size_t n)
{
    char *p = nofp_leaf3(n);
    __asm__ volatile("" ::: "memory");
    nofp_sink = p; /* bodies of their own: identical functions would be folded into one */
    return p;
}

__attribute__((noinline)) static void *nofp_via_b(size_t n)
{
    char *p = nofp_leaf3(n + 1);
    __asm__ volatile("" ::: "memory");
    return p;
}

int main(void)
{
    void *a = nofp_outer(1001);
    void *b = nofp_lib_alloc(1002);
    int v[5] = {4, 2, 3, 0, 1};
    qsort(v, 5, sizeof v[0], nofp_cmp);
    int depth = nofp_rec(31);
    signal(SIGUSR1, nofp_on_signal);
    raise(SIGUSR1);
    pthread_t t;
    if (pthread_create(&t, NULL, nofp_thread, NULL) == 0)
        pthread_join(t, NULL);
    void *c = nofp_fp_lib_alloc(nofp_callback, 1007);
    for (int i = 0; i < 100; i++)
        free(i % 2 ? nofp_via_b(1008) : nofp_via_a(1008));
    free(a);
    free(b);
    free(c);
    printf(depth == 31 ? "nofp ok\n" : "nofp wrong depth\n");
    return 0;
}

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
 *   1010  main -> nofp_vla x 3 -> nofp_leaf4 -> malloc   } 50 times each, alternately, the
 *   1011  main -> nofp_vla x 2 -> nofp_leaf4 -> malloc   } innermost array sized so that
 *         nofp_leaf4's frame lies at the same place in both: the frames above are found from
 *         rbp (a function with a variable-length array keeps its frame there), which differs,
 *         while the words the other walk read are still there, in the array's unused part
 * Prints "nofp ok". */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
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

static volatile uintptr_t nofp_where; /* where nofp_leaf4's frame lay */

__attribute__((noinline)) static void *nofp_leaf4(size_t n)
{
    volatile char here = 0;
    nofp_where = (uintptr_t)&here;
    nofp_sink = malloc(n);
    free(nofp_sink); /* here: a free called from main would write over the words above */
    return NULL;
}

/* depth more frames of itself, each with an array of len bytes (the innermost: last) */
__attribute__((noinline)) static void *nofp_vla(int depth, size_t len, size_t last, size_t n)
{
    char buf[depth ? len : last];
    buf[0] = (char)depth; /* the rest is left as it was */
    void *p = depth ? nofp_vla(depth - 1, len, last, n) : nofp_leaf4(n);
    __asm__ volatile("" : : "r"(buf) : "memory");
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
    /* the array that puts nofp_leaf4 at the same place with one frame less (sizes and frames
     * are multiples of 16): not recorded, size 1 */
    nofp_vla(2, 64, 64, 1);
    uintptr_t deep = nofp_where;
    nofp_vla(1, 64, 64, 1);
    size_t last = 64 + (nofp_where - deep);
    int same = 1;
    for (int i = 0; i < 100; i++) {
        int odd = i % 2; /* one call site: the same return address into main */
        nofp_vla(odd ? 1 : 2, 64, odd ? last : 64, odd ? 1011 : 1010);
        same &= nofp_where == deep;
    }
    if (!same)
        printf("nofp_leaf4 not at one place\n");
    free(a);
    free(b);
    free(c);
    printf(depth == 31 ? "nofp ok\n" : "nofp wrong depth\n");
    return 0;
}

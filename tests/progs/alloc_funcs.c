/* alloc_funcs: a known-answer program for every heap entry point memscope interposes.
 *
 * Run by tests/integration/test_alloc_funcs.sh and test_stacks.sh under `memscope run`; the
 * test checks the database against the counts below. Each call goes through a noinline helper
 * with a distinctive name so stacks can be checked, and every size is distinctive (10000..12000)
 * so the runtime's own allocations never match.
 *
 *   malloc          10 x 10001, all freed
 *   calloc           5 x (7 * 1431 = 10017), all freed
 *   realloc chain    realloc(NULL, 10031), then realloc to 10032 .. 10040 (9 moves), freed:
 *                    10 MALLOC events with func realloc, 9 FREE from realloc + 1 free()
 *   reallocarray     reallocarray(NULL, 11, 913) = 10043, then (13, 913) = 11869, freed
 *   posix_memalign   3 x 10051 (alignment 64), freed
 *   aligned_alloc    3 x 10112 (alignment 128), freed
 *   memalign         2 x 10061 (alignment 4096), freed
 *   valloc           2 x 10071, freed
 *   pvalloc          2 x 10081, freed
 * Exit status 0; prints "alloc_funcs ok" on stdout. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* reallocarray, pvalloc, mremap, mmap64 */
#endif
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))

static int failures;

static void check(void *p, size_t align)
{
    if (!p || ((uintptr_t)p & (align - 1))) {
        fprintf(stderr, "alloc_funcs: bad block %p (align %zu)\n", p, align);
        failures++;
    }
}

NOINLINE void *ms_progs_malloc_site(size_t n)
{
    return malloc(n); /* SITE:malloc */
}

NOINLINE void *ms_progs_calloc_site(size_t m, size_t n)
{
    return calloc(m, n); /* SITE:calloc */
}

NOINLINE void *ms_progs_realloc_site(void *p, size_t n)
{
    return realloc(p, n); /* SITE:realloc */
}

NOINLINE void *ms_progs_reallocarray_site(void *p, size_t m, size_t n)
{
    return reallocarray(p, m, n); /* SITE:reallocarray */
}

NOINLINE void *ms_progs_posix_memalign_site(size_t align, size_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, align, n) != 0) /* SITE:posix_memalign */
        return NULL;
    return p;
}

NOINLINE void *ms_progs_aligned_alloc_site(size_t align, size_t n)
{
    return aligned_alloc(align, n); /* SITE:aligned_alloc */
}

NOINLINE void *ms_progs_memalign_site(size_t align, size_t n)
{
    return memalign(align, n); /* SITE:memalign */
}

NOINLINE void *ms_progs_valloc_site(size_t n)
{
    return valloc(n); /* SITE:valloc */
}

NOINLINE void *ms_progs_pvalloc_site(size_t n)
{
    return pvalloc(n); /* SITE:pvalloc */
}

NOINLINE void ms_progs_free_site(void *p)
{
    free(p); /* SITE:free */
}

int main(void)
{
    void *v[16];

    for (int i = 0; i < 10; i++) {
        v[i] = ms_progs_malloc_site(10001);
        check(v[i], 1);
        memset(v[i], 0xa5, 10001);
    }
    for (int i = 0; i < 10; i++)
        ms_progs_free_site(v[i]);

    for (int i = 0; i < 5; i++) {
        v[i] = ms_progs_calloc_site(7, 1431);
        check(v[i], 1);
    }
    for (int i = 0; i < 5; i++)
        ms_progs_free_site(v[i]);

    /* A realloc chain. A growth may stay in place; memscope records a FREE and a MALLOC
     * either way (msMemScope's convention, docs/database.md). */
    void *p = ms_progs_realloc_site(NULL, 10031);
    check(p, 1);
    for (size_t n = 10032; n <= 10040; n++) {
        p = ms_progs_realloc_site(p, n);
        check(p, 1);
        memset(p, 1, n);
    }
    ms_progs_free_site(p);

    p = ms_progs_reallocarray_site(NULL, 11, 913);
    check(p, 1);
    p = ms_progs_reallocarray_site(p, 13, 913);
    check(p, 1);
    ms_progs_free_site(p);

    for (int i = 0; i < 3; i++) {
        v[i] = ms_progs_posix_memalign_site(64, 10051);
        check(v[i], 64);
    }
    for (int i = 0; i < 3; i++)
        ms_progs_free_site(v[i]);

    for (int i = 0; i < 3; i++) {
        v[i] = ms_progs_aligned_alloc_site(128, 10112);
        check(v[i], 128);
    }
    for (int i = 0; i < 3; i++)
        ms_progs_free_site(v[i]);

    for (int i = 0; i < 2; i++) {
        v[i] = ms_progs_memalign_site(4096, 10061);
        check(v[i], 4096);
    }
    for (int i = 0; i < 2; i++)
        ms_progs_free_site(v[i]);

    for (int i = 0; i < 2; i++) {
        v[i] = ms_progs_valloc_site(10071);
        check(v[i], 4096);
    }
    for (int i = 0; i < 2; i++)
        ms_progs_free_site(v[i]);

    for (int i = 0; i < 2; i++) {
        v[i] = ms_progs_pvalloc_site(10081);
        check(v[i], 4096);
    }
    for (int i = 0; i < 2; i++)
        ms_progs_free_site(v[i]);

    if (failures)
        return 1;
    printf("alloc_funcs ok\n");
    return 0;
}

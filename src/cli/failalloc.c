/* failalloc.c: allocation-failure injection for the test build (MEMSCOPE_FAIL_ALLOC=ON, which
 * `make check` turns on in its sanitizer build; never in a release build).
 *
 * The memscope binary is linked with -Wl,--wrap for malloc & co., so every allocation memscope's
 * own code makes comes here, and SQLite's allocations come here too (sqlite3_config before
 * main). With MEMSCOPE_FAIL_ALLOC=N in the environment the Nth of them (1-based) fails, once, as
 * SQLite's own malloc tests do; with MEMSCOPE_FAIL_ALLOC=count, memscope says at exit how many
 * allocations it made, so that a test knows the range of N to try
 * (tests/integration/test_fail_alloc.sh). Allocations inside other libraries (libdw, libc's
 * stdio) are not counted. */
#include "common/ms_error.h"

#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void *__real_reallocarray(void *p, size_t n, size_t m);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);

static unsigned long fail_at; /* 0: never fail */
/* The count, in memory shared with the children memscope forks (the conversion runs in one),
 * so that N counts the allocations of the whole command. */
static unsigned long allocations_local;
static unsigned long *allocations = &allocations_local;

/* Whether this allocation is the one to fail. */
static int fail_now(void)
{
    unsigned long n = __atomic_add_fetch(allocations, 1, __ATOMIC_RELAXED);
    return fail_at && n == fail_at;
}

void *__wrap_malloc(size_t n)
{
    return fail_now() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t m)
{
    return fail_now() ? NULL : __real_calloc(n, m);
}

void *__wrap_realloc(void *p, size_t n)
{
    return fail_now() ? NULL : __real_realloc(p, n);
}

void *__wrap_reallocarray(void *p, size_t n, size_t m)
{
    return fail_now() ? NULL : __real_reallocarray(p, n, m);
}

char *__wrap_strdup(const char *s)
{
    return fail_now() ? NULL : __real_strdup(s);
}

char *__wrap_strndup(const char *s, size_t n)
{
    return fail_now() ? NULL : __real_strndup(s, n);
}

/* SQLite's allocator on the same count: each block keeps its size in 16 bytes before it. */
#define HDR 16

/* A failure here is noted as SQLite's own allocator notes it (sqlite3_log SQLITE_NOMEM, which
 * startup.c's log callback turns into ms_oom_note): not for memscope's own allocations above,
 * whose failures the test must see handled by the code itself. */
static void *sq_malloc(int n)
{
    if (n <= 0)
        return NULL;
    if (fail_now()) {
        ms_oom_note();
        return NULL;
    }
    uint8_t *p = __real_malloc((size_t)n + HDR);
    if (!p)
        return NULL;
    memcpy(p, &n, sizeof n);
    return p + HDR;
}

static void sq_free(void *p)
{
    if (p)
        free((uint8_t *)p - HDR);
}

static int sq_size(void *p)
{
    int n = 0;
    if (p)
        memcpy(&n, (uint8_t *)p - HDR, sizeof n);
    return n;
}

static void *sq_realloc(void *p, int n)
{
    if (!p)
        return sq_malloc(n);
    if (n <= 0)
        return NULL;
    if (fail_now()) {
        ms_oom_note();
        return NULL;
    }
    uint8_t *q = __real_realloc((uint8_t *)p - HDR, (size_t)n + HDR);
    if (!q)
        return NULL;
    memcpy(q, &n, sizeof n);
    return q + HDR;
}

static int sq_roundup(int n)
{
    return (n + 7) & ~7;
}

static int sq_init(void *arg)
{
    (void)arg;
    return SQLITE_OK;
}

static void sq_shutdown(void *arg)
{
    (void)arg;
}

static void say_count(void)
{
    fprintf(stderr, "memscope: failalloc: %lu allocations\n",
            __atomic_load_n(allocations, __ATOMIC_RELAXED));
}

__attribute__((constructor)) static void failalloc_init(void)
{
    const char *v = getenv("MEMSCOPE_FAIL_ALLOC");
    if (!v || !*v)
        return;
    static const sqlite3_mem_methods methods = {sq_malloc,  sq_free, sq_realloc,  sq_size,
                                                sq_roundup, sq_init, sq_shutdown, NULL};
    sqlite3_config(SQLITE_CONFIG_MALLOC, &methods);
    void *shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared != MAP_FAILED)
        allocations = shared;
    if (!strcmp(v, "count")) {
        atexit(say_count);
    } else {
        fail_at = strtoul(v, NULL, 10);
    }
}

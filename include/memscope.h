/* memscope.h: the annotation API for programs traced by memscope.
 *
 * Include it and link nothing. Each call below is an inline function that calls the agent
 * (libmemscope.so, preloaded by `memscope run`) through a weak reference; without the agent it
 * is a no-op that costs one test of a null pointer and returns -1. With the agent it returns 0,
 * or -1 when nothing is being recorded. Strings are copied; labels longer than 1024 bytes are
 * cut. The calls are thread-safe; owners and ranges are per thread.
 *
 *   memscope_step()                    ends step n and begins step n+1 (steps count from 1)
 *   memscope_owner_push(label)         allocations on this thread until the matching pop
 *   memscope_owner_pop()               carry the owner; nested labels join with '@'
 *   memscope_mark(msg)                 a named instant
 *   memscope_range_push(name)          a named interval (an op, a phase) on this thread
 *   memscope_range_pop()
 *   memscope_access(p, n, flags, op)   op read and/or wrote n bytes at p
 *                                      (flags: MEMSCOPE_READ | MEMSCOPE_WRITE); op may end
 *                                      with "\x1fkey=value;key=value" (dtype, shape, format:
 *                                      msMemScope's ACCESS attributes, docs/database.md)
 *   memscope_pool_reserve(pool, p, n)  a custom allocator took region [p, p+n) for pool
 *   memscope_pool_release(pool, p)     ... and gave it back
 *   memscope_pool_alloc(pool, p, n)    it handed out block [p, p+n) from pool
 *   memscope_pool_free(pool, p)        ... and took it back
 *   memscope_start() / memscope_stop() start or stop recording (--collect-mode=deferred) */
#ifndef MEMSCOPE_H
#define MEMSCOPE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MEMSCOPE_READ 1
#define MEMSCOPE_WRITE 2

/* Defined by the agent; weak so that a program without it still links and runs. */
int memscope__step(void) __attribute__((weak));
int memscope__owner_push(const char *label) __attribute__((weak));
int memscope__owner_pop(void) __attribute__((weak));
int memscope__mark(const char *msg) __attribute__((weak));
int memscope__range_push(const char *name) __attribute__((weak));
int memscope__range_pop(void) __attribute__((weak));
int memscope__access(const void *p, size_t n, int flags, const char *op) __attribute__((weak));
int memscope__pool_alloc(const char *pool, const void *p, size_t n) __attribute__((weak));
int memscope__pool_free(const char *pool, const void *p) __attribute__((weak));
int memscope__pool_reserve(const char *pool, const void *p, size_t n) __attribute__((weak));
int memscope__pool_release(const char *pool, const void *p) __attribute__((weak));
int memscope__start(void) __attribute__((weak));
int memscope__stop(void) __attribute__((weak));

static inline __attribute__((always_inline)) int memscope_step(void)
{
    return memscope__step ? memscope__step() : -1;
}

static inline __attribute__((always_inline)) int memscope_owner_push(const char *label)
{
    return memscope__owner_push ? memscope__owner_push(label) : -1;
}

static inline __attribute__((always_inline)) int memscope_owner_pop(void)
{
    return memscope__owner_pop ? memscope__owner_pop() : -1;
}

static inline __attribute__((always_inline)) int memscope_mark(const char *msg)
{
    return memscope__mark ? memscope__mark(msg) : -1;
}

static inline __attribute__((always_inline)) int memscope_range_push(const char *name)
{
    return memscope__range_push ? memscope__range_push(name) : -1;
}

static inline __attribute__((always_inline)) int memscope_range_pop(void)
{
    return memscope__range_pop ? memscope__range_pop() : -1;
}

static inline __attribute__((always_inline)) int memscope_access(const void *p, size_t n, int flags,
                                                                 const char *op)
{
    return memscope__access ? memscope__access(p, n, flags, op) : -1;
}

static inline __attribute__((always_inline)) int memscope_pool_alloc(const char *pool,
                                                                     const void *p, size_t n)
{
    return memscope__pool_alloc ? memscope__pool_alloc(pool, p, n) : -1;
}

static inline __attribute__((always_inline)) int memscope_pool_free(const char *pool, const void *p)
{
    return memscope__pool_free ? memscope__pool_free(pool, p) : -1;
}

static inline __attribute__((always_inline)) int memscope_pool_reserve(const char *pool,
                                                                       const void *p, size_t n)
{
    return memscope__pool_reserve ? memscope__pool_reserve(pool, p, n) : -1;
}

static inline __attribute__((always_inline)) int memscope_pool_release(const char *pool,
                                                                       const void *p)
{
    return memscope__pool_release ? memscope__pool_release(pool, p) : -1;
}

static inline __attribute__((always_inline)) int memscope_start(void)
{
    return memscope__start ? memscope__start() : -1;
}

static inline __attribute__((always_inline)) int memscope_stop(void)
{
    return memscope__stop ? memscope__stop() : -1;
}

#ifdef __cplusplus
}
#endif

#endif

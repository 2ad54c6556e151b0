/* ns.h: timestamps, nanoseconds since the epoch. Every database memscope writes keeps them in
 * [0, MS_NS_MAX] (the conversion clamps what a damaged or hostile trace or pickle claims), so
 * that a difference or a sum of two of them never overflows; a database read back is hostile
 * input all the same, so the readers' arithmetic on its timestamps saturates (ms_ns_sub,
 * ms_ns_add) instead of overflowing (undefined behaviour in C). Header-only. */
#ifndef MS_NS_H
#define MS_NS_H

#include <stdint.h>

#define MS_NS_MAX (((int64_t)1 << 62) - 1) /* about the year 2116: two of them add up */

/* t brought into [0, MS_NS_MAX]. */
static inline int64_t ms_ns_clamp(int64_t t)
{
    return t < 0 ? 0 : t > MS_NS_MAX ? MS_NS_MAX : t;
}

/* a - b, or INT64_MIN / INT64_MAX where that does not fit. */
static inline int64_t ms_ns_sub(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_sub_overflow(a, b, &r))
        return a < b ? INT64_MIN : INT64_MAX;
    return r;
}

/* a + b, or INT64_MIN / INT64_MAX where that does not fit. */
static inline int64_t ms_ns_add(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r))
        return a < 0 ? INT64_MIN : INT64_MAX;
    return r;
}

#endif

/* vcode.h: the viewer's in-memory encodings' varints (blockstore.c, timeline.c): written with
 * the trace encoder's varint and zigzag (trace/encode.h), read back without bounds checks, as
 * the bytes are the viewer's own, never input. */
#ifndef MS_VIEW_VCODE_H
#define MS_VIEW_VCODE_H

#include "trace/encode.h"

#include <stddef.h>
#include <stdint.h>

/* Writes v at p; the bytes written (at most 10). */
static inline size_t ms_vput(uint8_t *p, uint64_t v)
{
    return (size_t)(ms_put_varint(p, v) - p);
}

/* Reads a varint the viewer wrote at *pp and moves *pp past it. */
static inline uint64_t ms_vget(const uint8_t **pp)
{
    const uint8_t *p = *pp;
    if (*p < 0x80) { /* most fields: one byte */
        *pp = p + 1;
        return *p;
    }
    uint64_t v = 0;
    unsigned s = 0;
    uint8_t b;
    do {
        b = *p++;
        v |= (uint64_t)(b & 0x7f) << s;
        s += 7;
    } while (b & 0x80);
    *pp = p;
    return v;
}

#endif

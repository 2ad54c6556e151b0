/* utf8.h: the one test of UTF-8 that memscope's JSON writers share (the analyses' and viewer's
 * src/analyze/json.c, the snapshot summary's): names come from the traced program, any bytes,
 * and JSON must be UTF-8 (RFC 8259), so a byte that does not begin a well-formed sequence is
 * written as U+FFFD, the replacement character, and the text after it is kept. Header-only. */
#ifndef MS_UTF8_H
#define MS_UTF8_H

#include <stddef.h>

/* The length (1-4) of the well-formed UTF-8 sequence (RFC 3629: no overlong form, no
 * surrogate, nothing past U+10FFFF) that starts at p, of the n bytes available; 0 when p[0]
 * does not start one. */
static inline size_t ms_utf8_len(const unsigned char *p, size_t n)
{
    unsigned char c = p[0];
    if (c < 0x80)
        return 1;
    size_t len;
    unsigned char lo = 0x80, hi = 0xbf; /* the second byte's range */
    if (c >= 0xc2 && c <= 0xdf)
        len = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0)
            lo = 0xa0; /* no overlong form */
        else if (c == 0xed)
            hi = 0x9f; /* no surrogate */
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f; /* nothing past U+10FFFF */
    } else
        return 0;
    if (n < len || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (p[i] < 0x80 || p[i] > 0xbf)
            return 0;
    return len;
}

#endif

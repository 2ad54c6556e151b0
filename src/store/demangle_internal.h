/* demangle_internal.h: what the demangler's files share (demangle.c: the entry points, C++ and
 * Rust's legacy mangling; demangle_v0.c: Rust's v0 mangling): the output, capped at
 * MS_DEMANGLE_MAX_OUT bytes, and the v0 demangler. */
#ifndef MS_STORE_DEMANGLE_INTERNAL_H
#define MS_STORE_DEMANGLE_INTERNAL_H

#include "demangle.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The output being written: a buffer of MS_DEMANGLE_MAX_OUT + 1 bytes. */
struct out {
    char *p;
    size_t len;
    int full; /* the cap was reached */
};

static inline void put_n(struct out *o, const char *s, size_t n)
{
    if (!o || o->full)
        return;
    if (n > MS_DEMANGLE_MAX_OUT - o->len) {
        o->full = 1;
        return;
    }
    memcpy(o->p + o->len, s, n);
    o->len += n;
}

/* The output as a string of its own size (the buffer is the cap's). */
static inline char *out_finish(struct out *o)
{
    o->p[o->len] = 0;
    char *r = realloc(o->p, o->len + 1);
    return r ? r : o->p;
}

static inline void put(struct out *o, const char *s)
{
    put_n(o, s, strlen(s));
}

static inline void put_u64(struct out *o, uint64_t v)
{
    char b[24];
    snprintf(b, sizeof b, "%llu", (unsigned long long)v);
    put(o, b);
}

/* One code point in UTF-8. */
static inline void put_cp(struct out *o, uint32_t c)
{
    char b[4];
    size_t n;
    if (c < 0x80) {
        b[0] = (char)c;
        n = 1;
    } else if (c < 0x800) {
        b[0] = (char)(0xc0 | c >> 6);
        b[1] = (char)(0x80 | (c & 0x3f));
        n = 2;
    } else if (c < 0x10000) {
        b[0] = (char)(0xe0 | c >> 12);
        b[1] = (char)(0x80 | ((c >> 6) & 0x3f));
        b[2] = (char)(0x80 | (c & 0x3f));
        n = 3;
    } else {
        b[0] = (char)(0xf0 | c >> 18);
        b[1] = (char)(0x80 | ((c >> 12) & 0x3f));
        b[2] = (char)(0x80 | ((c >> 6) & 0x3f));
        b[3] = (char)(0x80 | (c & 0x3f));
        n = 4;
    }
    put_n(o, b, n);
}

/* A suffix rustc-demangle keeps after the name: "." then ASCII letters, digits, punctuation. */
int ms__demangle_symbol_like(const char *s);

/* The readable name of a v0 symbol ("_R...", without an LLVM suffix), malloc'd; NULL when it
 * is not one, is damaged or exceeds the caps. */
char *ms__demangle_v0(const char *name);

#endif

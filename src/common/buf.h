/* buf.h: the one growable byte buffer. Appends never fail: a failed growth, or one past the cap
 * set at init, sets oom (sticky), and the owner checks it once at the end (curl's dynbuf). The
 * capacity doubles from a first size; the bytes are always followed by a NUL, so a text buffer
 * is a C string. Hot paths call ms_buf_reserve (inline) and write into p themselves. */
#ifndef MS_BUF_H
#define MS_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include <string.h>

/* The cap of a buffer whose owner sets none (a zeroed struct ms_buf is an empty buffer). */
#define MS_BUF_MAX ((size_t)1 << 30)

struct ms_buf {
    char *p;         /* len bytes, then a NUL; NULL until the first append */
    size_t len, cap; /* cap: bytes allocated (the NUL's included) */
    size_t max;      /* the most bytes it may hold (0: MS_BUF_MAX) */
    size_t first;    /* the first allocation's size */
    int oom;         /* an append failed: the contents are incomplete */
};

/* An empty buffer that holds at most max bytes (at most SIZE_MAX / 4), its first allocation
 * first bytes (0: 256). */
void ms_buf_init(struct ms_buf *b, size_t first, size_t max);

/* Frees the bytes; the buffer is then empty (its cap on size and first size kept). */
void ms_buf_release(struct ms_buf *b);

/* Grows for n more bytes: 0, or -1 with oom set (see ms_buf_reserve). */
int ms_buf__grow(struct ms_buf *b, size_t n);

/* Room for n more bytes (and the NUL): 0, or -1 when oom is or becomes set. */
static inline int ms_buf_reserve(struct ms_buf *b, size_t n)
{
    if (b->oom)
        return -1;
    if (b->p && n < b->cap - b->len)
        return 0;
    return ms_buf__grow(b, n);
}

static inline void ms_buf_add(struct ms_buf *b, const void *s, size_t n)
{
    if (ms_buf_reserve(b, n) == 0) {
        if (n)
            memcpy(b->p + b->len, s, n);
        b->len += n;
        b->p[b->len] = 0;
    }
}

static inline void ms_buf_byte(struct ms_buf *b, unsigned char c)
{
    if (ms_buf_reserve(b, 1) == 0) {
        b->p[b->len++] = (char)c;
        b->p[b->len] = 0;
    }
}

void ms_buf_str(struct ms_buf *b, const char *s);
void ms_buf_addf(struct ms_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ms_buf_vaddf(struct ms_buf *b, const char *fmt, va_list ap);
/* Appends n bytes of s as a JSON string literal (quotes, escapes). */
void ms_buf_json(struct ms_buf *b, const char *s, size_t n);

/* Hands the bytes (a C string) to the caller, who frees them; NULL when oom is set (the bytes
 * are then freed) or nothing was added. The buffer is empty after. */
char *ms_buf_take(struct ms_buf *b);

#endif

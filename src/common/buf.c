/* buf.c: see buf.h. */
#include "buf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

void ms_buf_init(struct ms_buf *b, size_t first, size_t max)
{
    memset(b, 0, sizeof *b);
    b->first = first ? first : 256;
    b->max = max < SIZE_MAX / 4 ? max : SIZE_MAX / 4;
}

void ms_buf_release(struct ms_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
    b->oom = 0;
}

int ms_buf__grow(struct ms_buf *b, size_t n)
{
    if (b->oom)
        return -1;
    size_t max = b->max ? b->max : MS_BUF_MAX;
    if (n > max - b->len) {
        b->oom = 1;
        return -1;
    }
    size_t need = b->len + n + 1, cap = b->cap ? b->cap : b->first ? b->first : 256;
    while (cap < need)
        cap = cap > (max + 1) / 2 ? max + 1 : cap * 2;
    if (b->p && cap <= b->cap)
        return 0;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = 1;
        return -1;
    }
    if (!b->p)
        p[0] = 0;
    b->p = p;
    b->cap = cap;
    return 0;
}

void ms_buf_str(struct ms_buf *b, const char *s)
{
    ms_buf_add(b, s, strlen(s));
}

void ms_buf_vaddf(struct ms_buf *b, const char *fmt, va_list ap)
{
    va_list again;
    va_copy(again, ap);
    char tmp[256];
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    if (n < 0) {
        b->oom = 1;
    } else if ((size_t)n < sizeof tmp) {
        ms_buf_add(b, tmp, (size_t)n);
    } else if (ms_buf_reserve(b, (size_t)n) == 0) {
        vsnprintf(b->p + b->len, (size_t)n + 1, fmt, again);
        b->len += (size_t)n;
    }
    va_end(again);
}

void ms_buf_addf(struct ms_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ms_buf_vaddf(b, fmt, ap);
    va_end(ap);
}

void ms_buf_json(struct ms_buf *b, const char *s, size_t n)
{
    ms_buf_byte(b, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            ms_buf_add(b, e, 2);
        } else if (c < 0x20) {
            ms_buf_addf(b, "\\u%04x", c);
        } else {
            ms_buf_byte(b, c);
        }
    }
    ms_buf_byte(b, '"');
}

char *ms_buf_take(struct ms_buf *b)
{
    char *p = b->oom ? NULL : b->p;
    if (b->oom)
        free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
    b->oom = 0;
    return p;
}

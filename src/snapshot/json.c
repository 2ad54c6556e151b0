/* json.c: the bounded JSON reader (see json.h). Recursive descent whose depth is capped by
 * u->caps.max_depth; pending items of open containers sit on u's value stack (capped by
 * max_stack), so memory is linear in the input. */
#include "json.h"

#include "common/grow.h"
#include "common/ms_error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct jp {
    struct ms_unpickle *u;
    const unsigned char *base, *p, *end;
    uint32_t depth;
};

static int jfail(struct jp *j, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int jfail(struct jp *j, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(j->u->err, sizeof j->u->err, fmt, ap);
    va_end(ap);
    uint64_t off = (uint64_t)(j->p - j->base);
    if (n >= 0 && (size_t)n < sizeof j->u->err)
        snprintf(j->u->err + n, sizeof j->u->err - (size_t)n, " at byte offset %llu (JSON)",
                 (unsigned long long)off);
    j->u->err_offset = off;
    return code;
}

static void skip_ws(struct jp *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' || *j->p == '\r' || *j->p == '\t'))
        j->p++;
}

static int jpush(struct jp *j, ms_pv v)
{
    struct ms_unpickle *u = j->u;
    if (v == MS_PV_ABSENT_VALUE)
        return jfail(j, MS_ENOMEM, "out of memory (arena cap %llu bytes)",
                     (unsigned long long)u->caps.max_memory);
    if (u->stack_len >= u->caps.max_stack)
        return jfail(j, MS_ELIMIT, "too many pending values (cap %llu)",
                     (unsigned long long)u->caps.max_stack);
    if (ms_grow((void **)&u->stack, &u->stack_cap, u->stack_len, sizeof *u->stack, 1024,
                u->caps.max_stack) < 0)
        return jfail(j, MS_ENOMEM, "out of memory");
    u->stack[u->stack_len++] = v;
    return 0;
}

static int utf8_put(unsigned char *o, uint32_t c)
{
    if (c < 0x80) {
        o[0] = (unsigned char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (unsigned char)(0xC0 | (c >> 6));
        o[1] = (unsigned char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (c >> 12));
        o[1] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (c >> 18));
    o[1] = (unsigned char)(0x80 | ((c >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (c & 0x3F));
    return 4;
}

static int hex4(const unsigned char *s, uint32_t *out)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= c - '0';
        else if (c >= 'a' && c <= 'f')
            v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            v |= c - 'A' + 10;
        else
            return -1;
    }
    *out = v;
    return 0;
}

/* Parses a string starting at the opening quote; the value is pushed. */
static int parse_string(struct jp *j)
{
    const unsigned char *s = ++j->p;
    int escapes = 0;
    while (j->p < j->end && *j->p != '"') {
        if (*j->p < 0x20)
            return jfail(j, MS_EFORMAT, "control character in string");
        if (*j->p == '\\') {
            escapes = 1;
            j->p++;
            if (j->p >= j->end)
                break;
        }
        j->p++;
    }
    if (j->p >= j->end)
        return jfail(j, MS_ETRUNC, "input ends inside a string");
    size_t raw = (size_t)(j->p - s);
    if (raw > j->u->caps.max_bytes)
        return jfail(j, MS_ELIMIT, "string over the cap of %llu bytes",
                     (unsigned long long)j->u->caps.max_bytes);
    j->p++; /* closing quote */
    if (ms__utf8_check(s, raw))
        return jfail(j, MS_EFORMAT, "string is not valid UTF-8");
    if (!escapes)
        return jpush(j, ms_pv_make_str(j->u, (const char *)s, raw));
    /* Decoding never grows the text: every escape is at least as long as its UTF-8. */
    unsigned char *out = ms_pv_alloc(j->u, raw ? raw : 1);
    if (!out)
        return jfail(j, MS_ENOMEM, "out of memory");
    size_t n = 0;
    for (const unsigned char *q = s; q < s + raw;) {
        if (*q != '\\') {
            out[n++] = *q++;
            continue;
        }
        q++;
        unsigned c = *q++;
        switch (c) {
        case '"': out[n++] = '"'; break;
        case '\\': out[n++] = '\\'; break;
        case '/': out[n++] = '/'; break;
        case 'b': out[n++] = '\b'; break;
        case 'f': out[n++] = '\f'; break;
        case 'n': out[n++] = '\n'; break;
        case 'r': out[n++] = '\r'; break;
        case 't': out[n++] = '\t'; break;
        case 'u': {
            uint32_t cp, lo;
            if (s + raw - q < 4 || hex4(q, &cp))
                return jfail(j, MS_EFORMAT, "bad \\u escape");
            q += 4;
            if (cp >= 0xD800 && cp < 0xDC00 && s + raw - q >= 6 && q[0] == '\\' && q[1] == 'u' &&
                !hex4(q + 2, &lo) && lo >= 0xDC00 && lo < 0xE000) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                q += 6;
            }
            n += (size_t)utf8_put(out + n, cp);
            break;
        }
        default: return jfail(j, MS_EFORMAT, "bad escape \\%c", c);
        }
    }
    return jpush(j, ms_pv_make_str(j->u, (const char *)out, n));
}

static int parse_number(struct jp *j)
{
    const unsigned char *s = j->p;
    int is_float = 0;
    if (j->p < j->end && *j->p == '-')
        j->p++;
    while (j->p < j->end) {
        unsigned c = *j->p;
        if (c >= '0' && c <= '9') {
            j->p++;
        } else if (c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
            is_float = 1;
            j->p++;
        } else {
            break;
        }
    }
    size_t n = (size_t)(j->p - s);
    char tmp[64];
    if (n == 0 || n >= sizeof tmp || (n == 1 && *s == '-'))
        return jfail(j, MS_EFORMAT, "bad number");
    memcpy(tmp, s, n);
    tmp[n] = 0;
    char *e;
    if (!is_float) {
        errno = 0;
        long long v = strtoll(tmp, &e, 10);
        if (*e == 0 && errno == 0)
            return jpush(j, ms_pv_make_int(j->u, v));
    }
    double d = strtod(tmp, &e);
    if (*e)
        return jfail(j, MS_EFORMAT, "bad number");
    return jpush(j, ms_pv_make_float(j->u, d));
}

static int parse_value(struct jp *j);

static int parse_container(struct jp *j, int dict)
{
    struct ms_unpickle *u = j->u;
    if (++j->depth > u->caps.max_depth)
        return jfail(j, MS_ELIMIT, "nesting deeper than %u", u->caps.max_depth);
    j->p++;
    uint64_t start = u->stack_len;
    int rc;
    skip_ws(j);
    unsigned close = dict ? '}' : ']';
    if (j->p < j->end && *j->p == close) {
        j->p++;
    } else {
        for (;;) {
            skip_ws(j);
            if (dict) {
                if (j->p >= j->end)
                    return jfail(j, MS_ETRUNC, "input ends inside an object");
                if (*j->p != '"')
                    return jfail(j, MS_EFORMAT, "object key is not a string");
                if ((rc = parse_string(j)))
                    return rc;
                skip_ws(j);
                if (j->p >= j->end || *j->p != ':')
                    return jfail(j, j->p >= j->end ? MS_ETRUNC : MS_EFORMAT, "expected ':'");
                j->p++;
            }
            if ((rc = parse_value(j)))
                return rc;
            if ((u->stack_len - start) / (dict ? 2 : 1) > u->caps.max_items)
                return jfail(j, MS_ELIMIT, "container over the cap of %llu items",
                             (unsigned long long)u->caps.max_items);
            skip_ws(j);
            if (j->p >= j->end)
                return jfail(j, MS_ETRUNC, "input ends inside a container");
            if (*j->p == ',') {
                j->p++;
                continue;
            }
            if (*j->p == close) {
                j->p++;
                break;
            }
            return jfail(j, MS_EFORMAT, "expected ',' or '%c'", close);
        }
    }
    ms_pv v =
        ms_pv_make_seq(u, dict ? MS_PV_DICT : MS_PV_LIST, u->stack + start, u->stack_len - start);
    u->stack_len = start;
    j->depth--;
    return jpush(j, v);
}

static int literal(struct jp *j, const char *word, ms_pv v)
{
    size_t n = strlen(word);
    if ((size_t)(j->end - j->p) < n)
        return jfail(j, MS_ETRUNC, "input ends inside a literal");
    if (memcmp(j->p, word, n))
        return jfail(j, MS_EFORMAT, "unexpected character '%c'", *j->p);
    j->p += n;
    return jpush(j, v);
}

static int parse_value(struct jp *j)
{
    skip_ws(j);
    if (j->p >= j->end)
        return jfail(j, MS_ETRUNC, "input ends where a value should be");
    switch (*j->p) {
    case '{': return parse_container(j, 1);
    case '[': return parse_container(j, 0);
    case '"': return parse_string(j);
    case 't': return literal(j, "true", ms_pv_make_special(MS_PV_BOOL, 1));
    case 'f': return literal(j, "false", ms_pv_make_special(MS_PV_BOOL, 0));
    case 'n': return literal(j, "null", ms_pv_make_special(MS_PV_NONE, 0));
    case 'N': return literal(j, "NaN", ms_pv_make_float(j->u, 0.0 / 0.0));
    default:
        if (*j->p == '-' || (*j->p >= '0' && *j->p <= '9'))
            return parse_number(j);
        return jfail(j, MS_EFORMAT, "unexpected character 0x%02x", *j->p);
    }
}

int ms_json_load(struct ms_unpickle *u, const void *buf, size_t len)
{
    struct jp j = {.u = u, .base = buf, .p = buf, .end = (const unsigned char *)buf + len};
    u->buf = buf;
    u->len = len;
    u->protocol = -1;
    u->err[0] = 0;
    int rc = parse_value(&j);
    if (rc)
        return rc;
    skip_ws(&j);
    if (j.p != j.end)
        return jfail(&j, MS_EFORMAT, "trailing data after the JSON value");
    u->root = u->stack[--u->stack_len];
    return 0;
}

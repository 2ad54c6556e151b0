/* json.c: a minimal streaming JSON writer for the analyses' and the viewer's JSON. Its strings are
 * always valid JSON: control characters escaped, bytes that are not UTF-8 written as U+FFFD. */
#include "analyze.h"

#include "common/utf8.h"

#include <math.h>
#include <string.h>

void ms_json_init(struct ms_json *j, FILE *f)
{
    j->f = f;
    j->depth = 0;
    j->first[0] = 1;
}

static void put_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*p < 0x20) {
                fprintf(f, "\\u%04x", *p);
            } else if (*p >= 0x80) { /* JSON is UTF-8: other bytes as U+FFFD (utf8.h) */
                size_t len = ms_utf8_len(p, strnlen((const char *)p, 4));
                if (len)
                    fwrite(p, 1, len, f), p += len - 1;
                else
                    fputs("\\ufffd", f);
            } else {
                fputc(*p, f);
            }
        }
    }
    fputc('"', f);
}

/* Writes the separator and the key (when inside an object) of the next element. */
static void element(struct ms_json *j, const char *key)
{
    if (!j->first[j->depth])
        fputc(',', j->f);
    j->first[j->depth] = 0;
    if (key) {
        put_string(j->f, key);
        fputc(':', j->f);
    }
}

static void open_(struct ms_json *j, const char *key, int c)
{
    element(j, key);
    fputc(c, j->f);
    if (j->depth < 63)
        j->depth++;
    j->first[j->depth] = 1;
}

void ms_json_begin_object(struct ms_json *j, const char *key)
{
    open_(j, key, '{');
}
void ms_json_begin_array(struct ms_json *j, const char *key)
{
    open_(j, key, '[');
}

void ms_json_end_object(struct ms_json *j)
{
    if (j->depth > 0)
        j->depth--;
    fputc('}', j->f);
}

void ms_json_end_array(struct ms_json *j)
{
    if (j->depth > 0)
        j->depth--;
    fputc(']', j->f);
}

void ms_json_str(struct ms_json *j, const char *key, const char *v)
{
    element(j, key);
    if (v)
        put_string(j->f, v);
    else
        fputs("null", j->f);
}

void ms_json_int(struct ms_json *j, const char *key, long long v)
{
    element(j, key);
    fprintf(j->f, "%lld", v);
}

void ms_json_double(struct ms_json *j, const char *key, double v)
{
    element(j, key);
    if (isfinite(v))
        fprintf(j->f, "%.17g", v);
    else
        fputs("null", j->f);
}

void ms_json_milli(struct ms_json *j, const char *key, long long v)
{
    element(j, key);
    unsigned long long a = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
    fprintf(j->f, "%s%llu.%03llu", v < 0 ? "-" : "", a / 1000, a % 1000);
}

void ms_json_bool(struct ms_json *j, const char *key, int v)
{
    element(j, key);
    fputs(v ? "true" : "false", j->f);
}

void ms_json_null(struct ms_json *j, const char *key)
{
    element(j, key);
    fputs("null", j->f);
}

void ms_json_finish(struct ms_json *j)
{
    fputc('\n', j->f);
}

/* term_text.c: escapes program-made text for a terminal (term_text.h). Called by every text
 * renderer (src/analyze, src/cli) on each string that came from the traced program or its
 * files; a few strings per report line. */
#include "term_text.h"

#include <stdio.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s (2..4), or 0 when s does not start one (overlong
 * forms and surrogates included). */
static size_t utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    size_t n;
    unsigned min;
    if (c >= 0xc2 && c <= 0xdf)
        n = 2, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4, min = 0x10000;
    else
        return 0;
    unsigned cp = c & (0x7f >> n);
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

/* The escape of the character at s into e (at most 7 bytes and a NUL), and its byte count in
 * *used; 0 (e untouched) when it is printed as it is. */
static size_t escape_at(const unsigned char *s, char *e, size_t *used)
{
    unsigned c = s[0];
    *used = 1;
    if (c < 0x20 || c == 0x7f) {
        const char *named = c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : NULL;
        if (named)
            return (size_t)snprintf(e, 8, "%s", named);
        return (size_t)snprintf(e, 8, "\\x%02x", c);
    }
    if (c < 0x80)
        return 0;
    size_t n = utf8_len(s);
    if (!n)
        return (size_t)snprintf(e, 8, "\\x%02x", c);
    *used = n;
    if (n == 2 && c == 0xc2 && s[1] < 0xa0) /* a C1 control: CSI (U+009B), OSC (U+009D) ... */
        return (size_t)snprintf(e, 8, "\\u%04x", (unsigned)s[1]);
    return 0;
}

size_t ms_term_escape(char *out, size_t len, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t o = 0;
    while (*p) {
        char e[8];
        size_t used, n = escape_at(p, e, &used);
        const char *src = n ? e : (const char *)p;
        size_t w = n ? n : used;
        if (o + w + 4 > len) { /* room for "..." and the NUL */
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        memcpy(out + o, src, w);
        o += w;
        p += used;
    }
    out[o] = 0;
    return o;
}

const char *ms_term_text(const char *s)
{
    static __thread char ring[8][4096];
    static __thread unsigned next;
    if (!s)
        return NULL;
    const unsigned char *p = (const unsigned char *)s;
    size_t used;
    char e[8];
    while (*p && !escape_at(p, e, &used))
        p += used;
    if (!*p)
        return s;
    char *buf = ring[next++ % 8];
    ms_term_escape(buf, sizeof ring[0], s);
    return buf;
}

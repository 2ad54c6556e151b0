/* size.c: sizes written by people (size.h). Called while options are parsed: a few per
 * command line. */
#include "size.h"
#include "ms_error.h"

#include <string.h>
#include <strings.h>

static int blank(char c)
{
    return c == ' ' || c == '\t';
}

int ms_size_parse(const char *s, uint64_t *out)
{
    static const struct {
        const char *name;
        unsigned shift;
    } units[] = {{"b", 0},    {"k", 10}, {"kb", 10}, {"kib", 10}, {"m", 20}, {"mb", 20},
                 {"mib", 20}, {"g", 30}, {"gb", 30}, {"gib", 30}, {"t", 40}, {"tb", 40},
                 {"tib", 40}, {"p", 50}, {"pb", 50}, {"pib", 50}};
    if (!s)
        return MS_EINVAL;
    while (blank(*s))
        s++;
    if (*s == '+')
        s++;
    /* The number: digits, then an optional fraction; read exactly (no strtod: "1e3", "0x10",
     * "inf" are not sizes). */
    uint64_t whole = 0;
    int digits = 0;
    for (; *s >= '0' && *s <= '9'; s++, digits++) {
        if (whole > (UINT64_MAX - 9) / 10) /* the 2^63 check below refuses the rest */
            return MS_EINVAL;
        whole = whole * 10 + (uint64_t)(*s - '0');
    }
    double frac = 0, scale = 1;
    if (*s == '.') {
        for (s++; *s >= '0' && *s <= '9'; s++, digits++) {
            scale /= 10;
            frac += (*s - '0') * scale;
        }
    }
    if (!digits)
        return MS_EINVAL;
    while (blank(*s))
        s++;
    const char *u = s;
    while ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z'))
        s++;
    size_t ulen = (size_t)(s - u);
    while (blank(*s))
        s++;
    if (*s)
        return MS_EINVAL;
    unsigned shift = 0;
    if (ulen) {
        size_t i = 0;
        for (; i < sizeof units / sizeof units[0]; i++)
            if (strlen(units[i].name) == ulen && !strncasecmp(u, units[i].name, ulen))
                break;
        if (i == sizeof units / sizeof units[0])
            return MS_EINVAL;
        shift = units[i].shift;
    }
    if (shift && whole >= (UINT64_C(1) << (63 - shift)))
        return MS_EINVAL;
    uint64_t v = whole << shift;
    uint64_t f = (uint64_t)(frac * (double)(UINT64_C(1) << shift));
    if (v + f >= (UINT64_C(1) << 63))
        return MS_EINVAL;
    *out = v + f;
    return 0;
}

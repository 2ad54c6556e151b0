/* suppress.c: LeakSanitizer's suppression files for `memscope run --suppressions=FILE`
 * (budget.h, docs/ci.md): the parser and the pattern match.
 *
 * Called once per run with budgets; the file is the user's (hostile input: lines and patterns
 * are capped). The match is LeakSanitizer's TemplateMatch: a substring, '*' for any run of
 * characters, '^' and '$' anchors; the wildcard match is the linear two-pointer one (no
 * recursion, no backtracking explosion on "*a*a*a*"). */
#include "budget.h"

#include "common/grow.h"
#include "common/ms_error.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LINE 4096

/* Wildcard match of the whole of s by p ('*' any run; no other special character). */
static int glob(const char *p, size_t pn, const char *s)
{
    size_t pi = 0, star = (size_t)-1, mark = 0;
    for (size_t si = 0; s[si];) {
        if (pi < pn && p[pi] == '*') {
            star = pi++;
            mark = si;
        } else if (pi < pn && p[pi] == s[si]) {
            pi++;
            si++;
        } else if (star != (size_t)-1) {
            pi = star + 1;
            si = ++mark;
        } else {
            return 0;
        }
    }
    while (pi < pn && p[pi] == '*')
        pi++;
    return pi == pn;
}

int ms_suppression_match(const char *pattern, const char *name)
{
    if (!name || !pattern)
        return 0;
    char buf[MAX_LINE + 4];
    size_t n = strlen(pattern), w = 0;
    int start = n && pattern[0] == '^';
    int end = n > (size_t)start && pattern[n - 1] == '$';
    if (n > MAX_LINE)
        return 0;
    if (!start)
        buf[w++] = '*';
    memcpy(buf + w, pattern + start, n - start - end);
    w += n - start - end;
    if (!end)
        buf[w++] = '*';
    return glob(buf, w, name);
}

static int fail(char *err, size_t errlen, int rc, const char *path, int line, const char *why)
{
    return ms_errf(err, errlen, rc, "%s:%d: %s", path, line, why);
}

int ms_suppressions_load(struct ms_suppressions *s, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        return ms_errf(err, errlen, MS_ENOTFOUND, "cannot read suppressions file '%s': %s", path,
                       strerror(errno));
    }
    char line[MAX_LINE + 2];
    int lineno = 0, rc = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n') {
            rc = fail(err, errlen, MS_ELIMIT, path, lineno, "line too long");
            break;
        }
        char *a = line, *e = line + len;
        while (*a == ' ' || *a == '\t')
            a++;
        while (e > a && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
            *--e = 0;
        if (!*a || *a == '#')
            continue;
        char *colon = strchr(a, ':');
        if (!colon) {
            char why[160];
            snprintf(why, sizeof why, "expected KIND:PATTERN (leak:PATTERN), not '%.100s'", a);
            rc = fail(err, errlen, MS_EINVAL, path, lineno, why);
            break;
        }
        *colon = 0;
        if (strcmp(a, "leak") != 0) {
            char why[200];
            snprintf(why, sizeof why,
                     "unknown suppression kind '%.60s' (memscope reads leak:PATTERN lines, "
                     "LeakSanitizer's)",
                     a);
            rc = fail(err, errlen, MS_EINVAL, path, lineno, why);
            break;
        }
        const char *pat = colon + 1;
        while (*pat == ' ' || *pat == '\t')
            pat++;
        if (!*pat) {
            rc = fail(err, errlen, MS_EINVAL, path, lineno, "empty pattern after leak:");
            break;
        }
        if (s->n >= MS_SUPP_MAX) {
            rc = fail(err, errlen, MS_ELIMIT, path, lineno, "too many suppressions");
            break;
        }
        if (ms_grow((void **)&s->v, &s->cap, s->n, sizeof *s->v, 16, MS_SUPP_MAX) < 0 ||
            !(s->v[s->n].pattern = strdup(pat))) {
            snprintf(err, errlen, "%s: out of memory", path);
            rc = MS_ENOMEM;
            break;
        }
        s->v[s->n].line = lineno;
        s->v[s->n].bytes = s->v[s->n].blocks = 0;
        s->n++;
    }
    if (!rc && ferror(f)) {
        snprintf(err, errlen, "cannot read suppressions file '%s': %s", path, strerror(errno));
        rc = MS_EIO;
    }
    fclose(f);
    return rc;
}

void ms_suppressions_release(struct ms_suppressions *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i].pattern);
    free(s->v);
    memset(s, 0, sizeof *s);
}

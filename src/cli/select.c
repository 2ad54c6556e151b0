/* select.c: the options that select what an analysis or an export reads (docs/cli.md,
 * "Selectors"): --layer, --step, --at, --process, --device, --from, --to. One parser, called
 * by `memscope analyze` and `memscope export` for each argument, so that both spell and check
 * them alike; the one reader of an option's value (cli_opt_value); and --site-skip's addition to
 * the call-site rule (cli_site_skip), for every command that names call sites. */
#include "cli.h"

#include "analyze/analyze.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

const char *cli_opt_value(int argc, char **argv, int *i, const char *name, int *missing)
{
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0)
        return NULL;
    if (a[n] == '=')
        return a + n + 1;
    if (a[n] != 0)
        return NULL;
    if (*i + 1 >= argc) {
        *missing = 1;
        return "";
    }
    return argv[++*i];
}

/* A positive decimal integer no larger than max; 0 or -1. */
static int positive(const char *s, int64_t max, int64_t *v)
{
    if (!s || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    char *end;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno || *end || x == 0 || x > (unsigned long long)max)
        return -1;
    *v = (int64_t)x;
    return 0;
}

int cli_select_option(const char *cmd, int argc, char **argv, int *i, struct ms_analyze_opts *o,
                      const char **layer)
{
    const char *v;
    int missing = 0;
    int64_t x;
    if ((v = cli_opt_value(argc, argv, i, "--layer", &missing))) {
        if (missing || !*v)
            return usage_error("%s: --layer needs a layer name", cmd);
        *layer = v;
    } else if ((v = cli_opt_value(argc, argv, i, "--step", &missing))) {
        if (missing || positive(v, INT_MAX, &x) < 0)
            return usage_error("%s: bad step number '%s' (a step >= 1)", cmd, v);
        o->at_step = (int)x;
    } else if ((v = cli_opt_value(argc, argv, i, "--at", &missing))) {
        if (missing || positive(v, INT64_MAX, &x) < 0)
            return usage_error("%s: --at needs a time in ns, not '%s'", cmd, v);
        o->at_ns = x;
    } else if ((v = cli_opt_value(argc, argv, i, "--process", &missing))) {
        if (missing || positive(v, INT_MAX, &x) < 0)
            return usage_error("%s: --process needs a process id (a pid > 0), not '%s'", cmd, v);
        o->pid = x;
    } else if ((v = cli_opt_value(argc, argv, i, "--device", &missing))) {
        if (missing ||
            (strcmp(v, "cpu") != 0 && positive(v[0] == '0' && !v[1] ? "1" : v, 63, &x) < 0))
            return usage_error("%s: --device needs cpu or a CUDA ordinal 0..63, not '%s'", cmd, v);
        o->device = v;
    } else if ((v = cli_opt_value(argc, argv, i, "--from", &missing))) {
        if (missing || positive(v, INT64_MAX, &x) < 0)
            return usage_error("%s: --from needs a time in ns, not '%s'", cmd, v);
        o->from_ns = x;
    } else if ((v = cli_opt_value(argc, argv, i, "--to", &missing))) {
        if (missing || positive(v, INT64_MAX, &x) < 0)
            return usage_error("%s: --to needs a time in ns, not '%s'", cmd, v);
        o->to_ns = x;
    } else {
        return -1;
    }
    return 0;
}

int cli_site_skip(const char *cmd, const char *what, const char *list)
{
    char err[256];
    if (ms_site_rule_add(&ms_site_rule, list, err, sizeof err) == 0)
        return 0;
    return usage_error("%s%s%s: %s", cmd ? cmd : "", cmd ? ": " : "", what, err);
}

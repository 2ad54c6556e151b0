/* run_budget.c: `memscope run`'s budgets (docs/ci.md): the options --fail-on-leak,
 * --fail-on-step-leak, --max-peak, --suppressions, --junit and --error-exitcode, the check after
 * the conversion (src/analyze/budget.c computes), the failure lines on stderr, the JUnit report
 * and the exit status.
 *
 * Called by run_options.c while parsing and by cmd_run.c once the database is written. The
 * failure output is short on purpose: one line per budget and at most MS_BUDGET_SITES call
 * sites, what a CI log can show. */
#include "cli.h"
#include "run.h"

#include "analyze/analyze.h"
#include "common/files.h"
#include "common/ms_error.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The --suppressions file's patterns: static, reachable until exit (and their counts). */
static struct ms_suppressions suppressions;

int run_budget_add(struct run_options *o, enum ms_budget_kind kind, const char *value)
{
    static const char *const names[] = {"--fail-on-leak", "--fail-on-step-leak", "--max-peak"};
    if (o->nbudgets >= RUN_MAX_BUDGETS)
        return usage_error("%s: at most %d budgets", names[kind], RUN_MAX_BUDGETS);
    struct ms_budget *b = &o->budgets[o->nbudgets];
    memset(b, 0, sizeof *b);
    b->kind = kind;
    if (value)
        snprintf(b->spec, sizeof b->spec, "%s=%s", names[kind], value);
    else
        snprintf(b->spec, sizeof b->spec, "%s", names[kind]);
    char err[400];
    if (value && ms_budget_parse(b, value, err, sizeof err) < 0)
        return usage_error("%s: %s", names[kind], err);
    if (kind == MS_BUDGET_PEAK && !value)
        return usage_error("--max-peak: needs BYTES[:LAYER]");
    o->nbudgets++;
    return 0;
}

int run_budgets_prepare(struct run_options *o)
{
    if (!o->nbudgets && (o->suppressions_path || o->junit || o->error_exitcode))
        return usage_error("%s: needs a budget (--fail-on-leak, --fail-on-step-leak or "
                           "--max-peak)",
                           o->suppressions_path ? "--suppressions"
                           : o->junit           ? "--junit"
                                                : "--error-exitcode");
    if (o->nbudgets && o->format == FMT_TRACE)
        return usage_error("budgets need a database: not with --format=trace");
    if (o->suppressions_path) {
        char err[600];
        if (ms_suppressions_load(&suppressions, o->suppressions_path, err, sizeof err) < 0)
            return usage_error("--suppressions: %s", err);
    }
    if (o->junit) { /* its directory must be writable now, not found out after the run */
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", o->junit);
        char *slash = strrchr(dir, '/');
        if (!slash)
            snprintf(dir, sizeof dir, ".");
        else if (slash == dir)
            dir[1] = 0;
        else
            *slash = 0;
        if (access(dir, W_OK) != 0)
            return usage_error("--junit: cannot write in '%s': %s", dir, strerror(errno));
    }
    if (!o->error_exitcode)
        o->error_exitcode = MS_BUDGET_EXIT;
    return 0;
}

/* " (12.3 KiB)" for sizes of 10 KiB and more, else "" (the byte count says it). */
static void human(char *out, size_t len, long long bytes)
{
    char h[32];
    ms_human_bytes(h, sizeof h, bytes);
    if (strstr(h, " B"))
        *out = 0;
    else
        snprintf(out, len, " (%s)", h);
}

/* The one line that says what a budget measured (without the "budget failed: " lead). */
static void budget_line(const struct ms_budget *b, const struct ms_budget_result *r, char *out,
                        size_t len)
{
    char lim[48], got[48];
    human(lim, sizeof lim, (long long)b->limit);
    human(got, sizeof got, r->measured);
    switch (b->kind) {
    case MS_BUDGET_LEAK:
        snprintf(out, len, "%s: %lld bytes%s live at exit%s%s, limit %llu%s", b->spec,
                 (long long)r->measured, got, b->layer[0] ? " in " : "",
                 b->layer[0] ? b->layer : "", (unsigned long long)b->limit, lim);
        break;
    case MS_BUDGET_STEP_LEAK:
        if (r->failed)
            snprintf(out, len, "%s: %zu call site%s keep%s growing, by %lld bytes per %s in all",
                     b->spec, r->nsites + r->more_sites, r->nsites + r->more_sites == 1 ? "" : "s",
                     r->nsites + r->more_sites == 1 ? "s" : "", (long long)r->measured,
                     r->on_steps ? "step" : "tenth of the allocations");
        else if (!r->judged)
            snprintf(out, len, "%s: no leak found: too few steps to judge", b->spec);
        else
            snprintf(out, len, "%s: no call site keeps growing", b->spec);
        break;
    case MS_BUDGET_PEAK:
        if (!r->where[0])
            snprintf(out, len, "%s: no memory in %s", b->spec,
                     b->layer[0] ? b->layer : "heap or mmap");
        else
            snprintf(out, len, "%s: peak %lld bytes%s in %s, limit %llu%s%s", b->spec,
                     (long long)r->measured, got, r->where, (unsigned long long)b->limit, lim,
                     r->exceeded > 1 ? " (and more over it)" : "");
        break;
    }
}

/* The call-site lines of r on f, each after prefix. */
static void site_lines(FILE *f, const char *prefix, const struct ms_budget *b,
                       const struct ms_budget_result *r)
{
    for (size_t i = 0; i < r->nsites; i++) {
        const struct ms_budget_site *s = &r->sites[i];
        if (b->kind == MS_BUDGET_STEP_LEAK)
            fprintf(f, "%s  %+.1f bytes/step, %lld bytes held: %s\n", prefix, s->per_step,
                    (long long)s->bytes, s->site);
        else
            fprintf(f, "%s  %lld bytes in %lld block%s: %s\n", prefix, (long long)s->bytes,
                    (long long)s->blocks, s->blocks == 1 ? "" : "s", s->site);
    }
    if (r->more_sites)
        fprintf(f, "%s  ... %zu more call site%s\n", prefix, r->more_sites,
                r->more_sites == 1 ? "" : "s");
    if (r->suppressed_blocks)
        fprintf(f, "%s  (%lld bytes in %lld block%s suppressed)\n", prefix,
                (long long)r->suppressed_bytes, (long long)r->suppressed_blocks,
                r->suppressed_blocks == 1 ? "" : "s");
}

/* XML text: &, <, >, " and ' escaped; control characters but tab and newline dropped. */
static void xml_put(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        switch (c) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        default:
            if (c >= 0x20 || c == '\n' || c == '\t')
                fputc(c, f);
        }
    }
}

/* Writes the JUnit report: one testsuite "memscope budgets", one testcase per budget, a
 * <failure> for each that failed (its line and its call sites), an <error> for one that could
 * not be checked. Returns 0 or -1 (said). */
static int write_junit(const struct run_options *o, const struct ms_budget_result *res,
                       const int *ok)
{
    int failures = 0, errors = 0;
    for (int i = 0; i < o->nbudgets; i++) {
        failures += ok[i] && res[i].failed;
        errors += !ok[i];
    }
    struct ms_output mo;
    int rc = ms_output_open(&mo, o->junit);
    FILE *f = rc == 0 ? fdopen(mo.fd, "w") : NULL;
    if (!f) {
        cli_error("--junit: cannot write '%s': %s", o->junit, strerror(rc < 0 ? -rc : errno));
        ms_output_abort(&mo);
        return -1;
    }
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(f,
            "<testsuites>\n<testsuite name=\"memscope budgets\" tests=\"%d\" "
            "failures=\"%d\" errors=\"%d\">\n",
            o->nbudgets, failures, errors);
    for (int i = 0; i < o->nbudgets; i++) {
        const struct ms_budget *b = &o->budgets[i];
        fputs("  <testcase classname=\"memscope.budget\" name=\"", f);
        xml_put(f, b->spec);
        fputs("\"", f);
        if (ok[i] && !res[i].failed) {
            fputs("/>\n", f);
            continue;
        }
        fputs(">\n", f);
        char line[1024];
        if (!ok[i]) {
            fputs("    <error message=\"the budget could not be checked\"/>\n", f);
        } else {
            budget_line(b, &res[i], line, sizeof line);
            fputs("    <failure type=\"memscope.budget\" message=\"", f);
            xml_put(f, line);
            fputs("\">", f);
            char *text = NULL;
            size_t tlen = 0;
            FILE *m = open_memstream(&text, &tlen);
            if (m) {
                fprintf(m, "%s\n", line);
                site_lines(m, "", b, &res[i]);
                if (fclose(m) == 0 && text)
                    xml_put(f, text);
            }
            free(text);
            fputs("</failure>\n", f);
        }
        fputs("  </testcase>\n", f);
    }
    fputs("</testsuite>\n</testsuites>\n", f);
    int bad = ferror(f);
    if (fclose(f) != 0)
        bad = 1;
    mo.fd = -1;
    if (bad || ms_output_commit(&mo) < 0) {
        ms_output_abort(&mo);
        cli_error("--junit: cannot write '%s': %s", o->junit, strerror(errno));
        return -1;
    }
    return 0;
}

int run_budgets_check(struct run_options *o, const char *db_path)
{
    if (!o->nbudgets)
        return 0;
    struct ms_budget_result *res = calloc((size_t)o->nbudgets, sizeof *res);
    int ok[RUN_MAX_BUDGETS] = {0};
    if (!res) {
        cli_error("budgets: out of memory");
        return -1;
    }
    int failed = 0, broken = 0;
    fflush(stderr);
    for (int i = 0; i < o->nbudgets; i++) {
        const struct ms_budget *b = &o->budgets[i];
        char err[600] = "", line[1024];
        struct ms_suppressions *sup = suppressions.n ? &suppressions : NULL;
        if (ms_budget_check(db_path, b, sup, &res[i], err, sizeof err) < 0) {
            cli_error("budget %s could not be checked: %s", b->spec, err);
            broken = 1;
            continue;
        }
        ok[i] = 1;
        budget_line(b, &res[i], line, sizeof line);
        if (res[i].failed) {
            failed = 1;
            fprintf(stderr, "memscope: budget failed: %s\n", line);
            site_lines(stderr, "memscope: ", b, &res[i]);
        } else if (cli_log_level <= 1) {
            fprintf(stderr, "memscope: budget held: %s\n", line);
            if (res[i].suppressed_blocks)
                site_lines(
                    stderr, "memscope: ", &(struct ms_budget){.kind = MS_BUDGET_LEAK},
                    &(struct ms_budget_result){.suppressed_bytes = res[i].suppressed_bytes,
                                               .suppressed_blocks = res[i].suppressed_blocks});
        }
    }
    for (size_t k = 0; cli_log_level <= 1 && k < suppressions.n; k++) {
        const struct ms_suppression *s = &suppressions.v[k];
        if (s->blocks)
            fprintf(stderr,
                    "memscope: suppression leak:%s (%s:%d) matched %lld bytes in %lld block%s\n",
                    s->pattern, o->suppressions_path, s->line, (long long)s->bytes,
                    (long long)s->blocks, s->blocks == 1 ? "" : "s");
    }
    if (o->junit && write_junit(o, res, ok) < 0)
        broken = 1;
    free(res);
    return broken ? -1 : failed;
}

int run_budgets_unchecked(const struct run_options *o)
{
    if (!o->nbudgets)
        return 0;
    cli_error("the budgets could not be checked: nothing was recorded");
    return -1;
}

int run_budgets_status(const struct run_options *o, int status, int budgets)
{
    if (status != 0 || budgets == 0)
        return status;
    return budgets > 0 ? o->error_exitcode : 1;
}

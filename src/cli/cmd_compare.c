/* cmd_compare.c: msMemScope's offline compare, `memscope --compare --input-path=A,B
 * [--output-path=DIR] [--level=op]`: no program is run; the two runs' databases are compared
 * as `memscope analyze compare A --with B` does (by call site, owner and op sequence), and with
 * an output directory msMemScope's op-sequence compare CSV is written there too. Called by
 * main() when the msMemScope form carries --compare. */
#include "cli.h"

#include "analyze/analyze.h"
#include "common/ms_error.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static const char compare_usage[] =
    "usage: memscope --compare --input-path=A.db,B.db [--output-path=DIR] [--level=op]\n"
    "  Compares two runs (msMemScope's offline compare): the report of\n"
    "  `memscope analyze compare A.db --with B.db`; with --output-path, msMemScope's op\n"
    "  compare CSV as DIR/memscope_compare_<stamp>.csv too. The inputs are memscope\n"
    "  databases (compact or full); -i is --input-path.\n";

/* Whether path ends in suffix. */
static int ends_with(const char *path, const char *suffix)
{
    size_t n = strlen(path), k = strlen(suffix);
    return n >= k && !strcmp(path + n - k, suffix);
}

int cmd_compare_ms(int argc, char **argv)
{
    const char *input = NULL, *outdir = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = NULL;
        if (!strcmp(a, "--compare")) {
            continue;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(compare_usage, stdout);
            return 0;
        } else if (!strncmp(a, "--input-path=", 13)) {
            input = a + 13;
        } else if (!strcmp(a, "--input-path") || !strcmp(a, "-i")) {
            if (++i >= argc)
                return usage_error("--compare: %s needs A,B", a);
            input = argv[i];
        } else if (!strncmp(a, "--output-path=", 14)) {
            outdir = a + 14;
        } else if (!strcmp(a, "--output-path") || !strcmp(a, "-o")) {
            if (++i >= argc)
                return usage_error("--compare: %s needs a directory", a);
            outdir = argv[i];
        } else if (!strncmp(a, "--level=", 8) || !strcmp(a, "--level")) {
            v = a[7] == '=' ? a + 8 : ++i < argc ? argv[i] : "";
            if (strcmp(v, "op"))
                return usage_error("--compare: --level=%s: memscope compares op sequences "
                                   "(--level=op)",
                                   v);
        } else {
            return usage_error("--compare: unexpected '%s' (no program runs with --compare)", a);
        }
    }
    if (!input)
        return usage_error("--compare needs --input-path=A,B (the two runs' databases)");
    const char *comma = strchr(input, ',');
    if (!comma || comma == input || !comma[1] || strchr(comma + 1, ','))
        return usage_error("--compare: --input-path takes two paths, A,B, not '%s'", input);
    char a[4096], b[4096];
    if ((size_t)(comma - input) >= sizeof a || strlen(comma + 1) >= sizeof b)
        return usage_error("--compare: input path too long");
    memcpy(a, input, (size_t)(comma - input));
    a[comma - input] = 0;
    snprintf(b, sizeof b, "%s", comma + 1);
    if (ends_with(a, ".csv") || ends_with(b, ".csv"))
        return usage_error("--compare: memscope compares its databases (.db), not CSV files: "
                           "give the runs' databases");
    char csv[4200], made[4096] = "", err[1024] = "";
    struct ms_analyze_opts ao;
    ms_analyze_opts_init(&ao);
    ao.other_db = b;
    if (outdir) {
        char stamp[32];
        time_t now = time(NULL);
        struct tm tm;
        strftime(stamp, sizeof stamp, "%Y%m%d%H%M%S", localtime_r(&now, &tm));
        if (snprintf(csv, sizeof csv, "%s/memscope_compare_%s.csv", outdir, stamp) >=
            (int)sizeof csv)
            return usage_error("--compare: output path too long");
        int rc = run_mkdir_p(outdir, made, sizeof made); /* msMemScope creates it too */
        if (rc < 0) {
            cli_error("--compare: cannot create output directory '%s': %s", outdir,
                      ms_strerror(rc));
            return 1;
        }
        ao.csv_path = csv;
        ao.csv_no_ops_ok = 1; /* the CSV of runs without ops: its header lines */
    }
    int rc = ms_analyze_run_list(a, "compare", &ao, stdout, err, sizeof err);
    if (rc < 0 && outdir)
        run_rmdirs(outdir, made); /* what this made, if still empty */
    if (rc == MS_EINVAL)
        return usage_error("--compare: %s", err[0] ? err : ms_strerror(rc));
    if (rc < 0) {
        cli_error("--compare: %s", err[0] ? err : ms_strerror(rc));
        return 1;
    }
    if (outdir && cli_log_level <= 1)
        fprintf(stderr, "memscope: op compare CSV written to %s\n", csv);
    return 0;
}

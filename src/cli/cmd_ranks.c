/* cmd_ranks.c: `memscope ranks JOB [--layer=NAME] [--json]`: every rank of a job's Parquet
 * tables with its peak, the job's total and imbalance, and the outlier ranks with the call
 * sites that differ (ms_ranks_compute, src/columnar/ranks.c; docs/columnar.md). Prints. */
#include "cli.h"

#include "columnar/columnar.h"
#include "common/ms_error.h"

#include <stdio.h>
#include <string.h>

static const char ranks_usage[] =
    "usage: memscope ranks JOB [--layer=NAME] [--json]\n"
    "\n"
    "Every rank of the job directory JOB (memscope export --format=parquet): its peak bytes,\n"
    "when (epoch ns) and in which step, its bytes still live at the end (leaked), the job's\n"
    "sum of peaks and imbalance (max / median peak), and the outlier ranks: a peak further\n"
    "from the median than max(3.5 x 1.4826 x MAD, 10% of the median), each with the call\n"
    "sites whose bytes at its peak differ most from the median rank's (docs/columnar.md).\n"
    "  --layer=NAME        the layer whose peaks are compared: host (default: the heap and\n"
    "                      the mmap layer together), heap, mmap, a pool or CUDA layer\n"
    "  --json              one object: the job's figures and an object per rank\n";

static void json_str(const char *s)
{
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            printf("\\%c", *p);
        else if (*p < 0x20)
            printf("\\u%04x", *p);
        else
            putchar(*p);
    }
    putchar('"');
}

static void print_json(const struct ms_ranks *r)
{
    printf("{\"layer\": ");
    json_str(r->layer);
    printf(", \"ranks_count\": %zu, \"total_peak_bytes\": %lld, \"median_peak_bytes\": %lld, "
           "\"mad_bytes\": %lld, \"threshold_bytes\": %lld, \"imbalance\": %.3f,\n \"ranks\": [",
           r->nranks, r->total_peak, r->median_peak, r->mad, r->threshold, r->imbalance);
    for (size_t i = 0; i < r->nranks; i++) {
        const struct ms_rank *k = &r->ranks[i];
        printf("%s\n  {\"rank\": %lld, \"host\": ", i ? "," : "", k->rank);
        json_str(k->host);
        printf(", \"peak_bytes\": %lld, \"peak_ns\": %lld, \"peak_step\": ", k->peak_bytes,
               k->peak_ns);
        if (k->peak_step < 0)
            printf("null");
        else
            printf("%lld", k->peak_step);
        printf(", \"leaked_bytes\": %lld, \"outlier\": %s", k->leaked_bytes,
               k->outlier ? "true" : "false");
        if (k->outlier) {
            printf(", \"differs_by\": [");
            for (size_t d = 0; d < k->ndiffers; d++) {
                printf("%s{\"site\": ", d ? ", " : "");
                json_str(k->differs[d].site);
                printf(", \"bytes\": %lld}", k->differs[d].bytes);
            }
            printf("]");
        }
        printf("}");
    }
    printf("\n]}\n");
}

static void print_text(const struct ms_ranks *r)
{
    printf("%zu ranks, layer %s: sum of peaks %lld bytes, median peak %lld, max %lld, "
           "imbalance (max / median) %.2f\n",
           r->nranks, r->layer, r->total_peak, r->median_peak, r->max_peak, r->imbalance);
    printf("outliers: a peak more than %lld bytes from the median (MAD %lld)\n\n", r->threshold,
           r->mad);
    printf("%-6s %-20s %14s %20s %6s %14s %s\n", "rank", "host", "peak_bytes", "peak_ns", "step",
           "leaked_bytes", "outlier");
    for (size_t i = 0; i < r->nranks; i++) {
        const struct ms_rank *k = &r->ranks[i];
        char step[24] = "-";
        if (k->peak_step >= 0)
            snprintf(step, sizeof step, "%lld", k->peak_step);
        printf("%-6lld %-20s %14lld %20lld %6s %14lld %s\n", k->rank, k->host, k->peak_bytes,
               k->peak_ns, step, k->leaked_bytes, k->outlier ? "OUTLIER" : "");
    }
    for (size_t i = 0; i < r->nranks; i++) {
        const struct ms_rank *k = &r->ranks[i];
        if (!k->outlier)
            continue;
        printf("\nrank %lld (%s): at its peak, against rank %lld (%s, the median):\n", k->rank,
               k->host, r->median_rank, r->median_host ? r->median_host : "?");
        for (size_t d = 0; d < k->ndiffers; d++)
            printf("  %+14lld bytes  %s\n", k->differs[d].bytes, k->differs[d].site);
        if (!k->ndiffers)
            printf("  (no call site differs)\n");
    }
}

int cmd_ranks(int argc, char **argv)
{
    const char *job = NULL, *layer = NULL;
    int json = 0, missing = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(ranks_usage, stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if ((v = cli_opt_value(argc, argv, &i, "--layer", &missing))) {
            if (missing || !*v)
                return usage_error("ranks: --layer needs a value");
            layer = v;
        } else if (a[0] == '-' && a[1]) {
            return usage_error("ranks: unknown option '%s'", a);
        } else if (!job) {
            job = a;
        } else {
            return usage_error("ranks: unexpected argument '%s'", a);
        }
    }
    if (!job)
        return usage_error("ranks: no job directory given");
    struct ms_ranks r;
    char err[2048] = "";
    int rc = ms_ranks_compute(job, layer, &r, err, sizeof err);
    if (rc < 0) {
        cli_error("ranks: %s", err[0] ? err : ms_strerror(rc));
        return 1;
    }
    if (json)
        print_json(&r);
    else
        print_text(&r);
    ms_ranks_release(&r);
    if (fflush(stdout) != 0) {
        cli_error("ranks: cannot write to stdout");
        return 1;
    }
    return 0;
}

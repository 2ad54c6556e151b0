/* cmd_plot.c: `memscope plot RUN.db [-o FILE.svg]`: a quick static picture of live bytes over
 * time, with the step ends and the maximum marked, for CI artifacts and for a look without the
 * viewer (the idea of Tiny-Torch's memory plots).
 *
 * The series is `analyze trend`'s (ms_analyze_live_series: the conversion's precomputed
 * samples, or a replay with --layer), so the picture and the trend report agree. The step ends
 * come from the steps table. Output: one SVG document (a standalone file any browser or SVG
 * reader opens), to stdout or -o FILE. Workload: one series of MS_TREND_POINTS + 1 samples and
 * at most MAX_MARKS step lines, whatever the run's size. */
#include "cli.h"

#include "analyze/analyze.h"
#include "common/ms_error.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define W 800
#define H 320
#define LEFT 80
#define RIGHT 24
#define TOP 36
#define BOTTOM 44
#define MAX_MARKS 200 /* step lines drawn at most (evenly thinned beyond) */
#define MAX_LABELS 12 /* step numbers written at most */

static const char plot_usage[] =
    "usage: memscope plot RUN.db [-o FILE.svg] [--layer=NAME] [--title=TEXT]\n"
    "  Draws live bytes over time (analyze trend's series) with the step ends and the\n"
    "  maximum, as an SVG image: to FILE, or to standard output.\n"
    "  -o, --output FILE   write the image there (.svg)\n"
    "  --layer=NAME        only this layer (heap, mmap, cuda:0, pool:NAME, ...)\n"
    "  --title=TEXT        the image's title (default: the database's file name)\n";

/* Writes s with the five XML special characters escaped. */
static void xml_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        default:
            if ((unsigned char)*s >= 0x20 || *s == '\t')
                fputc(*s, f); /* control characters have no place in XML 1.0 */
        }
    }
}

/* The y axis's top: the smallest 1, 2, 4, 5 or 8 times a power of ten (below 1024) times a
 * power of 1024 at or above v, so that its quarters read well in B, KiB, MiB or GiB. */
static double nice_max(double v)
{
    static const double mant[] = {1, 2, 4, 5, 8, 10, 20, 40, 50, 80, 100, 200, 400, 500, 800};
    if (v <= 0)
        return 1024;
    for (double unit = 1; unit < 1e19; unit *= 1024)
        for (size_t k = 0; k < sizeof mant / sizeof mant[0]; k++)
            if (mant[k] * unit >= v)
                return mant[k] * unit;
    return v;
}

/* The unit of the time axis for a span of span_s seconds: its name and its size in seconds, so
 * that the ticks differ in their first digits. */
static void time_unit(double span_s, const char **name, double *size)
{
    if (span_s >= 10) {
        *name = "s", *size = 1;
    } else if (span_s >= 0.01) {
        *name = "ms", *size = 1e-3;
    } else {
        *name = "us", *size = 1e-6;
    }
}

struct mark {
    int64_t step, ns;
};

/* The step ends (memscope_step() calls) of every process, in time order (at most MAX_MARKS, evenly thinned); *total
 * is how many there are. Returns the array (caller frees) or NULL with *n 0. */
static struct mark *step_marks(sqlite3 *db, size_t *n, size_t *total)
{
    *n = *total = 0;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db,
                           "SELECT step, end_ns FROM steps WHERE end_event_id IS NOT NULL "
                           "ORDER BY end_ns, process_id",
                           -1, &st, NULL) != SQLITE_OK)
        return NULL; /* a database without steps */
    struct mark *all = NULL;
    size_t cap = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        if (*total == cap) {
            size_t nc = cap ? cap * 2 : 64;
            struct mark *m = nc > ((size_t)1 << 24) ? NULL : realloc(all, nc * sizeof *m);
            if (!m)
                break;
            all = m;
            cap = nc;
        }
        all[*total].step = sqlite3_column_int64(st, 0);
        all[*total].ns = sqlite3_column_int64(st, 1);
        (*total)++;
    }
    sqlite3_finalize(st);
    if (*total <= MAX_MARKS) {
        *n = *total;
        return all;
    }
    for (size_t i = 0; i < MAX_MARKS; i++)
        all[i] = all[i * (*total - 1) / (MAX_MARKS - 1)];
    *n = MAX_MARKS;
    return all;
}

static void write_svg(FILE *f, const struct ms_live_series *s, const struct mark *marks,
                      size_t nmarks, size_t total_marks, const char *title)
{
    const double pw = W - LEFT - RIGHT, ph = H - TOP - BOTTOM;
    const double span = s->t1 > s->t0 ? (double)(s->t1 - s->t0) : 1;
    const double ymax = nice_max((double)s->max_live);
    const double off0 = (double)(s->t0 - s->start_ns) / 1e9; /* seconds from the start to t0 */
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"11\">\n",
            W, H, W, H);
    fputs("<title>", f);
    xml_text(f, title);
    fputs("</title>\n", f);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", W, H);
    fprintf(f, "<text x=\"%d\" y=\"20\" font-size=\"13\" font-weight=\"bold\">", LEFT);
    xml_text(f, title);
    fputs("</text>\n", f);

    /* axes and ticks: 4 divisions on y (bytes), 5 on x (seconds from the run's start) */
    fprintf(f, "<g class=\"axes\" stroke=\"#888888\" stroke-width=\"1\">\n");
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>\n", LEFT, TOP, LEFT, H - BOTTOM);
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>\n", LEFT, H - BOTTOM, W - RIGHT,
            H - BOTTOM);
    /* the y labels in the unit of the top (1 KiB = 1024 B) */
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    int u = 0;
    double usz = 1;
    while (u < 6 && ymax >= usz * 1024)
        usz *= 1024, u++;
    fputs("</g>\n<g class=\"yticks\" fill=\"#444444\" text-anchor=\"end\">\n", f);
    for (int k = 0; k <= 4; k++) {
        double y = TOP + ph - ph * k / 4;
        char hb[32];
        snprintf(hb, sizeof hb, "%g %s", ymax * k / 4 / usz, units[u]);
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#eeeeee\"/>", LEFT,
                y, W - RIGHT, y);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\">%s</text>\n", LEFT - 6, y + 4, hb);
    }
    const char *unit;
    double usize;
    time_unit(span / 1e9, &unit, &usize);
    fputs("</g>\n<g class=\"xticks\" fill=\"#444444\" text-anchor=\"middle\">\n", f);
    for (int k = 0; k <= 5; k++) {
        double x = LEFT + pw * k / 5;
        fprintf(f, "<text x=\"%.1f\" y=\"%d\">%.1f</text>\n", x, H - BOTTOM + 16,
                (off0 + span / 1e9 * k / 5) / usize);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%d\">time since the run started (%s)</text>\n", LEFT + pw / 2,
            H - 8, unit);
    fputs("</g>\n", f);

    /* the step ends */
    fprintf(f,
            "<g class=\"steps\" stroke=\"#999999\" stroke-dasharray=\"3,3\" "
            "data-steps=\"%zu\">\n",
            total_marks);
    size_t every = nmarks > MAX_LABELS ? (nmarks + MAX_LABELS - 1) / MAX_LABELS : 1;
    for (size_t i = 0; i < nmarks; i++) {
        double x = LEFT + pw * (double)(marks[i].ns - s->t0) / span;
        if (x < LEFT || x > W - RIGHT)
            continue;
        fprintf(f, "<line class=\"step\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"/>", x, TOP, x,
                H - BOTTOM);
        if (i % every == 0)
            fprintf(f,
                    "<text x=\"%.1f\" y=\"%d\" stroke=\"none\" fill=\"#777777\" "
                    "font-size=\"9\" text-anchor=\"middle\">%lld</text>",
                    x, TOP - 3, (long long)marks[i].step);
        fputc('\n', f);
    }
    fputs("</g>\n", f);

    /* the series: an area under a polyline */
    fputs("<g class=\"series\">\n<polygon fill=\"#cfe3f7\" stroke=\"none\" points=\"", f);
    fprintf(f, "%d,%d ", LEFT, H - BOTTOM);
    for (int k = 0; k <= MS_TREND_POINTS; k++)
        fprintf(f, "%.1f,%.1f ", LEFT + pw * k / MS_TREND_POINTS,
                TOP + ph - ph * (double)s->samples[k] / ymax);
    fprintf(f,
            "%d,%d\"/>\n<polyline class=\"live\" fill=\"none\" stroke=\"#1f6fbf\" "
            "stroke-width=\"1.5\" points=\"",
            W - RIGHT, H - BOTTOM);
    for (int k = 0; k <= MS_TREND_POINTS; k++)
        fprintf(f, "%s%.1f,%.1f", k ? " " : "", LEFT + pw * k / MS_TREND_POINTS,
                TOP + ph - ph * (double)s->samples[k] / ymax);
    fputs("\"/>\n</g>\n", f);

    /* the maximum and the end */
    char hb[32], hf[32];
    ms_human_bytes(hb, sizeof hb, s->max_live);
    ms_human_bytes(hf, sizeof hf, s->final_live);
    double ym = TOP + ph - ph * (double)s->max_live / ymax;
    fprintf(f,
            "<g class=\"max\" data-bytes=\"%lld\"><line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" "
            "y2=\"%.1f\" stroke=\"#c0392b\" stroke-dasharray=\"6,3\"/>"
            "<text x=\"%d\" y=\"%.1f\" fill=\"#c0392b\" text-anchor=\"end\">maximum %s "
            "(%lld bytes), at exit %s</text></g>\n",
            (long long)s->max_live, LEFT, ym, W - RIGHT, ym, W - RIGHT - 4, ym - 4, hb,
            (long long)s->max_live, hf);
    fputs("</svg>\n", f);
}

int cmd_plot(int argc, char **argv)
{
    const char *db_path = NULL, *out_path = NULL, *layer = NULL, *title = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(plot_usage, stdout);
            return 0;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (++i >= argc)
                return usage_error("plot: %s needs a file name", a);
            out_path = argv[i];
        } else if (!strncmp(a, "--output=", 9)) {
            out_path = a + 9;
        } else if (!strncmp(a, "--layer=", 8) || !strcmp(a, "--layer")) {
            if (a[7] == '=')
                layer = a + 8;
            else if (++i < argc)
                layer = argv[i];
            if (!layer || !*layer)
                return usage_error("plot: --layer needs a layer name");
        } else if (!strncmp(a, "--title=", 8)) {
            title = a + 8;
        } else if (!strcmp(a, "--title")) {
            if (++i >= argc)
                return usage_error("plot: --title needs a text");
            title = argv[i];
        } else if (a[0] == '-' && a[1]) {
            return usage_error("plot: unknown option '%s'", a);
        } else if (db_path) {
            return usage_error("plot: one database at a time ('%s' and '%s')", db_path, a);
        } else {
            db_path = a;
        }
    }
    if (!db_path)
        return usage_error("plot: no database given");
    if (out_path) {
        const char *dot = strrchr(out_path, '.');
        if (!dot || strcmp(dot, ".svg"))
            return usage_error("plot: %s: the image is SVG; name the output FILE.svg", out_path);
    }
    struct ms_analyze_opts o;
    ms_analyze_opts_init(&o);
    if (layer) {
        int rc = cli_resolve_layer("plot", db_path, layer, &o.layer);
        if (rc)
            return rc;
    }
    char err[512] = "";
    sqlite3 *db;
    int rc = ms_analyze_open(db_path, 0, &db, err, sizeof err);
    if (rc < 0)
        return cli_error("plot: %s", err), 1;
    struct ms_live_series s;
    memset(&s, 0, sizeof s);
    if ((rc = ms_analyze_live_series(db, &o, &s, err, sizeof err)) < 0) {
        sqlite3_close(db);
        return cli_error("plot: %s", err[0] ? err : ms_strerror(rc)), 1;
    }
    size_t nmarks, total_marks;
    struct mark *marks = step_marks(db, &nmarks, &total_marks);
    sqlite3_close(db);
    char deftitle[600];
    if (!title) {
        const char *base = strrchr(db_path, '/');
        snprintf(deftitle, sizeof deftitle, "live bytes over time: %s%s%s",
                 base ? base + 1 : db_path, layer ? ", layer " : "", layer ? layer : "");
        title = deftitle;
    }
    /* a temporary file renamed over the output: a failed write leaves no half image */
    FILE *f = stdout;
    char tmp[4200];
    if (out_path) {
        if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", out_path, (long)getpid()) >= (int)sizeof tmp)
            return free(marks), usage_error("plot: output path too long");
        if (!(f = fopen(tmp, "w"))) {
            free(marks);
            return cli_error("plot: cannot write %s: %s", out_path, strerror(errno)), 1;
        }
    }
    write_svg(f, &s, marks, nmarks, total_marks, title);
    free(marks);
    if (out_path) {
        int bad = ferror(f);
        bad |= fclose(f) != 0;
        if (bad || rename(tmp, out_path) != 0) {
            int e = errno;
            unlink(tmp);
            return cli_error("plot: cannot write %s: %s", out_path, strerror(e)), 1;
        }
        cli_log(1, "plot: wrote %s", out_path);
    } else if (fflush(stdout) != 0 || ferror(stdout)) {
        return cli_error("plot: cannot write the image: %s", strerror(errno)), 1;
    }
    return 0;
}

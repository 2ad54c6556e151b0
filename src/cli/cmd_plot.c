/* cmd_plot.c: `memscope plot RUN.db [-o FILE.svg|FILE.png]`: a quick static picture of live bytes over
 * time, with the step ends and the maximum marked, for CI artifacts and for a look without the
 * viewer (the idea of Tiny-Torch's memory plots).
 *
 * The series is `analyze trend`'s (ms_analyze_live_series: the conversion's precomputed
 * samples, or a replay with --layer), so the picture and the trend report agree. The step ends
 * come from the steps table. The picture is drawn once through a pen (plot_pen.h) inside the
 * axes of plot_axes.h: the SVG pen (plot_svg.c) writes one standalone SVG document, the raster
 * pen paints a PNG image at twice the size (plot_raster.c), to stdout or -o FILE. Workload: one series of MS_TREND_POINTS + 1 samples and
 * at most MAX_MARKS step lines, whatever the run's size. */
#include "cli.h"

#include "analyze/analyze.h"
#include "common/files.h"
#include "common/ms_error.h"
#include "plot_axes.h"
#include "plot_raster.h"
#include "plot_svg.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PNG_SCALE 2 /* PNG pixels per SVG unit */
#define W 800
#define H 320
#define LEFT 80
#define RIGHT 24
#define TOP 36
#define BOTTOM 44
#define MAX_MARKS 200 /* step lines drawn at most (evenly thinned beyond) */
#define MAX_LABELS 12 /* step numbers written at most */

static const char plot_usage[] =
    "usage: memscope plot RUN.db [-o FILE.svg|FILE.png] [--png] [--layer=NAME] [--title=TEXT]\n"
    "  Draws live bytes over time (analyze trend's series) with the step ends and the\n"
    "  maximum, as an SVG or PNG image: to FILE, or to standard output.\n"
    "  -o, --output FILE   write the image there (.svg or .png, 1600x640 pixels)\n"
    "  --png               a PNG image to standard output (SVG by default)\n"
    "  --layer=NAME        only this layer (heap, mmap, cuda:0, pool:NAME, ...)\n"
    "  --title=TEXT        the image's title (default: the database's file name)\n";

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

/* ---- the picture ----------------------------------------------------------------------- */

#define STEP 0x999999u
#define STEP_LABEL 0x777777u
#define AREA 0xcfe3f7u
#define LIVE 0x1f6fbfu
#define MAXC 0xc0392bu

/* Draws the series, the step ends and the maximum with pen. xy: room for MS_TREND_POINTS + 1
 * points. */
static void draw_plot(const struct plot_pen *p, const struct ms_live_series *s,
                      const struct mark *marks, size_t nmarks, size_t total_marks,
                      const char *title, double *xy)
{
    const double pw = W - LEFT - RIGHT, ph = H - TOP - BOTTOM;
    const double span = s->t1 > s->t0 ? (double)(s->t1 - s->t0) : 1;
    const double ymax = plot_nice_max((double)s->max_live);
    const double off0 = (double)(s->t0 - s->start_ns) / 1e9; /* seconds from the start to t0 */
    char buf[160];
    p->text(p->ctx, LEFT, 20, title, 0x000000u, 13, 1, PLOT_LEFT);

    /* axes and ticks: 4 divisions on y (bytes), 5 on x (seconds from the run's start) */
    const struct plot_frame fr = {LEFT, TOP, pw, ph};
    plot_axes_draw(p, &fr, ymax, off0, span / 1e9, "time since the run started");

    /* the series: an area under a polyline */
    for (int k = 0; k <= MS_TREND_POINTS; k++) {
        xy[2 * k] = LEFT + pw * k / MS_TREND_POINTS;
        xy[2 * k + 1] = TOP + ph - ph * (double)s->samples[k] / ymax;
    }
    p->group(p->ctx, "class=\"series\"");
    p->area(p->ctx, xy, MS_TREND_POINTS + 1, H - BOTTOM, AREA);
    p->polyline(p->ctx, xy, MS_TREND_POINTS + 1, LIVE, 1.5, 0, 0, "live");
    p->group(p->ctx, NULL);

    /* the step ends, over the series */
    snprintf(buf, sizeof buf, "class=\"steps\" data-steps=\"%zu\"", total_marks);
    p->group(p->ctx, buf);
    size_t every = nmarks > MAX_LABELS ? (nmarks + MAX_LABELS - 1) / MAX_LABELS : 1;
    for (size_t i = 0; i < nmarks; i++) {
        double x = LEFT + pw * (double)(marks[i].ns - s->t0) / span;
        if (x < LEFT || x > W - RIGHT)
            continue;
        p->line(p->ctx, x, TOP, x, H - BOTTOM, STEP, 1, 3, 3, "step");
        if (i % every == 0) {
            snprintf(buf, sizeof buf, "%lld", (long long)marks[i].step);
            p->text(p->ctx, x, TOP - 3, buf, STEP_LABEL, 9, 0, PLOT_MIDDLE);
        }
    }
    p->group(p->ctx, NULL);

    /* the maximum and the end */
    char hb[32], hf[32];
    ms_human_bytes(hb, sizeof hb, s->max_live);
    ms_human_bytes(hf, sizeof hf, s->final_live);
    double ym = TOP + ph - ph * (double)s->max_live / ymax;
    snprintf(buf, sizeof buf, "class=\"max\" data-bytes=\"%lld\"", (long long)s->max_live);
    p->group(p->ctx, buf);
    p->line(p->ctx, LEFT, ym, W - RIGHT, ym, MAXC, 1, 6, 3, NULL);
    snprintf(buf, sizeof buf, "maximum %s (%lld bytes), at exit %s", hb, (long long)s->max_live,
             hf);
    p->text(p->ctx, W - RIGHT - 4, ym - 4, buf, MAXC, 11, 0, PLOT_RIGHT);
    p->group(p->ctx, NULL);
}

/* Writes the picture to f as SVG, or as PNG when png; -1 on an error (errno set). */
static int write_plot(FILE *f, int png, const struct ms_live_series *s, const struct mark *marks,
                      size_t nmarks, size_t total_marks, const char *title)
{
    double *xy = malloc(sizeof(double) * 2 * (MS_TREND_POINTS + 1));
    if (!xy)
        return errno = ENOMEM, -1;
    int rc = 0;
    if (png) {
        struct plot_raster r;
        if (plot_raster_init(&r, W, H, PNG_SCALE, 0xffffffu) < 0) {
            free(xy);
            return errno = ENOMEM, -1;
        }
        struct plot_pen p = plot_raster_pen(&r);
        draw_plot(&p, s, marks, nmarks, total_marks, title, xy);
        rc = plot_raster_write_png(&r, f);
        plot_raster_release(&r);
    } else {
        plot_svg_begin(f, W, H, title);
        struct plot_pen p = plot_svg_pen(f);
        draw_plot(&p, s, marks, nmarks, total_marks, title, xy);
        plot_svg_end(f);
    }
    free(xy);
    return rc;
}

int cmd_plot(int argc, char **argv)
{
    const char *db_path = NULL, *out_path = NULL, *layer = NULL, *title = NULL;
    int png_out = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(plot_usage, stdout);
            return 0;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (++i >= argc)
                return usage_error("plot: %s needs a file name", a);
            out_path = argv[i];
        } else if (!strcmp(a, "--png")) {
            png_out = 1;
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
    int png = 0;
    if (out_path) {
        const char *dot = strrchr(out_path, '.');
        png = dot && !strcmp(dot, ".png");
        if (!dot || (strcmp(dot, ".svg") && !png))
            return usage_error("plot: %s: name the output FILE.svg or FILE.png", out_path);
        if (png_out && !png)
            return usage_error("plot: --png with %s: name the output FILE.png", out_path);
    } else if (png_out) {
        png = 1;
        if (isatty(STDOUT_FILENO))
            return usage_error("plot: --png writes binary data: redirect it or use -o FILE.png");
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
    /* a new file renamed over the output (files.h): a failed write leaves no half image */
    FILE *f = stdout;
    struct ms_output mo = {.fd = -1};
    if (out_path) {
        int orc = ms_output_open(&mo, out_path);
        if (orc < 0 || !(f = fdopen(mo.fd, "w"))) {
            int e = orc < 0 ? -orc : errno;
            ms_output_abort(&mo);
            free(marks);
            return cli_error("plot: cannot write %s: %s", out_path, strerror(e)), 1;
        }
    }
    errno = 0;
    int bad = write_plot(f, png, &s, marks, nmarks, total_marks, title) < 0;
    int werr = errno;
    free(marks);
    if (out_path) {
        bad |= ferror(f);
        if (fclose(f) != 0 && !bad)
            bad = 1, werr = errno;
        mo.fd = -1; /* fclose closed it */
        int crc = bad ? 0 : ms_output_commit(&mo);
        if (bad || crc < 0) {
            ms_output_abort(&mo);
            return cli_error("plot: cannot write %s: %s", out_path,
                             bad ? strerror(werr ? werr : EIO) : ms_strerror(crc)),
                   1;
        }
        cli_log(1, "plot: wrote %s", out_path);
    } else if (bad || fflush(stdout) != 0 || ferror(stdout)) {
        return cli_error("plot: cannot write the image: %s", strerror(errno)), 1;
    }
    return 0;
}

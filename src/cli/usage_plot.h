/* usage_plot.h: `memscope usage --plot FILE.svg` (usage_plot.c, docs/usage.md): the series kept
 * while sampling (RSS, PSS and USS of each process; the memory NVML says is used on each CUDA
 * device) and their picture, one SVG document with every series over time inside axes of bytes
 * and seconds (plot_axes.h, through the SVG pen of plot_svg.h) and a legend with each peak.
 * cmd_usage.c adds the samples and writes the picture after the report. */
#ifndef MS_CLI_USAGE_PLOT_H
#define MS_CLI_USAGE_PLOT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum usage_plot_kind { USAGE_PLOT_RSS, USAGE_PLOT_PSS, USAGE_PLOT_USS, USAGE_PLOT_DEVICE };

/* Points kept per series: a picture 640 units wide needs no more. Past it, each two neighbours
 * merge into one (the earlier time, the larger value), and later points each stand for twice as
 * many samples: memory stays bounded however long the sampling, and no peak is lost. */
#define USAGE_PLOT_MAX_POINTS 1000

/* One series: the caller's struct (usage_plot_series_init, _release). */
struct usage_plot_series {
    char name[48];             /* "pid 123 RSS", "device 0 used" */
    enum usage_plot_kind kind; /* its dash */
    unsigned colour;           /* its process's or device's index: one colour each */
    unsigned id;               /* its pid or device index, for the picture's data-id */
    double *t;                 /* seconds since the sampling began, n of them */
    uint64_t *v;               /* bytes */
    size_t n;
    unsigned stride, fill; /* samples a point stands for now; those in the last point */
    uint64_t max, samples; /* the largest value added; how many were */
    int failed;            /* out of memory: no more points (max and samples still count) */
};

void usage_plot_series_init(struct usage_plot_series *s, enum usage_plot_kind kind, unsigned id,
                            unsigned colour);
void usage_plot_series_release(struct usage_plot_series *s);
/* Adds the value v (bytes) sampled t seconds after the sampling began (never earlier than the
 * last one added). Allocates at the first; out of memory it keeps what it has. */
void usage_plot_add(struct usage_plot_series *s, double t, uint64_t v);

/* Writes the picture of the n series (those without a point are left out) to f as one SVG
 * document: span_s the length of the sampling (the x axis), title the picture's title. Each
 * series is a group <g class="series" data-name data-kind data-id data-max-bytes data-samples
 * data-points> around its polyline, for tests and scripts. Returns 0, or -1 with errno set
 * when f could not be written. */
int usage_plot_write(FILE *f, const struct usage_plot_series *s, size_t n, double span_s,
                     const char *title);

#endif

/* plot_svg.c: the SVG pen (plot_svg.h): each primitive one SVG element, coordinates with one
 * decimal, colours as #rrggbb, text escaped. Called by cmd_plot.c and usage_plot.c to write a
 * picture of a few thousand elements at most. */
#include "plot_svg.h"

void plot_svg_text(FILE *f, const char *s)
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

static void svg_colour(FILE *f, const char *attr, uint32_t rgb)
{
    fprintf(f, " %s=\"#%06x\"", attr, (unsigned)rgb & 0xffffffu);
}

static void svg_group(void *ctx, const char *attrs)
{
    FILE *f = ctx;
    if (attrs)
        fprintf(f, "<g %s>\n", attrs);
    else
        fputs("</g>\n", f);
}

static void svg_stroke(FILE *f, uint32_t rgb, double width, int dash_on, int dash_off)
{
    svg_colour(f, "stroke", rgb);
    if (width != 1)
        fprintf(f, " stroke-width=\"%g\"", width);
    if (dash_on)
        fprintf(f, " stroke-dasharray=\"%d,%d\"", dash_on, dash_off);
}

static void svg_line(void *ctx, double x0, double y0, double x1, double y1, uint32_t rgb,
                     double width, int dash_on, int dash_off, const char *cls)
{
    FILE *f = ctx;
    fputs("<line", f);
    if (cls)
        fprintf(f, " class=\"%s\"", cls);
    fprintf(f, " x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"", x0, y0, x1, y1);
    svg_stroke(f, rgb, width, dash_on, dash_off);
    fputs("/>\n", f);
}

static void svg_points(FILE *f, const double *xy, int n)
{
    for (int i = 0; i < n; i++)
        fprintf(f, "%s%.1f,%.1f", i ? " " : "", xy[2 * i], xy[2 * i + 1]);
}

static void svg_polyline(void *ctx, const double *xy, int n, uint32_t rgb, double width,
                         int dash_on, int dash_off, const char *cls)
{
    FILE *f = ctx;
    fputs("<polyline", f);
    if (cls)
        fprintf(f, " class=\"%s\"", cls);
    fputs(" fill=\"none\"", f);
    svg_stroke(f, rgb, width, dash_on, dash_off);
    fputs(" points=\"", f);
    svg_points(f, xy, n);
    fputs("\"/>\n", f);
}

static void svg_area(void *ctx, const double *xy, int n, double base, uint32_t rgb)
{
    FILE *f = ctx;
    if (n < 1)
        return;
    fputs("<polygon stroke=\"none\"", f);
    svg_colour(f, "fill", rgb);
    fprintf(f, " points=\"%.1f,%.1f ", xy[0], base);
    svg_points(f, xy, n);
    fprintf(f, " %.1f,%.1f\"/>\n", xy[2 * (n - 1)], base);
}

static void svg_text(void *ctx, double x, double y, const char *s, uint32_t rgb, int size, int bold,
                     int anchor)
{
    FILE *f = ctx;
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\"", x, y);
    svg_colour(f, "fill", rgb);
    if (size != 11)
        fprintf(f, " font-size=\"%d\"", size);
    if (bold)
        fputs(" font-weight=\"bold\"", f);
    if (anchor != PLOT_LEFT)
        fprintf(f, " text-anchor=\"%s\"", anchor == PLOT_MIDDLE ? "middle" : "end");
    fputc('>', f);
    plot_svg_text(f, s);
    fputs("</text>\n", f);
}

void plot_svg_begin(FILE *f, int w, int h, const char *title)
{
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"11\">\n",
            w, h, w, h);
    fputs("<title>", f);
    plot_svg_text(f, title);
    fputs("</title>\n", f);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", w, h);
}

struct plot_pen plot_svg_pen(FILE *f)
{
    return (struct plot_pen){f, svg_group, svg_line, svg_polyline, svg_area, svg_text};
}

void plot_svg_end(FILE *f)
{
    fputs("</svg>\n", f);
}

/* plot_raster.c: the raster pen of `memscope plot` and the PNG encoder behind `-o FILE.png`.
 *
 * The pen paints lines (a square brush stepped along the segment), areas under a polyline (one
 * column of pixels per x) and text (a 5x7 bitmap font of printable ASCII, drawn at the image's
 * scale; other bytes as '?') without anti-aliasing: a chart of a few thousand primitives.
 *
 * The PNG is 8-bit RGB, every row with filter 0, compressed by a small deflate of our own:
 * one block of fixed Huffman codes whose matches only copy the previous pixel (distance 3) or
 * the pixel above (distance = row length). A chart is mostly runs of one colour and rows like
 * the row above, so this comes within a small factor of zlib's size (800x320 at scale 2: about
 * 30 KB) with no library to link. */
#include "plot_raster.h"

#include "common/buf.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- the font ---------------------------------------------------------------------------- */

/* Glyphs of ' ' to '~': 7 rows each, the 5 low bits a row's columns (bit 4 the leftmost). */
static const uint8_t font5x7[95][7] = {
    {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}, /* space */
    {0x04, 0x04, 0x04, 0x04, 0x04, 0x00, 0x04}, /* ! */
    {0x0A, 0x0A, 0x00, 0x00, 0x00, 0x00, 0x00}, /* " */
    {0x0A, 0x0A, 0x1F, 0x0A, 0x1F, 0x0A, 0x0A}, /* # */
    {0x04, 0x0F, 0x14, 0x0E, 0x05, 0x1E, 0x04}, /* $ */
    {0x18, 0x19, 0x02, 0x04, 0x08, 0x13, 0x03}, /* % */
    {0x0C, 0x12, 0x14, 0x08, 0x15, 0x12, 0x0D}, /* & */
    {0x04, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00}, /* ' */
    {0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02}, /* ( */
    {0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08}, /* ) */
    {0x00, 0x04, 0x15, 0x0E, 0x15, 0x04, 0x00}, /* * */
    {0x00, 0x04, 0x04, 0x1F, 0x04, 0x04, 0x00}, /* + */
    {0x00, 0x00, 0x00, 0x00, 0x0C, 0x04, 0x08}, /* , */
    {0x00, 0x00, 0x00, 0x1F, 0x00, 0x00, 0x00}, /* - */
    {0x00, 0x00, 0x00, 0x00, 0x00, 0x0C, 0x0C}, /* . */
    {0x00, 0x01, 0x02, 0x04, 0x08, 0x10, 0x00}, /* / */
    {0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E}, /* 0 */
    {0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E}, /* 1 */
    {0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F}, /* 2 */
    {0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E}, /* 3 */
    {0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02}, /* 4 */
    {0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E}, /* 5 */
    {0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E}, /* 6 */
    {0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08}, /* 7 */
    {0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E}, /* 8 */
    {0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C}, /* 9 */
    {0x00, 0x0C, 0x0C, 0x00, 0x0C, 0x0C, 0x00}, /* : */
    {0x00, 0x0C, 0x0C, 0x00, 0x0C, 0x04, 0x08}, /* ; */
    {0x02, 0x04, 0x08, 0x10, 0x08, 0x04, 0x02}, /* < */
    {0x00, 0x00, 0x1F, 0x00, 0x1F, 0x00, 0x00}, /* = */
    {0x08, 0x04, 0x02, 0x01, 0x02, 0x04, 0x08}, /* > */
    {0x0E, 0x11, 0x01, 0x02, 0x04, 0x00, 0x04}, /* ? */
    {0x0E, 0x11, 0x01, 0x0D, 0x15, 0x15, 0x0E}, /* @ */
    {0x0E, 0x11, 0x11, 0x11, 0x1F, 0x11, 0x11}, /* A */
    {0x1E, 0x11, 0x11, 0x1E, 0x11, 0x11, 0x1E}, /* B */
    {0x0E, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0E}, /* C */
    {0x1C, 0x12, 0x11, 0x11, 0x11, 0x12, 0x1C}, /* D */
    {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x1F}, /* E */
    {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x10}, /* F */
    {0x0E, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0F}, /* G */
    {0x11, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11}, /* H */
    {0x0E, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E}, /* I */
    {0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0C}, /* J */
    {0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11}, /* K */
    {0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1F}, /* L */
    {0x11, 0x1B, 0x15, 0x15, 0x11, 0x11, 0x11}, /* M */
    {0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11}, /* N */
    {0x0E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E}, /* O */
    {0x1E, 0x11, 0x11, 0x1E, 0x10, 0x10, 0x10}, /* P */
    {0x0E, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0D}, /* Q */
    {0x1E, 0x11, 0x11, 0x1E, 0x14, 0x12, 0x11}, /* R */
    {0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E}, /* S */
    {0x1F, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04}, /* T */
    {0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E}, /* U */
    {0x11, 0x11, 0x11, 0x11, 0x11, 0x0A, 0x04}, /* V */
    {0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0A}, /* W */
    {0x11, 0x11, 0x0A, 0x04, 0x0A, 0x11, 0x11}, /* X */
    {0x11, 0x11, 0x11, 0x0A, 0x04, 0x04, 0x04}, /* Y */
    {0x1F, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1F}, /* Z */
    {0x0E, 0x08, 0x08, 0x08, 0x08, 0x08, 0x0E}, /* [ */
    {0x00, 0x10, 0x08, 0x04, 0x02, 0x01, 0x00}, /* backslash */
    {0x0E, 0x02, 0x02, 0x02, 0x02, 0x02, 0x0E}, /* ] */
    {0x04, 0x0A, 0x11, 0x00, 0x00, 0x00, 0x00}, /* ^ */
    {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1F}, /* _ */
    {0x08, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00}, /* ` */
    {0x00, 0x00, 0x0E, 0x01, 0x0F, 0x11, 0x0F}, /* a */
    {0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x1E}, /* b */
    {0x00, 0x00, 0x0E, 0x10, 0x10, 0x11, 0x0E}, /* c */
    {0x01, 0x01, 0x0D, 0x13, 0x11, 0x11, 0x0F}, /* d */
    {0x00, 0x00, 0x0E, 0x11, 0x1F, 0x10, 0x0E}, /* e */
    {0x06, 0x09, 0x08, 0x1C, 0x08, 0x08, 0x08}, /* f */
    {0x00, 0x0F, 0x11, 0x11, 0x0F, 0x01, 0x0E}, /* g */
    {0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x11}, /* h */
    {0x04, 0x00, 0x0C, 0x04, 0x04, 0x04, 0x0E}, /* i */
    {0x02, 0x00, 0x06, 0x02, 0x02, 0x12, 0x0C}, /* j */
    {0x10, 0x10, 0x12, 0x14, 0x18, 0x14, 0x12}, /* k */
    {0x0C, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E}, /* l */
    {0x00, 0x00, 0x1A, 0x15, 0x15, 0x11, 0x11}, /* m */
    {0x00, 0x00, 0x16, 0x19, 0x11, 0x11, 0x11}, /* n */
    {0x00, 0x00, 0x0E, 0x11, 0x11, 0x11, 0x0E}, /* o */
    {0x00, 0x00, 0x1E, 0x11, 0x1E, 0x10, 0x10}, /* p */
    {0x00, 0x00, 0x0D, 0x13, 0x0F, 0x01, 0x01}, /* q */
    {0x00, 0x00, 0x16, 0x19, 0x10, 0x10, 0x10}, /* r */
    {0x00, 0x00, 0x0E, 0x10, 0x0E, 0x01, 0x1E}, /* s */
    {0x08, 0x08, 0x1C, 0x08, 0x08, 0x09, 0x06}, /* t */
    {0x00, 0x00, 0x11, 0x11, 0x11, 0x13, 0x0D}, /* u */
    {0x00, 0x00, 0x11, 0x11, 0x11, 0x0A, 0x04}, /* v */
    {0x00, 0x00, 0x11, 0x11, 0x15, 0x15, 0x0A}, /* w */
    {0x00, 0x00, 0x11, 0x0A, 0x04, 0x0A, 0x11}, /* x */
    {0x00, 0x00, 0x11, 0x11, 0x0F, 0x01, 0x0E}, /* y */
    {0x00, 0x00, 0x1F, 0x02, 0x04, 0x08, 0x1F}, /* z */
    {0x02, 0x04, 0x04, 0x08, 0x04, 0x04, 0x02}, /* { */
    {0x04, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04}, /* | */
    {0x08, 0x04, 0x04, 0x02, 0x04, 0x04, 0x08}, /* } */
    {0x00, 0x00, 0x08, 0x15, 0x02, 0x00, 0x00}, /* ~ */
};

/* ---- painting ---------------------------------------------------------------------------- */

static void put(struct plot_raster *r, int x, int y, uint32_t rgb)
{
    if (x < 0 || y < 0 || x >= r->w || y >= r->h)
        return;
    uint8_t *p = r->px + ((size_t)y * (size_t)r->w + (size_t)x) * 3;
    p[0] = (uint8_t)(rgb >> 16), p[1] = (uint8_t)(rgb >> 8), p[2] = (uint8_t)rgb;
}

/* Fills the pixels [x0, x1) x [y0, y1), clipped. */
static void fill(struct plot_raster *r, int x0, int y0, int x1, int y1, uint32_t rgb)
{
    for (int y = y0 < 0 ? 0 : y0; y < y1 && y < r->h; y++)
        for (int x = x0 < 0 ? 0 : x0; x < x1 && x < r->w; x++)
            put(r, x, y, rgb);
}

static void r_group(void *ctx, const char *attrs)
{
    (void)ctx, (void)attrs;
}

/* A segment in pixels, a square brush of side bw stepped along it; dashes in pixels. */
static void r_line(void *ctx, double x0, double y0, double x1, double y1, uint32_t rgb,
                   double width, int dash_on, int dash_off, const char *cls)
{
    (void)cls;
    struct plot_raster *r = ctx;
    double s = r->scale;
    x0 *= s, y0 *= s, x1 *= s, y1 *= s;
    int bw = (int)lround(width * s);
    if (bw < 1)
        bw = 1;
    double len = hypot(x1 - x0, y1 - y0);
    int steps = (int)ceil(len);
    if (steps > 1 << 16)
        return; /* far outside any picture we draw */
    double on = dash_on * s, period = (dash_on + dash_off) * s;
    for (int i = 0; i <= steps; i++) {
        double t = steps ? (double)i / steps : 0;
        if (period > 0 && fmod(t * len, period) >= on)
            continue;
        int x = (int)lround(x0 + (x1 - x0) * t) - bw / 2;
        int y = (int)lround(y0 + (y1 - y0) * t) - bw / 2;
        fill(r, x, y, x + bw, y + bw, rgb);
    }
}

/* Its segments as lines (a dash pattern starts again at each point). */
static void r_polyline(void *ctx, const double *xy, int n, uint32_t rgb, double width, int dash_on,
                       int dash_off, const char *cls)
{
    for (int i = 1; i < n; i++)
        r_line(ctx, xy[2 * i - 2], xy[2 * i - 1], xy[2 * i], xy[2 * i + 1], rgb, width, dash_on,
               dash_off, cls);
}

/* Each pixel column between the first and the last point: from the polyline's y there
 * (interpolated) down to base. */
static void r_area(void *ctx, const double *xy, int n, double base, uint32_t rgb)
{
    struct plot_raster *r = ctx;
    double s = r->scale;
    if (n < 2)
        return;
    int seg = 0;
    int xa = (int)lround(xy[0] * s), xb = (int)lround(xy[2 * (n - 1)] * s);
    for (int x = xa; x < xb; x++) {
        double ux = (x + 0.5) / s;
        while (seg < n - 2 && xy[2 * seg + 2] < ux)
            seg++;
        double ax = xy[2 * seg], ay = xy[2 * seg + 1], bx = xy[2 * seg + 2], by = xy[2 * seg + 3];
        double y = bx > ax ? ay + (by - ay) * (ux - ax) / (bx - ax) : by;
        fill(r, x, (int)lround(y * s), x + 1, (int)lround(base * s), rgb);
    }
}

/* Text in the 5x7 font: a glyph cell of 6x9 font pixels, each size/9 x the scale wide (at
 * least one); bold draws every glyph twice, one pixel apart. */
static void r_text(void *ctx, double x, double y, const char *str, uint32_t rgb, int size, int bold,
                   int anchor)
{
    struct plot_raster *r = ctx;
    int k = (int)lround(r->scale * size / 9.0);
    if (k < 1)
        k = 1;
    double width = (double)strlen(str) * 6 * k - k; /* pixels */
    double px = x * r->scale - (anchor == PLOT_MIDDLE  ? width / 2
                                : anchor == PLOT_RIGHT ? width
                                                       : 0);
    int top = (int)lround(y * r->scale) - 7 * k; /* the baseline under the glyphs' 7 rows */
    for (const char *c = str; *c; c++, px += 6 * k) {
        unsigned ch = (unsigned char)*c;
        const uint8_t *g = font5x7[(ch >= 0x20 && ch < 0x7f ? ch : '?') - 0x20];
        for (int row = 0; row < 7; row++)
            for (int col = 0; col < 5; col++)
                if (g[row] & (0x10 >> col))
                    for (int b = 0; b <= bold; b++) {
                        int gx = (int)lround(px) + col * k + b;
                        fill(r, gx, top + row * k, gx + k, top + row * k + k, rgb);
                    }
    }
}

int plot_raster_init(struct plot_raster *r, int w, int h, int scale, uint32_t rgb)
{
    memset(r, 0, sizeof *r);
    r->w = w * scale, r->h = h * scale, r->scale = scale;
    if (!(r->px = malloc((size_t)r->w * (size_t)r->h * 3)))
        return -1;
    fill(r, 0, 0, r->w, r->h, rgb);
    return 0;
}

void plot_raster_release(struct plot_raster *r)
{
    free(r->px);
    r->px = NULL;
}

struct plot_pen plot_raster_pen(struct plot_raster *r)
{
    struct plot_pen p = {r, r_group, r_line, r_polyline, r_area, r_text};
    return p;
}

/* ---- PNG --------------------------------------------------------------------------------- */

/* The deflate stream is built in memory: bits are appended least significant first. */
struct bits {
    struct ms_buf out; /* the whole bytes so far (src/common/buf.h) */
    uint32_t acc;
    int n;
};

static void put_byte(struct bits *b, uint8_t v)
{
    ms_buf_byte(&b->out, v);
}

static void put_bits(struct bits *b, uint32_t v, int n)
{
    b->acc |= v << b->n;
    b->n += n;
    while (b->n >= 8) {
        put_byte(b, (uint8_t)b->acc);
        b->acc >>= 8, b->n -= 8;
    }
}

/* A Huffman code: its bits go out most significant first. */
static void put_code(struct bits *b, uint32_t code, int n)
{
    uint32_t rev = 0;
    for (int i = 0; i < n; i++)
        rev |= ((code >> i) & 1u) << (n - 1 - i);
    put_bits(b, rev, n);
}

/* A literal or length symbol in the fixed Huffman code (RFC 1951, 3.2.6). */
static void put_sym(struct bits *b, unsigned sym)
{
    if (sym < 144)
        put_code(b, 0x30 + sym, 8);
    else if (sym < 256)
        put_code(b, 0x190 + sym - 144, 9);
    else if (sym < 280)
        put_code(b, sym - 256, 7);
    else
        put_code(b, 0xC0 + sym - 280, 8);
}

static const uint16_t len_base[29] = {3,  4,  5,  6,   7,   8,   9,   10,  11, 13,
                                      15, 17, 19, 23,  27,  31,  35,  43,  51, 59,
                                      67, 83, 99, 115, 131, 163, 195, 227, 258};
static const uint8_t len_extra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                      2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
static const uint16_t dist_base[30] = {
    1,   2,   3,   4,   5,   7,    9,    13,   17,   25,   33,   49,   65,    97,    129,
    193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
static const uint8_t dist_extra[30] = {0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
                                       6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};

static void put_match(struct bits *b, unsigned len, unsigned dist)
{
    int i = 28;
    while (len_base[i] > len)
        i--;
    put_sym(b, 257 + (unsigned)i);
    put_bits(b, len - len_base[i], len_extra[i]);
    int d = 29;
    while (dist_base[d] > dist)
        d--;
    put_code(b, (uint32_t)d, 5);
    put_bits(b, dist - dist_base[d], dist_extra[d]);
}

static size_t match_len(const uint8_t *p, size_t i, size_t n, size_t dist)
{
    if (dist > i)
        return 0;
    size_t k = 0;
    while (k < 258 && i + k < n && p[i + k] == p[i + k - dist])
        k++;
    return k;
}

/* One final deflate block of fixed codes over raw[0, n); row is the distance to the byte above. */
static void deflate_fixed(struct bits *b, const uint8_t *raw, size_t n, size_t row)
{
    put_bits(b, 1, 1); /* BFINAL */
    put_bits(b, 1, 2); /* BTYPE 01: fixed Huffman codes */
    for (size_t i = 0; i < n;) {
        size_t l3 = match_len(raw, i, n, 3);
        size_t lr = row <= 32768 ? match_len(raw, i, n, row) : 0;
        size_t len = l3 > lr ? l3 : lr;
        if (len >= 3) {
            put_match(b, (unsigned)len, (unsigned)(l3 > lr ? 3 : row));
            i += len;
        } else {
            put_sym(b, raw[i++]);
        }
    }
    put_sym(b, 256);
    if (b->n)
        put_bits(b, 0, 8 - b->n); /* flush the last partial byte */
}

static uint32_t crc_table[256];

static uint32_t crc32_update(uint32_t c, const uint8_t *p, size_t n)
{
    if (!crc_table[1])
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t v = i;
            for (int k = 0; k < 8; k++)
                v = v & 1 ? 0xEDB88320u ^ (v >> 1) : v >> 1;
            crc_table[i] = v;
        }
    c = ~c;
    while (n--)
        c = crc_table[(c ^ *p++) & 0xff] ^ (c >> 8);
    return ~c;
}

static void be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8),
    p[3] = (uint8_t)v;
}

static int chunk(FILE *f, const char *type, const uint8_t *data, size_t n)
{
    uint8_t head[8], tail[4];
    be32(head, (uint32_t)n);
    memcpy(head + 4, type, 4);
    uint32_t crc = crc32_update(crc32_update(0, head + 4, 4), data, n);
    be32(tail, crc);
    if (fwrite(head, 1, 8, f) != 8 || (n && fwrite(data, 1, n, f) != n) ||
        fwrite(tail, 1, 4, f) != 4)
        return -1;
    return 0;
}

int plot_raster_write_png(const struct plot_raster *r, FILE *f)
{
    size_t row = 1 + (size_t)r->w * 3, n = row * (size_t)r->h;
    uint8_t *raw = malloc(n);
    if (!raw)
        return -1;
    for (int y = 0; y < r->h; y++) {
        raw[(size_t)y * row] = 0; /* filter: none */
        memcpy(raw + (size_t)y * row + 1, r->px + (size_t)y * (size_t)r->w * 3, row - 1);
    }
    struct bits b = {0};
    put_byte(&b, 0x78), put_byte(&b, 0x01); /* zlib header: deflate, 32 KiB window */
    deflate_fixed(&b, raw, n, row);
    uint32_t s1 = 1, s2 = 0; /* Adler-32 of the raw data */
    for (size_t i = 0; i < n; i++) {
        s1 = (s1 + raw[i]) % 65521;
        s2 = (s2 + s1) % 65521;
    }
    free(raw);
    uint8_t ad[4];
    be32(ad, s2 << 16 | s1);
    for (int i = 0; i < 4; i++)
        put_byte(&b, ad[i]);
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    uint8_t ihdr[13];
    be32(ihdr, (uint32_t)r->w);
    be32(ihdr + 4, (uint32_t)r->h);
    ihdr[8] = 8, ihdr[9] = 2, ihdr[10] = ihdr[11] = ihdr[12] = 0; /* 8-bit RGB, no interlace */
    int rc = b.out.oom ? -1 : 0;
    if (!rc && (fwrite(sig, 1, 8, f) != 8 || chunk(f, "IHDR", ihdr, 13) ||
                chunk(f, "IDAT", (const uint8_t *)b.out.p, b.out.len) || chunk(f, "IEND", NULL, 0)))
        rc = -1;
    ms_buf_release(&b.out);
    return rc;
}

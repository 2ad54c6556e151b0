/* report.c: `memscope report` (report.h). Asks the viewer's own queries (api.c) for every
 * answer the page needs and writes them, with the page, its style and its script (the embedded
 * assets), into one HTML file. The page (web/src, common.js) finds window.MEMSCOPE_REPORT and
 * answers from it instead of the server: the cursor snaps to the nearest precomputed time, a
 * zoom narrows the whole run's series. Workload: the model's queries at up to MAX_TIMES times;
 * the answers are kept in memory until written, under MS_REPORT_BUDGET bytes. */
#include "report.h"

#include "assets.h"
#include "common/grow.h"
#include "analyze/analyze.h"
#include "common/ms_error.h"

#include <stdlib.h>
#include <string.h>

#define MAX_TIMES 200
#define MAX_POOL_TIMES 100
#define REPORT_BLOCKS "50"
#define REPORT_DETAIL "400"     /* flame nodes under 1/400 of the total left out */
#define REPORT_LIFETIMES "2000" /* the block lifetime chart: the largest blocks of the run */

struct params {
    const char *k[4], *v[4];
    int n;
};

static const char *param(void *ctx, const char *name)
{
    const struct params *p = ctx;
    for (int i = 0; i < p->n; i++)
        if (!strcmp(p->k[i], name))
            return p->v[i];
    return NULL;
}

/* One answer of the queries, as JSON text (malloc'd) in *body; 0 or a negative code. */
static int ask(struct ms_view *v, const char *path, struct params *p, char **body, size_t *len,
               char *err, size_t errlen)
{
    int status = ms_view_api(v, path, param, p, body, len);
    if (status == 200)
        return 0;
    snprintf(err, errlen, "report: %s: %.200s", path, *body ? *body : "out of memory");
    free(*body);
    *body = NULL;
    return status == 400 ? MS_EINVAL : MS_ENOMEM;
}

/* A growing text: the answers, joined as one JSON object. */
struct text {
    char *p;
    size_t n, cap;
    int oom;
};

static void put(struct text *t, const char *s, size_t n)
{
    if (t->oom)
        return;
    if (t->n + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 1 << 16;
        while (cap < t->n + n + 1)
            cap *= 2;
        char *q = realloc(t->p, cap);
        if (!q) {
            t->oom = 1;
            return;
        }
        t->p = q;
        t->cap = cap;
    }
    memcpy(t->p + t->n, s, n);
    t->n += n;
    t->p[t->n] = 0;
}

static void puts_(struct text *t, const char *s)
{
    put(t, s, strlen(s));
}

/* Adds "key": answer (without its trailing newline). */
static void member(struct text *t, const char *key, const char *json, size_t len)
{
    while (len && json[len - 1] == '\n')
        len--;
    puts_(t, t->n > 1 ? ",\"" : "\"");
    puts_(t, key);
    puts_(t, "\":");
    put(t, json, len);
}

static int add_answer(struct ms_view *v, struct text *t, const char *key, const char *path,
                      struct params *p, char *err, size_t errlen)
{
    char *body;
    size_t len;
    int rc = ask(v, path, p, &body, &len, err, errlen);
    if (rc == 0)
        member(t, key, body, len);
    free(body);
    return rc;
}

/* Writes the script s to out with every "</" as "<\/": nothing in it can end the <script>
 * element it sits in (in JavaScript strings "\/" is "/"). The bundle holds no "<!--" nor
 * "<script" (checked by ms_view_report: they would put the HTML parser in the script's
 * double-escaped state, where "</script>" no longer ends it). */
static void write_script_safe(FILE *out, const char *s, size_t n)
{
    size_t from = 0;
    for (size_t i = 0; i + 1 < n; i++)
        if (s[i] == '<' && s[i + 1] == '/') {
            fwrite(s + from, 1, i + 1 - from, out);
            fputs("\\", out);
            from = i + 1;
        }
    fwrite(s + from, 1, n - from, out);
}

/* Writes the JSON text s to out with every '<', '>' and '&' as \u003c, \u003e, \u0026: JSON
 * has them only inside strings, where these escapes read back the same, and without them no
 * recorded name ("</script>", "<!--<script>") can end or change the <script> element the data
 * sits in. */
static void write_json_safe(FILE *out, const char *s, size_t n)
{
    size_t from = 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] == '<' || s[i] == '>' || s[i] == '&') {
            fwrite(s + from, 1, i - from, out);
            fprintf(out, "\\u%04x", (unsigned)s[i]);
            from = i + 1;
        }
    fwrite(s + from, 1, n - from, out);
}

/* 1 when the n bytes at s hold text. */
static int holds(const void *s, size_t n, const char *text)
{
    return memmem(s, n, text, strlen(text)) != NULL;
}

static int times_cmp(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The times of the first pool's events (its tracks' changes), ascending, distinct: all of them
 * or MAX_POOL_TIMES evenly picked. Returns how many. */
static int pool_times(const struct ms_view_model *m, int64_t *out)
{
    if (!m->npools)
        return 0;
    const struct ms_vpool *p = &m->pools[0];
    size_t n = 0, cap = 0;
    int64_t *all = NULL;
    for (size_t t = 1; t < m->ntracks; t++) {
        const struct ms_vtrack *tr = &m->tracks[t];
        if (tr->layer != p->layer && tr->layer != p->reserve_layer)
            continue;
        struct ms_vcur *c = malloc(sizeof *c);
        if (!c) {
            free(all);
            return 0; /* no step points: the report steps through its other times */
        }
        ms_vcur_init(c, tr->line);
        for (size_t i = 0; i < tr->line->n; i++) {
            if (ms_grow((void **)&all, &cap, n, sizeof *all, 256, 1u << 26) < 0) {
                free(all);
                free(c);
                return 0; /* no step points: the report steps through its other times */
            }
            all[n++] = ms_vline_ts(c, i);
        }
        free(c);
    }
    if (n > 1) /* qsort takes no NULL array, even empty: none was made then */
        qsort(all, n, sizeof *all, times_cmp);
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (!u || all[i] != all[u - 1])
            all[u++] = all[i];
    int k = 0;
    if (u <= MAX_POOL_TIMES)
        for (size_t i = 0; i < u; i++)
            out[k++] = all[i];
    else
        for (size_t i = 0; i < MAX_POOL_TIMES; i++)
            out[k++] = all[i * u / MAX_POOL_TIMES];
    free(all);
    return k;
}

/* The answers at cursor time t (ns from the first event): "<t>": {blocks, owners, flame}. */
static int add_time(struct ms_view *v, struct text *t, int64_t rel, char *err, size_t errlen)
{
    char ts[32], key[40];
    snprintf(ts, sizeof ts, "%lld", (long long)rel);
    snprintf(key, sizeof key, "%s", ts);
    struct params pb = {{"t", "limit"}, {ts, REPORT_BLOCKS}, 2};
    struct params po = {{"t"}, {ts}, 1};
    struct params pf = {{"t", "mode", "detail"}, {ts, "live", REPORT_DETAIL}, 3};
    struct text one = {0};
    puts_(&one, "{");
    int rc = add_answer(v, &one, "blocks", "/api/blocks", &pb, err, errlen);
    if (rc == 0)
        rc = add_answer(v, &one, "owners", "/api/owners", &po, err, errlen);
    if (rc == 0)
        rc = add_answer(v, &one, "flame", "/api/flame", &pf, err, errlen);
    struct params pp = {{"t"}, {ts}, 1}; /* the first pool's state */
    if (rc == 0 && v->m.npools)
        rc = add_answer(v, &one, "segments", "/api/segments", &pp, err, errlen);
    puts_(&one, "}");
    if (rc == 0 && one.oom)
        rc = MS_ENOMEM;
    if (rc == 0)
        member(t, key, one.p, one.n);
    free(one.p);
    return rc;
}

int ms_view_report(struct ms_view *v, FILE *out, char *err, size_t errlen)
{
    struct ms_u64map seen;
    ms_u64map_init(&seen, 1, 1u << 24);
    v->seen_stacks = &seen;
    struct text t = {0}, at = {0};
    int rc = 0;
    char points[16];
    snprintf(points, sizeof points, "%d", MS_REPORT_POINTS);
    struct params none = {{0}, {0}, 0};
    struct params ps = {{"n"}, {points}, 1};
    struct params fa = {{"mode", "detail"}, {"alloc", REPORT_DETAIL}, 2};
    struct params fl = {{"mode", "detail"}, {"leaked", REPORT_DETAIL}, 2};
    puts_(&t, "{");
    rc = add_answer(v, &t, "summary", "/api/summary", &none, err, errlen);
    if (rc == 0)
        rc = add_answer(v, &t, "series", "/api/series", &ps, err, errlen);
    if (rc == 0) /* the ranges a pixel of the whole run's chart shows */
        rc = add_answer(v, &t, "ranges", "/api/ranges", &ps, err, errlen);
    if (rc == 0)
        rc = add_answer(v, &t, "flame_alloc", "/api/flame", &fa, err, errlen);
    if (rc == 0)
        rc = add_answer(v, &t, "flame_leaked", "/api/flame", &fl, err, errlen);
    struct params pt = {{"detail"}, {REPORT_DETAIL}, 1};
    if (rc == 0 && v->python_calls)
        rc = add_answer(v, &t, "pytrace", "/api/pytrace", &pt, err, errlen);
    struct params pl = {{"limit"}, {REPORT_LIFETIMES}, 1};
    if (rc == 0)
        rc = add_answer(v, &t, "lifetimes", "/api/blocks", &pl, err, errlen);

    /* the analyses' reports (compare needs two steps or runs: not here) */
    puts_(&t, ",\"analyses\":[");
    int first = 1;
    for (const struct ms_analysis *a = ms_analyses; rc == 0 && a->name; a++) {
        if (!strcmp(a->name, "compare"))
            continue;
        struct params pa = {{"name"}, {a->name}, 1};
        char *body;
        size_t len;
        if ((rc = ask(v, "/api/analysis", &pa, &body, &len, err, errlen)) < 0)
            break;
        while (len && body[len - 1] == '\n')
            len--;
        puts_(&t, first ? "" : ",");
        first = 0;
        /* {"name":..,"text":..} plus the summary: the answer's object, reopened */
        put(&t, body, len - 1);
        puts_(&t, ",\"summary\":");
        char *sum = NULL;
        size_t slen = 0;
        FILE *f = open_memstream(&sum, &slen);
        if (f) {
            struct ms_json j;
            ms_json_init(&j, f);
            ms_json_str(&j, NULL, a->summary);
            fclose(f);
        }
        puts_(&t, sum ? sum : "\"\"");
        puts_(&t, "}");
        free(sum);
        free(body);
    }
    puts_(&t, "]");

    /* cursor times: the peak first, then evenly spaced ones (halving the spacing each round)
     * while the answers fit the budget */
    int64_t span = v->m.t1 - v->m.t0, times[MAX_TIMES];
    int ntimes = 0;
    puts_(&at, "{");
    if (rc == 0 && (rc = add_time(v, &at, v->m.total_peak_ns - v->m.t0, err, errlen)) == 0)
        times[ntimes++] = v->m.total_peak_ns - v->m.t0;
    /* a pool's events (its regions and blocks changing), so that the allocator state steps
     * through them: all of them, or as many evenly picked as MAX_POOL_TIMES */
    int64_t ptimes[MAX_POOL_TIMES];
    int nptimes = pool_times(&v->m, ptimes), nkept = 0;
    for (int i = 0; rc == 0 && i < nptimes && ntimes < MAX_TIMES; i++) {
        if (t.n + at.n > MS_REPORT_BUDGET / 2)
            break;
        int64_t rel = ptimes[i] - v->m.t0;
        if (rel != times[0] && (rc = add_time(v, &at, rel, err, errlen)) == 0)
            times[ntimes++] = rel;
        if (rc == 0)
            ptimes[nkept++] = rel; /* the ones the report answers at: the page steps through */
    }
    for (int parts = 2; rc == 0 && parts <= MAX_TIMES && ntimes < MAX_TIMES; parts *= 2)
        for (int k = 1; k < parts && ntimes < MAX_TIMES; k += 2) { /* the new midpoints */
            if (t.n + at.n > MS_REPORT_BUDGET * 3 / 4)
                goto budget;
            int64_t rel = span / parts * k;
            if ((rc = add_time(v, &at, rel, err, errlen)) < 0)
                break;
            times[ntimes++] = rel;
        }
budget:
    puts_(&at, "}");
    if (rc == 0)
        member(&t, "at", at.p, at.n);
    qsort(times, (size_t)ntimes, sizeof *times, times_cmp);
    puts_(&t, ",\"times\":[");
    for (int i = 0; i < ntimes; i++) {
        char n[32];
        snprintf(n, sizeof n, "%s%lld", i ? "," : "", (long long)times[i]);
        puts_(&t, n);
    }
    puts_(&t, "],\"pool_times\":[");
    for (int i = 0; i < nkept; i++) {
        char n[32];
        snprintf(n, sizeof n, "%s%lld", i ? "," : "", (long long)ptimes[i]);
        puts_(&t, n);
    }
    puts_(&t, "]");

    /* the stacks every answer above names */
    v->seen_stacks = NULL;
    struct text st = {0};
    puts_(&st, "{");
    size_t pos = 0;
    uint64_t id;
    void *val;
    while (rc == 0 && ms_u64map_next(&seen, &pos, &id, &val)) {
        if (t.n + st.n > MS_REPORT_BUDGET)
            break; /* the page says "stack not in this report" */
        char ids[24];
        snprintf(ids, sizeof ids, "%llu", (unsigned long long)id);
        struct params p = {{"id"}, {ids}, 1};
        rc = add_answer(v, &st, ids, "/api/stack", &p, err, errlen);
    }
    puts_(&st, "}");
    if (rc == 0)
        member(&t, "stacks", st.p, st.n);
    puts_(&t, "}");
    free(st.p);
    free(at.p);
    ms_u64map_release(&seen);
    if (rc == 0 && t.oom)
        rc = MS_ENOMEM;
    if (rc < 0) {
        if (!*err)
            snprintf(err, errlen, "report: %s", ms_strerror(rc));
        free(t.p);
        return rc;
    }

    /* the page with its style and script inline, the data before the script */
    const struct ms_asset *page = ms_asset_find("/index.html"), *js = ms_asset_find("/app.js"),
                          *css = ms_asset_find("/uplot.css");
    const char *html = (const char *)page->data;
    const char *link = strstr(html, "<link rel=\"stylesheet\" href=\"uplot.css\">");
    const char *script = strstr(html, "<script src=\"app.js\"></script>");
    if (holds(js->data, js->len, "<!--") || holds(js->data, js->len, "<script")) {
        free(t.p);
        return ms_errf(err, errlen, MS_EFORMAT,
                       "report: the embedded script holds <!-- or <script, which would "
                       "change how the page's HTML reads it");
    }
    if (!link || !script || script < link) {
        free(t.p);
        return ms_errf(err, errlen, MS_EFORMAT,
                       "report: the embedded page has no stylesheet or script tag");
    }
    fwrite(html, 1, (size_t)(link - html), out);
    fputs("<style>", out);
    write_script_safe(out, (const char *)css->data, css->len);
    fputs("</style>", out);
    const char *after_link = link + strlen("<link rel=\"stylesheet\" href=\"uplot.css\">");
    fwrite(after_link, 1, (size_t)(script - after_link), out);
    fputs("<script>window.MEMSCOPE_REPORT=", out);
    write_json_safe(out, t.p, t.n);
    fputs(";</script>\n<script>", out);
    write_script_safe(out, (const char *)js->data, js->len);
    fputs("</script>", out);
    const char *rest = script + strlen("<script src=\"app.js\"></script>");
    fwrite(rest, 1, strlen(rest), out);
    free(t.p);
    return 0;
}

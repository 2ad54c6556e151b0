/* leaks_render.c: the report of `memscope analyze leaks` from its computed result (struct
 * leaks, leaks.h): as text (the growth rule's verdict by default; msMemScope's console lines
 * under --rule=msmemscope) or as one JSON document (docs/cli.md). Writes only; every number was
 * computed before (leaks.c, leaks_growth.c), so a failure has written nothing.
 *
 * Called by leaks.c once the result is complete. */
#include "leaks.h"

#include "common/ns.h"
#include "common/ms_error.h"
#include "common/grow.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static void proc_label(const struct ms_names *n, int64_t id, char *buf, size_t len)
{
    const struct ms_name_proc *p = ms__names_proc(n, id);
    if (p)
        snprintf(buf, len, "process %lld %s (pid %lld)", (long long)id, p->exe, (long long)p->pid);
    else
        snprintf(buf, len, "process %lld", (long long)id);
}

/* The growth groups of one (process, layer): the sites [*i, *e) (from *i on), its owners
 * [*oi, *oe) (from *oi on, a contiguous run too), and its process's step ends. */
static const struct proc_steps *growth_section(const struct leaks *L, size_t *i, size_t *e,
                                               size_t *oi, size_t *oe)
{
    const struct gset *sites = &L->gsites, *owners = &L->gowners;
    const struct ggroup *g = &sites->g[*i];
    *e = *i;
    while (*e < sites->n && sites->g[*e].process_id == g->process_id &&
           sites->g[*e].layer == g->layer)
        (*e)++;
    while (*oi < owners->n &&
           (owners->g[*oi].process_id < g->process_id ||
            (owners->g[*oi].process_id == g->process_id && owners->g[*oi].layer < g->layer)))
        (*oi)++;
    *oe = *oi;
    while (*oe < owners->n && owners->g[*oe].process_id == g->process_id &&
           owners->g[*oe].layer == g->layer)
        (*oe)++;
    size_t pi = 0;
    while (L->ps[pi].process_id != g->process_id)
        pi++;
    return &L->ps[pi];
}

/* ---- Render: text ---- */

static void text_owners(const struct leaks *L, const struct site_row *r)
{
    if (!r->nowners)
        return;
    FILE *out = L->x->out;
    fputs(" [", out);
    for (int k = 0; k < r->nowners; k++)
        fprintf(out, "%s%s", k ? ", " : "", ms__names_owner(&L->x->names, r->owners[k]));
    fputs(r->more_owners ? ", ...]" : "]", out);
}

static void text_live_at_exit(const struct leaks *L)
{
    FILE *out = L->x->out;
    const size_t top = (size_t)(L->x->o->top > 0 ? L->x->o->top : 10);
    const struct site_row *rows = L->live;
    fprintf(out, "leaks: memory live at exit, by call site\n");
    if (!L->nlive)
        fprintf(out, "  nothing was live at exit\n");
    for (size_t i = 0, e; i < L->nlive; i = e) {
        int64_t bytes = 0, blocks = 0;
        for (e = i; e < L->nlive && rows[e].process_id == rows[i].process_id &&
                    rows[e].layer == rows[i].layer;
             e++) {
            bytes += rows[e].bytes;
            blocks += rows[e].blocks;
        }
        char pl[256], hb[32];
        proc_label(&L->x->names, rows[i].process_id, pl, sizeof pl);
        ms_human_bytes(hb, sizeof hb, bytes);
        fprintf(out, "  %s, %s: %lld bytes (%s) in %lld blocks at %zu call sites\n", pl,
                ms__names_layer(&L->x->names, rows[i].layer), (long long)bytes, hb,
                (long long)blocks, e - i);
        fprintf(out, "  %12s %8s  %s\n", "bytes", "blocks", "call site [owners]");
        for (size_t k = i; k < e && k < i + top; k++) {
            fprintf(out, "  %12lld %8lld  %s", (long long)rows[k].bytes, (long long)rows[k].blocks,
                    rows[k].site);
            text_owners(L, &rows[k]);
            fputc('\n', out);
        }
        if (e - i > top)
            fprintf(out, "  ... %zu more call sites\n", e - i - top);
    }
}

static void text_step_check(const struct leaks *L)
{
    FILE *out = L->x->out;
    fprintf(out,
            "\nleaks: step-aware check (steps <= %d are warm-up; a block allocated "
            "at step s and live at the end of step s+1 is a leak)\n",
            L->x->o->warmup);
    if (!L->has_steps) {
        fprintf(out, "  no steps recorded (the program never called memscope_step())\n");
        return;
    }
    if (!L->nflagged) {
        fprintf(out, "  no leaks detected\n");
        return;
    }
    fprintf(out, "====== ERROR: Detected memory leaks ======\n");
    int multi = L->x->names.nprocs > 1;
    for (size_t i = 0; i < L->nflagged; i++) {
        const struct flagged *f = &L->flagged[i];
        const struct ms_name_proc *p = ms__names_proc(&L->x->names, f->process_id);
        /* msMemScope: "Direct %s leak of %f Mb(s) at 0x%lx in kernel_%lu at step %lu." */
        fprintf(out, "Direct %s leak of %f Mb(s) at 0x%" PRIx64 " at step %lld.",
                ms__names_layer(&L->x->names, f->layer), f->size / 1048576.0, f->addr,
                (long long)f->step);
        if (multi && p)
            fprintf(out, " (pid %lld)", (long long)p->pid);
        fputc('\n', out);
    }
    fprintf(out, "====== SUMMARY: %g Mb(s) leaked in %lld allocation(s) ======\n",
            L->flagged_bytes / 1048576.0, (long long)L->nflagged);
}

/* The default rule's view of msMemScope's check: how many blocks it flags, and the first of
 * them with their site, as information (a bounded queue, garbage freed later are among them). */
static void text_step_note(const struct leaks *L)
{
    if (!L->has_steps)
        return;
    FILE *out = L->x->out;
    const size_t top = (size_t)(L->x->o->top > 0 ? L->x->o->top : 10);
    char hb[32];
    ms_human_bytes(hb, sizeof hb, L->flagged_bytes);
    fprintf(out,
            "\nleaks: msMemScope's step check (--rule=msmemscope): %zu blocks (%s) allocated at "
            "a step s > %d were still live at the end of step s+1; not a leak by itself\n",
            L->nflagged, hb, L->x->o->warmup);
    for (size_t i = 0; i < L->nflagged && i < top; i++) {
        const struct flagged *f = &L->flagged[i];
        fprintf(out, "  %12lld bytes at 0x%" PRIx64 " at step %lld: %s\n", (long long)f->size,
                f->addr, (long long)f->step, f->site);
    }
    if (L->nflagged > top)
        fprintf(out, "  ... %zu more\n", L->nflagged - top);
}

static void text_series(FILE *out, const struct ggroup *g, const struct proc_steps *p)
{
    if (p->n <= 8) {
        for (size_t i = 0; i < g->nends; i++)
            fprintf(out, " %lld", (long long)g->live[i]);
    } else {
        fprintf(out, " %lld %lld %lld ... %lld %lld", (long long)g->live[0], (long long)g->live[1],
                (long long)g->live[2], (long long)g->live[g->nends - 2],
                (long long)g->live[g->nends - 1]);
    }
}

/* Groups g[0, n) of one (process, layer), by call site or by owner. */
static void text_groups(const struct leaks *L, const struct ggroup *g, size_t n,
                        const struct proc_steps *p, int by_owner)
{
    FILE *out = L->x->out;
    const size_t top = (size_t)(L->x->o->top > 0 ? L->x->o->top : 10);
    fprintf(out, "  by %s:\n  %14s  %-30s  %s\n", by_owner ? "owner" : "call site", "bytes/step",
            "live bytes at step ends", by_owner ? "owner" : "call site");
    size_t shown = 0;
    for (size_t i = 0; i < n && shown < top; i++) {
        if (g[i].per_step == 0 && g[i].live[g[i].nends - 1] == 0)
            continue;
        char num[32];
        snprintf(num, sizeof num, "%+.1f", g[i].per_step);
        fprintf(out, "  %14s ", num);
        text_series(out, &g[i], p);
        fprintf(out, "  %s\n", by_owner ? ms__names_owner(&L->x->names, g[i].key) : g[i].site);
        shown++;
    }
    if (!shown)
        fprintf(out, "  (none)\n");
}

static void text_growth(const struct leaks *L)
{
    FILE *out = L->x->out;
    fprintf(out, "\nleaks: growth of live bytes per step\n");
    if (!L->has_steps || !L->nps) {
        fprintf(out, "  no step ended (the program never called memscope_step())\n");
        return;
    }
    for (size_t i = 0, e, oi = 0, oe; i < L->gsites.n; i = e, oi = oe) {
        const struct proc_steps *p = growth_section(L, &i, &e, &oi, &oe);
        char pl[256];
        proc_label(&L->x->names, p->process_id, pl, sizeof pl);
        fprintf(out, "  %s, %s: live bytes at the ends of steps %lld..%lld\n", pl,
                ms__names_layer(&L->x->names, L->gsites.g[i].layer), (long long)p->ends[0].step,
                (long long)p->ends[p->n - 1].step);
        text_groups(L, &L->gsites.g[i], e - i, p, 0);
        if (oe > oi)
            text_groups(L, &L->gowners.g[oi], oe - oi, p, 1);
    }
}

/* Groups g[0, n) of one peak, by call site or by owner: those that grew, most first. */
static void text_tgroups(const struct leaks *L, const struct tgroup *g, size_t n, int by_owner)
{
    FILE *out = L->x->out;
    const size_t top = (size_t)(L->x->o->top > 0 ? L->x->o->top : 10);
    fprintf(out, "  by %s:\n  %14s  %-34s  %s\n", by_owner ? "owner" : "call site", "bytes/tenth",
            "live at the peak, allocated by", by_owner ? "owner" : "call site");
    size_t shown = 0;
    for (size_t i = 0; i < n && shown < top; i++) {
        if (g[i].per_slice <= 0)
            continue;
        char num[32];
        snprintf(num, sizeof num, "%+.1f", g[i].per_slice);
        fprintf(out, "  %14s  %lld %lld %lld ... %lld %lld", num, (long long)g[i].live[0],
                (long long)g[i].live[1], (long long)g[i].live[2], (long long)g[i].live[NSLICES - 2],
                (long long)g[i].live[NSLICES - 1]);
        fprintf(out, "  %s\n", by_owner ? ms__names_owner(&L->x->names, g[i].key) : g[i].site);
        shown++;
    }
    if (!shown)
        fprintf(out, "  (none grew)\n");
}

static void text_growth_without_steps(const struct leaks *L)
{
    if (L->has_steps || !L->ntpeaks)
        return;
    FILE *out = L->x->out;
    fprintf(out, "\nleaks: growth without steps: the blocks live at each peak, by the tenth of "
                 "the run (up to the peak) they were allocated in\n");
    for (size_t i = 0; i < L->ntpeaks; i++) {
        const struct tpeak *tp = &L->tpeaks[i];
        char pl[256], hb[32];
        proc_label(&L->x->names, tp->process_id, pl, sizeof pl);
        ms_human_bytes(hb, sizeof hb, tp->peak_bytes);
        fprintf(out, "  %s, %s: peak %lld bytes (%s) at +%.3f ms\n", pl,
                ms__names_layer(&L->x->names, tp->layer), (long long)tp->peak_bytes, hb,
                (double)(tp->peak_ns - tp->start_ns) / 1e6);
        text_tgroups(L, tp->sites, tp->nsites, 0);
        if (tp->nowners)
            text_tgroups(L, tp->owners, tp->nowners, 1);
    }
}

/* The growth rule's report (the default): one verdict line, then per process the judged steps
 * and one line per leaking call site. */
static void text_verdict(const struct leaks *L)
{
    FILE *out = L->x->out;
    struct verdict v = ms__leaks_verdict_of(L);
    const char *unit = L->has_steps ? "step" : "tenth of the allocations";
    if (v.leaks)
        fprintf(out, "leaks: LEAK: %zu call site%s keep%s growing, by %.1f bytes per %s in all\n",
                v.leaks, v.leaks == 1 ? "" : "s", v.leaks == 1 ? "s" : "", v.per_step, unit);
    else if (!v.judged)
        fprintf(out,
                "leaks: no leak found: too few steps to judge (%d step ends after the warm-up "
                "needed)\n",
                MS_LEAK_MIN_JUDGED + 1);
    else
        fprintf(out, "leaks: no leak: no call site's live bytes keep growing %s\n",
                L->has_steps ? "from step to step" : "over the run");
    if (v.small)
        fprintf(out,
                "  %zu call site%s grew steadily by less than %d%% of the peak: not called "
                "a leak\n",
                v.small, v.small == 1 ? "" : "s", MS_LEAK_MIN_GROWTH_PCT);
    if (L->has_steps) {
        fprintf(out,
                "  rule: a call site leaks when the bytes it still holds at the last step "
                "end were allocated all along: in at least a third of the steps of each "
                "half of the judged steps (steps <= %d are warm-up)\n",
                L->x->o->warmup);
        for (size_t i = 0; i < L->nps; i++) {
            const struct proc_steps *p = &L->ps[i];
            size_t first = ms__leaks_first_judged_end(p, L->x->o->warmup);
            char pl[256];
            proc_label(&L->x->names, p->process_id, pl, sizeof pl);
            if (first >= p->n || p->n - 1 - first < MS_LEAK_MIN_JUDGED) {
                fprintf(out, "  %s: %zu step end%s after the warm-up: too few to judge\n", pl,
                        first < p->n ? p->n - first : 0, p->n - first == 1 ? "" : "s");
                continue;
            }
            size_t n = 0;
            for (size_t k = 0; k < L->gsites.n; k++)
                n += L->gsites.g[k].leak && L->gsites.g[k].process_id == p->process_id;
            fprintf(out, "  %s: steps %lld..%lld judged: %s\n", pl, (long long)p->ends[first].step,
                    (long long)p->ends[p->n - 1].step, n ? "leaks" : "no leak");
            if (!n)
                continue;
            fprintf(out, "  %14s  %9s  %16s  %-8s  %s\n", "bytes/step", "grew in",
                    "held at last end", "layer", "call site");
            for (size_t k = 0; k < L->gsites.n; k++) {
                const struct ggroup *g = &L->gsites.g[k];
                if (!g->leak || g->process_id != p->process_id)
                    continue;
                char num[32], grew[32];
                snprintf(num, sizeof num, "%+.1f", g->kept_per_step);
                snprintf(grew, sizeof grew, "%zu/%zu", g->rises, g->judged);
                fprintf(out, "  %14s  %9s  %16lld  %-8s  %s\n", num, grew,
                        (long long)g->kept[g->nends - 1], ms__names_layer(&L->x->names, g->layer),
                        g->site);
            }
        }
        return;
    }
    fprintf(out, "  rule: no steps recorded: a call site leaks when the bytes it holds at a peak "
                 "were allocated all along: in at least two of the tenths 2..5 and two of the "
                 "tenths 6..9 of the allocations up to that peak\n");
    for (size_t i = 0; i < L->ntpeaks; i++) {
        const struct tpeak *tp = &L->tpeaks[i];
        char pl[256];
        proc_label(&L->x->names, tp->process_id, pl, sizeof pl);
        size_t n = 0;
        for (size_t k = 0; k < tp->nsites; k++)
            n += tp->sites[k].leak;
        fprintf(out, "  %s, %s: peak %lld bytes: %s\n", pl,
                ms__names_layer(&L->x->names, tp->layer), (long long)tp->peak_bytes,
                n ? "leaks" : "no leak");
        if (!n)
            continue;
        fprintf(out, "  %14s  %9s  %16s  %s\n", "bytes/tenth", "grew in", "held at the peak",
                "call site");
        for (size_t k = 0; k < tp->nsites; k++) {
            const struct tgroup *g = &tp->sites[k];
            if (!g->leak)
                continue;
            char num[32], grew[32];
            snprintf(num, sizeof num, "%+.1f", g->held_per_slice);
            snprintf(grew, sizeof grew, "%zu/%d", g->rises, GROW_TO);
            fprintf(out, "  %14s  %9s  %16lld  %s\n", num, grew, (long long)g->live[NSLICES - 1],
                    g->site);
        }
    }
}

void ms__leaks_render_text(const struct leaks *L)
{
    if (L->x->o->leak_rule == MS_LEAKS_MSMEMSCOPE) {
        text_live_at_exit(L);
        text_step_check(L);
    } else {
        text_verdict(L);
        fputc('\n', L->x->out);
        text_live_at_exit(L);
        text_step_note(L);
    }
    text_growth(L);
    text_growth_without_steps(L);
}

/* ---- Render: JSON ---- */

static void json_live_at_exit(const struct leaks *L, struct ms_json *j)
{
    const size_t top = (size_t)(L->x->o->top > 0 ? L->x->o->top : 10);
    const struct ms_names *names = &L->x->names;
    const struct site_row *rows = L->live;
    ms_json_begin_array(j, "live_at_exit");
    for (size_t i = 0, e; i < L->nlive; i = e) {
        int64_t bytes = 0, blocks = 0;
        for (e = i; e < L->nlive && rows[e].process_id == rows[i].process_id &&
                    rows[e].layer == rows[i].layer;
             e++) {
            bytes += rows[e].bytes;
            blocks += rows[e].blocks;
        }
        const struct ms_name_proc *p = ms__names_proc(names, rows[i].process_id);
        ms_json_begin_object(j, NULL);
        ms_json_int(j, "process_id", rows[i].process_id);
        ms_json_int(j, "pid", p ? p->pid : 0);
        ms_json_str(j, "exe", p ? p->exe : NULL);
        ms_json_str(j, "layer", ms__names_layer(names, rows[i].layer));
        ms_json_int(j, "bytes", bytes);
        ms_json_int(j, "blocks", blocks);
        ms_json_int(j, "sites_total", (long long)(e - i));
        ms_json_begin_array(j, "sites");
        for (size_t k = i; k < e && k < i + top; k++) {
            ms_json_begin_object(j, NULL);
            ms_json_str(j, "site", rows[k].site);
            ms_json_int(j, "bytes", rows[k].bytes);
            ms_json_int(j, "blocks", rows[k].blocks);
            ms_json_begin_array(j, "owners");
            for (int q = 0; q < rows[k].nowners; q++)
                ms_json_str(j, NULL, ms__names_owner(names, rows[k].owners[q]));
            ms_json_end_array(j);
            ms_json_end_object(j);
        }
        ms_json_end_array(j);
        ms_json_end_object(j);
    }
    ms_json_end_array(j);
}

static void json_step_check(const struct leaks *L, struct ms_json *j)
{
    const struct ms_names *names = &L->x->names;
    ms_json_begin_object(j, "step_check");
    ms_json_bool(j, "steps_recorded", L->has_steps);
    ms_json_begin_array(j, "leaks");
    for (size_t i = 0; i < L->nflagged; i++) {
        const struct flagged *f = &L->flagged[i];
        const struct ms_name_proc *p = ms__names_proc(names, f->process_id);
        char hex[32];
        snprintf(hex, sizeof hex, "0x%016" PRIx64, f->addr);
        ms_json_begin_object(j, NULL);
        ms_json_int(j, "process_id", f->process_id);
        ms_json_int(j, "pid", p ? p->pid : 0);
        ms_json_str(j, "layer", ms__names_layer(names, f->layer));
        ms_json_int(j, "allocation_id", f->allocation_id);
        ms_json_str(j, "addr", hex);
        ms_json_int(j, "size", f->size);
        ms_json_int(j, "step", f->step);
        ms_json_int(j, "flagged_at_step", f->flagged_at);
        ms_json_str(j, "site", f->site);
        ms_json_str(j, "owner", ms__names_owner(names, f->owner));
        ms_json_end_object(j);
    }
    ms_json_end_array(j);
    ms_json_int(j, "bytes", L->flagged_bytes);
    ms_json_int(j, "allocations", (long long)L->nflagged);
    ms_json_end_object(j);
}

static void json_groups(const struct leaks *L, struct ms_json *j, const struct ggroup *g, size_t n,
                        int by_owner)
{
    const size_t top = (size_t)(L->x->o->top > 0 ? L->x->o->top : 10);
    ms_json_begin_array(j, by_owner ? "by_owner" : "by_site");
    for (size_t i = 0; i < n && i < top; i++) {
        ms_json_begin_object(j, NULL);
        if (by_owner)
            ms_json_str(j, "owner", ms__names_owner(&L->x->names, g[i].key));
        else
            ms_json_str(j, "site", g[i].site);
        ms_json_double(j, "bytes_per_step", g[i].per_step);
        ms_json_begin_array(j, "live");
        for (size_t k = 0; k < g[i].nends; k++)
            ms_json_int(j, NULL, g[i].live[k]);
        ms_json_end_array(j);
        ms_json_end_object(j);
    }
    ms_json_end_array(j);
}

static void json_growth(const struct leaks *L, struct ms_json *j)
{
    ms_json_begin_array(j, "growth");
    for (size_t i = 0, e, oi = 0, oe; L->nps && i < L->gsites.n; i = e, oi = oe) {
        const struct proc_steps *p = growth_section(L, &i, &e, &oi, &oe);
        const struct ms_name_proc *pr = ms__names_proc(&L->x->names, p->process_id);
        ms_json_begin_object(j, NULL);
        ms_json_int(j, "process_id", p->process_id);
        ms_json_int(j, "pid", pr ? pr->pid : 0);
        ms_json_str(j, "exe", pr ? pr->exe : NULL);
        ms_json_str(j, "layer", ms__names_layer(&L->x->names, L->gsites.g[i].layer));
        ms_json_begin_array(j, "steps");
        for (size_t k = 0; k < p->n; k++)
            ms_json_int(j, NULL, p->ends[k].step);
        ms_json_end_array(j);
        json_groups(L, j, &L->gsites.g[i], e - i, 0);
        json_groups(L, j, &L->gowners.g[oi], oe - oi, 1);
        ms_json_end_object(j);
    }
    ms_json_end_array(j);
}

static void json_tgroups(const struct leaks *L, struct ms_json *j, const struct tgroup *g, size_t n,
                         int by_owner)
{
    const size_t top = (size_t)(L->x->o->top > 0 ? L->x->o->top : 10);
    ms_json_begin_array(j, by_owner ? "by_owner" : "by_site");
    for (size_t i = 0; i < n && i < top; i++) {
        ms_json_begin_object(j, NULL);
        if (by_owner)
            ms_json_str(j, "owner", ms__names_owner(&L->x->names, g[i].key));
        else
            ms_json_str(j, "site", g[i].site);
        ms_json_double(j, "bytes_per_tenth", g[i].per_slice);
        ms_json_begin_array(j, "live");
        for (int k = 0; k < NSLICES; k++)
            ms_json_int(j, NULL, g[i].live[k]);
        ms_json_end_array(j);
        ms_json_end_object(j);
    }
    ms_json_end_array(j);
}

static void json_growth_without_steps(const struct leaks *L, struct ms_json *j)
{
    ms_json_begin_array(j, "growth_without_steps");
    for (size_t i = 0; !L->has_steps && i < L->ntpeaks; i++) {
        const struct tpeak *tp = &L->tpeaks[i];
        const struct ms_name_proc *pr = ms__names_proc(&L->x->names, tp->process_id);
        ms_json_begin_object(j, NULL);
        ms_json_int(j, "process_id", tp->process_id);
        ms_json_int(j, "pid", pr ? pr->pid : 0);
        ms_json_str(j, "exe", pr ? pr->exe : NULL);
        ms_json_str(j, "layer", ms__names_layer(&L->x->names, tp->layer));
        ms_json_int(j, "peak_bytes", tp->peak_bytes);
        ms_json_int(j, "peak_ns", tp->peak_ns);
        ms_json_int(j, "start_ns", tp->start_ns);
        json_tgroups(L, j, tp->sites, tp->nsites, 0);
        json_tgroups(L, j, tp->owners, tp->nowners, 1);
        ms_json_end_object(j);
    }
    ms_json_end_array(j);
}

/* The growth rule's verdict (msMemScope's rule: whether the step check flagged a block). */
static void json_verdict(const struct leaks *L, struct ms_json *j)
{
    const struct ms_names *names = &L->x->names;
    struct verdict v = ms__leaks_verdict_of(L);
    int ms = L->x->o->leak_rule == MS_LEAKS_MSMEMSCOPE;
    ms_json_begin_object(j, "verdict");
    ms_json_str(j, "rule", ms ? "msmemscope" : "growth");
    ms_json_bool(j, "leak", ms ? L->nflagged > 0 : v.leaks > 0);
    ms_json_str(j, "judged_on", L->has_steps ? "steps" : "tenths");
    ms_json_int(j, "processes_judged", (long long)v.judged);
    ms_json_int(j, "processes_too_few_steps", (long long)v.too_few);
    ms_json_double(j, "bytes_per_step", v.per_step);
    ms_json_int(j, "small_sites", (long long)v.small);
    ms_json_begin_array(j, "sites");
    for (size_t i = 0; L->has_steps && i < L->gsites.n; i++) {
        const struct ggroup *g = &L->gsites.g[i];
        if (!g->leak)
            continue;
        const struct ms_name_proc *p = ms__names_proc(names, g->process_id);
        size_t pi = 0;
        while (L->ps[pi].process_id != g->process_id)
            pi++;
        const struct proc_steps *ps = &L->ps[pi];
        ms_json_begin_object(j, NULL);
        ms_json_int(j, "process_id", g->process_id);
        ms_json_int(j, "pid", p ? p->pid : 0);
        ms_json_str(j, "layer", ms__names_layer(names, g->layer));
        ms_json_str(j, "site", g->site);
        ms_json_double(j, "bytes_per_step", g->kept_per_step);
        ms_json_int(j, "steps_grown", (long long)g->rises);
        ms_json_int(j, "steps_judged", (long long)g->judged);
        ms_json_int(j, "first_step",
                    ps->ends[ms__leaks_first_judged_end(ps, L->x->o->warmup)].step);
        ms_json_int(j, "last_step", ps->ends[ps->n - 1].step);
        ms_json_int(j, "held_bytes", g->kept[g->nends - 1]);
        ms_json_int(j, "live_bytes", g->live[g->nends - 1]);
        ms_json_end_object(j);
    }
    for (size_t i = 0; !L->has_steps && i < L->ntpeaks; i++) {
        const struct tpeak *tp = &L->tpeaks[i];
        const struct ms_name_proc *p = ms__names_proc(names, tp->process_id);
        for (size_t k = 0; k < tp->nsites; k++) {
            const struct tgroup *g = &tp->sites[k];
            if (!g->leak)
                continue;
            ms_json_begin_object(j, NULL);
            ms_json_int(j, "process_id", tp->process_id);
            ms_json_int(j, "pid", p ? p->pid : 0);
            ms_json_str(j, "layer", ms__names_layer(names, tp->layer));
            ms_json_str(j, "site", g->site);
            ms_json_double(j, "bytes_per_step", g->held_per_slice);
            ms_json_int(j, "steps_grown", (long long)g->rises);
            ms_json_int(j, "steps_judged", GROW_TO);
            ms_json_int(j, "first_step", 1); /* tenths: the ends of tenths 1..9 */
            ms_json_int(j, "last_step", GROW_TO + 1);
            ms_json_int(j, "held_bytes", g->live[NSLICES - 1]);
            ms_json_int(j, "live_bytes", g->live[NSLICES - 1]);
            ms_json_end_object(j);
        }
    }
    ms_json_end_array(j);
    ms_json_end_object(j);
}

void ms__leaks_render_json(const struct leaks *L)
{
    struct ms_json j;
    ms_json_init(&j, L->x->out);
    ms_json_begin_object(&j, NULL);
    ms_json_str(&j, "analysis", "leaks");
    ms_json_int(&j, "warmup", L->x->o->warmup);
    json_verdict(L, &j);
    json_live_at_exit(L, &j);
    json_step_check(L, &j);
    json_growth(L, &j);
    json_growth_without_steps(L, &j);
    ms_json_end_object(&j);
    ms_json_finish(&j);
}

/* convert_compact.c: what the analyses would otherwise replay every event for, computed in the
 * conversion's pass (both kinds of database): allocations, temporaries and live-at-end blocks
 * per call site (site_stats), trend's series, decompose's moment and owner series; and what the
 * compact database (o->compact, docs/database.md) adds: which blocks rows it keeps
 * (conv__compact_block), and its traces, packed on other threads while the conversion reads
 * them, stored in trace_files.
 * Workload: a few additions per MALLOC and FREE and per closed block; a snapshot of the owners'
 * live bytes per STEP (capped: MAX_DPOINTS, MAX_DPAIRS); the packing runs beside the whole
 * conversion. */
#include "convert_internal.h"

/* The regions pools carve from (a user pool's reserve layer, PyTorch's segments): not among
 * the layers an analysis covers by default (ms__layer_filter), so they take no part in the
 * temporary counts, which are those of the default layers. */
static int reserve_layer(int layer)
{
    if (layer == MS_LAYER_MMAP_RESERVE)
        return 1;
    if (layer >= MS_LAYER_CUDA0)
        return (layer - MS_LAYER_CUDA0) % MS_CUDA_LAYERS == MS_CUDA_L_PTA_SEG;
    return layer >= MS_LAYER_POOL0 && (layer - MS_LAYER_POOL0) % 2 == 1;
}

int conv__default_layer(int layer)
{
    return layer > 0 && !reserve_layer(layer);
}

void conv__compact_live(struct conv *c, int64_t delta)
{
    c->trend_live += delta;
    if (c->trend_live > c->trend_max)
        c->trend_max = c->trend_live;
}

/* Beyond these the series are not computed (the analyses replay the traces) rather than take
 * more memory: 1M points, 8M (owner, live) pairs (128 MiB). */
#define MAX_DPOINTS (1u << 20)
#define MAX_DPAIRS (1u << 23)

/* Decompose's point: the live bytes of every owner now. */
static int owner_point(struct conv *c, int kind, int64_t process_id, int64_t step, int64_t ts)
{
    if (c->ndpoints >= MAX_DPOINTS || c->ndpairs + c->nown > MAX_DPAIRS) {
        c->trend_ok = 0; /* too many steps and owners: trend and decompose will replay */
        return 0;
    }
    if (c->ndpoints == c->adpoints && conv__grow((void **)&c->dpoints, &c->adpoints, c->ndpoints,
                                                 sizeof *c->dpoints, MAX_DPOINTS) < 0)
        return conv__oom(c, "owner series");
    struct dpoint *d = &c->dpoints[c->ndpoints++];
    *d = (struct dpoint){kind, process_id, step, ts, c->ndpairs, 0};
    for (size_t w = 0; w < c->nown; w++) {
        if (!c->own_live[w])
            continue;
        if (c->ndpairs == c->adpairs && conv__grow((void **)&c->dpairs, &c->adpairs, c->ndpairs,
                                                   sizeof *c->dpairs, MAX_DPAIRS) < 0)
            return conv__oom(c, "owner series");
        c->dpairs[c->ndpairs][0] = (int64_t)w;
        c->dpairs[c->ndpairs++][1] = c->own_live[w];
        d->n++;
    }
    return 0;
}

/* decompose's time sample k (0..9) of a run from t0 to t1, to the same arithmetic */
static int64_t dsample_ts(int64_t t0, int64_t t1, int k)
{
    if (t1 < t0)
        t1 = t0;
    return t0 + (int64_t)((double)(t1 - t0) * (k + 1) / 10);
}

/* analyze trend's sample time k, to the same integer arithmetic (its t0: the first events row) */
static int64_t trend_ts(const struct conv *c, int k)
{
    int64_t t0 = c->first_event_ns, span = c->t1_guess - t0;
    return t0 + span / TREND_POINTS * k + span % TREND_POINTS * k / TREND_POINTS;
}

int conv__compact_sample(struct conv *c, int64_t ts)
{
    /* (the next times are kept: this runs for every event) */
    if (c->next_event && !c->have_trend_next) { /* t0 is known from the first events row */
        c->trend_next = trend_ts(c, c->trend_k);
        c->have_trend_next = 1;
    }
    while (c->have_trend_next && c->trend_k <= TREND_POINTS && c->trend_next < ts) {
        c->trend_samples[c->trend_k++] = c->trend_live;
        c->trend_next = trend_ts(c, c->trend_k);
    }
    /* analyze decompose's, without steps (taken in any case: steps are known at the end) */
    if (c->dsample == 0 && !c->have_dsample_next) {
        c->dsample_next = dsample_ts(c->run_start_ns, c->t1_guess, 0);
        c->have_dsample_next = 1;
    }
    while (c->dsample < 10 && ts > c->dsample_next) {
        int rc = owner_point(c, 1, 0, 0, c->dsample_next);
        if (rc < 0)
            return rc;
        c->dsample++;
        c->dsample_next = dsample_ts(c->run_start_ns, c->t1_guess, c->dsample);
    }
    return 0;
}

/* A MALLOC (delta > 0) or FREE of a block of owner w: decompose's live bytes per owner. */
static int owner_live(struct conv *c, int64_t w, int64_t delta)
{
    if (w < 0)
        w = 0;
    if ((size_t)w >= c->nown) {
        size_t n = (size_t)w + 64;
        int64_t *a = realloc(c->own_live, n * sizeof *a), *b;
        if (!a)
            return conv__oom(c, "owner series");
        c->own_live = a;
        if (!(b = realloc(c->own_peak, n * sizeof *b)))
            return conv__oom(c, "owner series");
        c->own_peak = b;
        memset(a + c->nown, 0, (n - c->nown) * sizeof *a);
        memset(b + c->nown, 0, (n - c->nown) * sizeof *b);
        c->nown = n;
    }
    c->own_live[w] += delta;
    if (c->own_live[w] > c->own_peak[w])
        c->own_peak[w] = c->own_live[w];
    return 0;
}

int conv__compact_step(struct conv *c, const struct proc *p, int64_t ts)
{
    int rc = owner_point(c, 0, p->id, p->steps, ts);
    if (rc < 0 || !c->trend_ok)
        return rc;
    int64_t live = 0;
    for (size_t l = 0; l < p->nls; l++)
        if (p->ls[l].used && conv__default_layer((int)l))
            live += p->ls[l].st.live_bytes;
    if (c->nstep_lives == c->astep_lives &&
        conv__grow((void **)&c->step_lives, &c->astep_lives, c->nstep_lives, sizeof *c->step_lives,
                   MAX_DPOINTS) < 0)
        return conv__oom(c, "step ends");
    c->step_lives[c->nstep_lives++] = (struct step_live){c->next_event, p->id, p->steps, live};
    return 0;
}

/* Trend's series (live_samples, step_live, meta), when the time of the last event was known
 * at the start: the samples were taken at the times analyze trend takes them. */
static int write_trend(struct conv *c)
{
    if (!c->trend_ok || !c->next_event || c->t1_guess != c->last_event_ns)
        return 0; /* analyze trend replays the traces */
    while (c->trend_k <= TREND_POINTS)
        c->trend_samples[c->trend_k++] = c->trend_live;
    sqlite3_stmt *st = NULL, *sl = NULL, *m = NULL;
    int rc = conv__prepare(c, &st, "INSERT INTO live_samples VALUES (?,?)");
    if (rc == 0)
        rc = conv__prepare(c, &sl, "INSERT INTO step_live VALUES (?,?,?,?)");
    if (rc == 0)
        rc = conv__prepare(c, &m, "INSERT INTO meta VALUES (?, ?)");
    for (int k = 0; k <= TREND_POINTS && rc == 0; k++) {
        sqlite3_bind_int(st, 1, k);
        sqlite3_bind_int64(st, 2, c->trend_samples[k]);
        rc = conv__step_reset(c, st, "insert live_samples");
    }
    for (size_t i = 0; i < c->nstep_lives && rc == 0; i++) {
        const struct step_live *v = &c->step_lives[i];
        sqlite3_bind_int64(sl, 1, v->event_id);
        sqlite3_bind_int64(sl, 2, v->process_id);
        sqlite3_bind_int64(sl, 3, v->step);
        sqlite3_bind_int64(sl, 4, v->live);
        rc = conv__step_reset(c, sl, "insert step_live");
    }
    const char *keys[] = {"max_live_bytes", "final_live_bytes"};
    int64_t vals[] = {c->trend_max, c->trend_live};
    for (int i = 0; i < 2 && rc == 0; i++) {
        sqlite3_bind_text(m, 1, keys[i], -1, SQLITE_STATIC);
        sqlite3_bind_int64(m, 2, vals[i]);
        rc = conv__step_reset(c, m, "insert meta");
    }
    sqlite3_finalize(st);
    sqlite3_finalize(sl);
    sqlite3_finalize(m);
    return rc;
}

/* Decompose's moment (the peak of all default layers) and, when exact, its owner series
 * (decompose_points, decompose_live, owner_peaks). */
static int write_decompose(struct conv *c)
{
    sqlite3_stmt *m = NULL, *pt = NULL, *lv = NULL, *pk = NULL;
    int rc = conv__prepare(c, &m, "INSERT INTO meta VALUES (?, ?)");
    const char *keys[] = {"all_peak_event_id", "all_peak_ns", "all_peak_bytes"};
    int64_t vals[] = {c->all_peak_event, c->all_peak_ns, c->all_peak};
    for (int i = 0; i < 3 && rc == 0 && c->all_peak_event; i++) {
        sqlite3_bind_text(m, 1, keys[i], -1, SQLITE_STATIC);
        sqlite3_bind_int64(m, 2, vals[i]);
        rc = conv__step_reset(c, m, "insert meta");
    }
    sqlite3_finalize(m);
    int steps = 0;
    for (size_t i = 0; i < c->ndpoints; i++)
        steps |= c->dpoints[i].kind == 0;
    /* exact: no tag changed an owner, and without steps the samples' times were right */
    if (rc < 0 || !c->trend_ok || c->retagged || !c->next_event ||
        (!steps && c->t1_guess != c->last_event_ns))
        return rc;
    int64_t t1 = c->last_event_ns;
    if (steps)
        rc = owner_point(c, 2, 0, 0, t1 < c->run_start_ns ? c->run_start_ns : t1);
    while (rc == 0 && !steps && c->dsample < 10) {
        rc = owner_point(c, 1, 0, 0, dsample_ts(c->run_start_ns, t1, c->dsample));
        c->dsample++;
    }
    if (rc == 0)
        rc = conv__prepare(c, &pt, "INSERT INTO decompose_points VALUES (?,?,?,?,?)");
    if (rc == 0)
        rc = conv__prepare(c, &lv, "INSERT INTO decompose_live VALUES (?,?,?)");
    if (rc == 0)
        rc = conv__prepare(c, &pk, "INSERT INTO owner_peaks VALUES (?,?)");
    for (size_t i = 0, n = 0; i < c->ndpoints && rc == 0; i++) {
        const struct dpoint *d = &c->dpoints[i];
        if (steps ? d->kind == 1 : d->kind != 1)
            continue; /* the other series */
        sqlite3_bind_int64(pt, 1, (int64_t)n);
        sqlite3_bind_int(pt, 2, d->kind);
        sqlite3_bind_int64(pt, 3, d->process_id);
        sqlite3_bind_int64(pt, 4, d->step);
        sqlite3_bind_int64(pt, 5, d->ts);
        rc = conv__step_reset(c, pt, "insert decompose_points");
        for (size_t k = d->first; k < d->first + d->n && rc == 0; k++) {
            sqlite3_bind_int64(lv, 1, (int64_t)n);
            sqlite3_bind_int64(lv, 2, c->dpairs[k][0]);
            sqlite3_bind_int64(lv, 3, c->dpairs[k][1]);
            rc = conv__step_reset(c, lv, "insert decompose_live");
        }
        n++;
    }
    for (size_t w = 0; w < c->nown && rc == 0; w++) {
        if (!c->own_peak[w])
            continue;
        sqlite3_bind_int64(pk, 1, (int64_t)w);
        sqlite3_bind_int64(pk, 2, c->own_peak[w]);
        rc = conv__step_reset(c, pk, "insert owner_peaks");
    }
    sqlite3_finalize(pt);
    sqlite3_finalize(lv);
    sqlite3_finalize(pk);
    return rc;
}

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* The site_stats row of (process, layer, stack, owner at allocation, step), created when new:
 * keyed by a hash of the five, a different key tried while another row holds it. */
static int site_index(struct conv *c, int64_t proc, int layer, int64_t stack, int64_t owner,
                      int64_t step, uint32_t *out)
{
    uint64_t k = mix64((uint64_t)stack * 0x9e3779b97f4a7c15ull ^ (uint64_t)layer << 48 ^
                       (uint64_t)proc << 32 ^ (uint64_t)owner * 0xc2b2ae3d27d4eb4full ^
                       (uint64_t)step * 0x165667b19e3779f9ull);
    for (;;) {
        uint32_t i;
        if (!ms_u64map_get32(&c->site_ids, k, &i))
            break;
        const struct site_stat *v = &c->sites[i];
        if (v->process_id == proc && v->layer == layer && v->stack_id == stack &&
            v->owner_id == owner && v->step == step) {
            *out = i;
            return 0;
        }
        k = mix64(k + 1);
    }
    if (c->nsites == c->asites &&
        conv__grow((void **)&c->sites, &c->asites, c->nsites, sizeof *c->sites, MAX_STACKS) < 0)
        return conv__oom(c, "call sites");
    *out = (uint32_t)c->nsites++;
    if (ms_u64map_set32(&c->site_ids, k, *out) < 0)
        return conv__oom(c, "call sites");
    c->sites[*out] = (struct site_stat){
        .process_id = proc, .stack_id = stack, .owner_id = owner, .step = step, .layer = layer};
    return 0;
}

int conv__compact_event(struct conv *c, const struct stream *s, int kind, int layer, int64_t size,
                        int64_t stack, int64_t alloc_id, int64_t event_id)
{
    struct thread *t = &c->threads[s->thread - 1];
    int64_t owner = c->row_owner;
    c->row_owner = 0;
    if (kind == MS_KIND_FREE) {
        if (reserve_layer(layer))
            return 0;
        if (alloc_id) {
            c->all_live -= size;
            int rc = c->trend_ok ? owner_live(c, owner, -size) : 0;
            if (rc < 0)
                return rc;
        }
        if (alloc_id && t->tmp_alloc == alloc_id) {
            c->sites[t->tmp_site].temporary++;
            c->sites[t->tmp_site].temp_bytes += size;
        }
        t->tmp_alloc = 0;
        return 0;
    }
    const struct proc *p = &c->procs[s->proc];
    uint32_t i = t->last_site - 1; /* a thread allocates at one site many times in a row */
    const struct site_stat *l = t->last_site ? &c->sites[i] : NULL;
    if (!l || l->stack_id != stack || l->layer != layer || l->owner_id != owner ||
        l->step != p->steps + 1 || l->process_id != p->id) {
        int rc = site_index(c, p->id, layer, stack, owner, p->steps + 1, &i);
        if (rc < 0)
            return rc;
        t->last_site = i + 1;
    }
    c->sites[i].allocs++;
    c->sites[i].bytes += size;
    if (!reserve_layer(layer)) {
        t->tmp_alloc = alloc_id;
        t->tmp_site = i;
        c->all_live += size;
        if (c->all_live > c->all_peak) {
            c->all_peak = c->all_live;
            c->all_peak_alloc = alloc_id;
            c->all_peak_event = event_id;
            c->all_peak_ns = s->ts;
            c->all_from = c->ncand; /* closed before this peak: not live at it */
        }
        if (c->trend_ok)
            return owner_live(c, owner, size);
    }
    return 0;
}

/* The site_stats rows, and meta retagged. */
static int write_sites(struct conv *c)
{
    sqlite3_stmt *st;
    int rc = conv__prepare(c, &st, "INSERT INTO site_stats VALUES (?,?,?,?,?,?,?,?,?,?,?)");
    for (size_t i = 0; i < c->nsites && rc == 0; i++) {
        const struct site_stat *v = &c->sites[i];
        sqlite3_bind_int64(st, 1, v->process_id);
        sqlite3_bind_int64(st, 2, v->layer);
        if (v->stack_id > 0)
            sqlite3_bind_int64(st, 3, v->stack_id);
        else
            sqlite3_bind_null(st, 3);
        if (v->owner_id > 0)
            sqlite3_bind_int64(st, 4, v->owner_id);
        else
            sqlite3_bind_null(st, 4);
        sqlite3_bind_int64(st, 5, v->step);
        sqlite3_bind_int64(st, 6, v->allocs);
        sqlite3_bind_int64(st, 7, v->bytes);
        sqlite3_bind_int64(st, 8, v->temporary);
        sqlite3_bind_int64(st, 9, v->temp_bytes);
        sqlite3_bind_int64(st, 10, v->live_blocks);
        sqlite3_bind_int64(st, 11, v->live_bytes);
        rc = conv__step_reset(c, st, "insert site_stats");
    }
    sqlite3_finalize(st);
    if (rc == 0 && c->retagged) /* owners in site_stats are those at allocation */
        rc = conv__exec(c, "INSERT INTO meta VALUES ('retagged', '1')", "meta");
    return rc;
}

/* The layers of pools (a user pool's blocks and regions, PyTorch's blocks and segments):
 * the compact database keeps all their blocks rows (fragmentation reads them). */
static int pool_layer(int layer)
{
    if (layer >= MS_LAYER_CUDA0) {
        int k = (layer - MS_LAYER_CUDA0) % MS_CUDA_LAYERS;
        return k == MS_CUDA_L_PTA || k == MS_CUDA_L_PTA_SEG;
    }
    return layer >= MS_LAYER_POOL0;
}

int conv__live_at_end(struct conv *c, const struct closed_block *cb)
{
    if (cb->have_free)
        return 0;
    uint32_t i; /* live at the end: counted in its site_stats row */
    int rc = site_index(c, cb->process_id, cb->layer, cb->b.stack_id, cb->b.base_owner_id,
                        cb->b.step, &i);
    if (rc < 0)
        return rc;
    c->sites[i].live_blocks++;
    c->sites[i].live_bytes += cb->b.size;
    return 0;
}

/* cand[k], closed after its layer's peak (in its process) and allocated before it: live at it;
 * or after the peak of all default layers and allocated before that. */
static int live_at_a_peak(const struct conv *c, size_t k)
{
    const struct closed_block *cb = &c->cand[k];
    const struct layer_state *ls = &c->procs[cb->process_id - 1].ls[cb->layer];
    if (k >= ls->peak_from && cb->b.alloc_id <= ls->st.peak_alloc)
        return 1;
    const struct proc *p = &c->procs[cb->process_id - 1];
    if ((cb->layer == MS_LAYER_HEAP || cb->layer == MS_LAYER_MMAP) && k >= p->host_from &&
        cb->b.alloc_id <= p->host_peak_alloc)
        return 1; /* live at the peak of its process's heap and mmap together */
    return k >= c->all_from && !reserve_layer(cb->layer) && cb->b.alloc_id <= c->all_peak_alloc;
}

/* A start in cand (all_from, a layer's peak_from), for compact_cand. */
struct cand_from {
    size_t at;
    size_t *from;
};

static int cmp_cand_from(const void *a, const void *b)
{
    const struct cand_from *x = a, *y = b;
    return x->at < y->at ? -1 : x->at > y->at;
}

/* Drops the blocks of cand that no current peak needs any more (closed before every peak they
 * could be live at), keeping the order of the others and moving each start to the same block
 * (or the end). Returns 0 or MS_ENOMEM. */
static int compact_cand(struct conv *c)
{
    size_t n = 1, w = 0;
    for (size_t i = 0; i < c->nprocs; i++)
        n += c->procs[i].nls + 1;
    struct cand_from *f = malloc(n * sizeof *f);
    if (!f)
        return MS_ENOMEM;
    n = 0;
    f[n++] = (struct cand_from){c->all_from, &c->all_from};
    for (size_t i = 0; i < c->nprocs; i++) {
        f[n++] = (struct cand_from){c->procs[i].host_from, &c->procs[i].host_from};
        for (size_t l = 0; l < c->procs[i].nls; l++)
            f[n++] = (struct cand_from){c->procs[i].ls[l].peak_from, &c->procs[i].ls[l].peak_from};
    }
    qsort(f, n, sizeof *f, cmp_cand_from);
    size_t j = 0; /* the starts at or before k are already moved (to w <= k): live_at_a_peak
                   * compares k with them as with their old places, k being past both */
    for (size_t k = 0; k < c->ncand; k++) {
        for (; j < n && f[j].at <= k; j++)
            *f[j].from = w;
        if (live_at_a_peak(c, k))
            c->cand[w++] = c->cand[k];
    }
    for (; j < n; j++)
        *f[j].from = w;
    c->ncand = w;
    free(f);
    return 0;
}

/* Appends cb to cand: first drops the blocks no peak needs any more (peaks are reached again
 * and again: a training step's), and grows it if that leaves it more than half full. */
static int cand_push(struct conv *c, const struct closed_block *cb)
{
    if (c->ncand == c->acand) {
        if (c->ncand && compact_cand(c) < 0)
            return conv__oom(c, "blocks of the compact database");
        size_t need = c->ncand > c->acand / 2 ? c->acand : c->ncand; /* acand: doubles */
        if (conv__grow((void **)&c->cand, &c->acand, need, sizeof *c->cand, MAX_LIVE) < 0)
            return conv__oom(c, "blocks of the compact database");
    }
    c->cand[c->ncand++] = *cb;
    return 0;
}

/* Compact output: keeps the row of a closed block that an analysis reads from the compact
 * database: live at exit, live at the end of a step or at an OOM (one happened in its process
 * while it was live), accessed, retagged, of a pool, or live at its layer's peak, at the peak of
 * its process's heap and mmap together (host_peaks) or at the peak of all default layers
 * (decompose's moment). Whether a block was live at a peak is known only
 * at the end: a block closed after a current peak and allocated before it waits in cand, and a
 * new peak moves its list's start to the end of cand (nothing closed before a peak is live at
 * it). The condition to enter cand is the one live_at_a_peak checks at the end: a block enters
 * after the peak was set, so the peak it was checked against is still the peak then. */
int conv__compact_block(struct conv *c, struct proc *p, const struct closed_block *cb)
{
    int rc = conv__live_at_end(c, cb);
    if (rc < 0)
        return rc;
    if (!cb->have_free || cb->b.moments != p->moments || cb->b.keep || pool_layer(cb->layer))
        return conv__keep_block(c, cb);
    const struct layer_state *ls = &p->ls[cb->layer];
    if ((ls->st.peak_alloc && cb->b.alloc_id <= ls->st.peak_alloc) ||
        ((cb->layer == MS_LAYER_HEAP || cb->layer == MS_LAYER_MMAP) && p->host_peak_alloc &&
         cb->b.alloc_id <= p->host_peak_alloc) ||
        (!reserve_layer(cb->layer) && c->all_peak_alloc && cb->b.alloc_id <= c->all_peak_alloc))
        return cand_push(c, cb);
    return 0;
}

/* Compact output: writes the rows still in the window, then those of the blocks live at a
 * peak, in allocation order. */
int conv__compact_write_blocks(struct conv *c)
{
    int rc = conv__drain_blocks(c);
    size_t n = 0;
    if (rc < 0 || !c->ncand)
        return rc;
    struct block_ref *refs = malloc(c->ncand * sizeof *refs);
    if (!refs)
        return conv__oom(c, "blocks of the compact database");
    for (size_t k = 0; k < c->ncand; k++)
        if (live_at_a_peak(c, k))
            refs[n++] = (struct block_ref){c->cand[k].b.alloc_id, &c->cand[k]};
    qsort(refs, n, sizeof *refs, conv__cmp_block_ref);
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = conv__block_row(c, refs[i].cb);
    free(refs);
    return rc;
}

/* Compact output: starts packing the traces (and PyTorch's allocator pickles beside them) on
 * other threads while this one converts. */
int conv__compact_start(struct conv *c)
{
    if (c->o->no_traces)
        return 0;
    const char **paths = calloc(2 * c->nprocs + c->nusage_paths + 1, sizeof *paths);
    char **pickles = calloc(c->nprocs + 1, sizeof *pickles);
    size_t n = 0, np = 0;
    int rc = 0;
    if (!paths || !pickles)
        rc = conv__oom(c, "paths");
    for (size_t i = 0; i < c->nprocs && rc == 0; i++) {
        struct proc *p = &c->procs[i];
        paths[n++] = p->path;
        size_t len = strlen(c->o->trace_dir) + 48;
        char *pk = malloc(len);
        if (!pk) {
            rc = conv__oom(c, "paths");
            break;
        }
        snprintf(pk, len, "%s/%llu.pta.pickle", c->o->trace_dir, (unsigned long long)p->tr.hdr.pid);
        struct stat st;
        int dup = 0;
        for (size_t k = 0; k < np; k++)
            dup |= strcmp(pickles[k], pk) == 0;
        if (!dup && stat(pk, &st) == 0 && S_ISREG(st.st_mode)) {
            pickles[np++] = pk;
            paths[n++] = pk;
        } else {
            free(pk);
        }
    }
    /* the usage monitor's samples (convert_usage.c), for the full database's conversion */
    for (size_t k = 0; rc == 0 && k < c->nusage_paths; k++)
        paths[n++] = c->usage_paths[k];
    if (rc == 0)
        rc = ms_embed_start(&c->embed, paths, n, c->o->db_path, c->err, c->errlen);
    for (size_t k = 0; k < np; k++)
        free(pickles[k]);
    free(pickles);
    free(paths);
    return rc;
}

/* The computed tables (site_stats, trend's and decompose's series), in both kinds of
 * database. */
int conv__computed_write(struct conv *c)
{
    int rc = write_sites(c);
    if (rc == 0)
        rc = write_trend(c);
    return rc == 0 ? write_decompose(c) : rc;
}

/* monitor.c: the live monitor (monitor.h): its thread, its tick and the OOM warning.
 *
 * Called by `memscope run` (cmd_run.c: opened before the program starts, so that a port in use
 * stops nothing that ran; released when memscope exits, so the last values stay served through
 * the conversion), `memscope monitor` and `memscope top`. Workload: a tick every 250 ms (the
 * follower's poll, one /proc read per process, a fit of at most 240 points per process) and a
 * scrape now and then; nothing in the traced programs. */
#include "monitor.h"

#include "analyze/analyze.h"
#include "cli.h"
#include "common/files.h"
#include "common/ms_error.h"
#include "common/term_text.h"
#include "metrics_http.h"
#include "store/symbolize.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WARN_SITES 5 /* call sites named in the report */

uint64_t monitor_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void monitor_bytes(double n, char *out, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    double a = n < 0 ? -n : n;
    while (a >= 1024 && u < 4) {
        a /= 1024;
        n /= 1024;
        u++;
    }
    snprintf(out, len, u ? "%.1f %s" : "%.0f %s", n, units[u]);
}

static void copy_env(char *out, size_t len, const char *name)
{
    const char *v = getenv(name);
    snprintf(out, len, "%s", v ? v : "");
}

int monitor_open(struct monitor *m, const struct monitor_opts *o, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    m->lfd = -1;
    m->o = *o;
    int rc = ms_follow_init(&m->f, o->trace_dir);
    if (rc < 0) {
        return ms_errf(err, errlen, -1, "cannot follow '%s': %s", o->trace_dir,
                       rc == -ENOTDIR ? "not a directory" : ms_strerror(rc));
    }
    if (o->listen) {
        m->lfd = mhttp_listen(o->listen, m->bound, sizeof m->bound, err, errlen);
        if (m->lfd < 0) {
            ms_follow_release(&m->f);
            return -1;
        }
    }
    if (gethostname(m->host, sizeof m->host) < 0)
        snprintf(m->host, sizeof m->host, "localhost");
    m->host[sizeof m->host - 1] = 0;
    copy_env(m->pod, sizeof m->pod, "POD_NAME");
    copy_env(m->ns, sizeof m->ns, "POD_NAMESPACE");
    return 0;
}

/* Process pid's RANK from its environment ("" when it has none or cannot be read). */
static void read_rank(pid_t pid, char *out, size_t len)
{
    char path[64], buf[65536];
    out[0] = 0;
    snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return;
    buf[n] = 0;
    for (char *p = buf; p < buf + n; p += strlen(p) + 1)
        if (strncmp(p, "RANK=", 5) == 0) {
            /* a bounded label: digits only */
            size_t k = strspn(p + 5, "0123456789");
            if (k && k < len && p[5 + k] == 0)
                snprintf(out, len, "%s", p + 5);
            return;
        }
}

/* MemAvailable of /proc/meminfo in bytes, 0 when unknown. */
static uint64_t mem_available(void)
{
    char buf[4096];
    int fd = open("/proc/meminfo", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    char *p = strstr(buf, "MemAvailable:");
    return p ? strtoull(p + 13, NULL, 10) * 1024 : 0;
}

/* The text of the call site of stack_id in process p (symbolized through s), as the analyses
 * name sites (ms_site_pick). */
static void site_text(const struct ms_follow_proc *p, struct ms_symbolizer *s, uint32_t stack_id,
                      char *out, size_t len)
{
    const uint64_t *pcs;
    size_t n = ms_follow_stack(p, stack_id, &pcs);
    struct ms_frame_info fi[MS_FOLLOW_STACK_FRAMES * 4];
    size_t nf = 0;
    for (size_t i = 0; i < n && nf < sizeof fi / sizeof fi[0]; i++) {
        struct ms_sym_frame sf[MS_SYM_MAX_INLINE];
        const struct ms_sym_module *mod = ms_symbolizer_module(s, pcs[i]);
        int k = ms_symbolizer_lookup(s, pcs[i], sf);
        if (k < 1) {
            sf[0] = (struct ms_sym_frame){0};
            k = 1;
        }
        for (int j = 0; j < k && nf < sizeof fi / sizeof fi[0]; j++)
            fi[nf++] = (struct ms_frame_info){.function = sf[j].func,
                                              .file = sf[j].file,
                                              .line = sf[j].line,
                                              .module = mod ? mod->path : NULL,
                                              .offset = mod ? pcs[i] - mod->bias : pcs[i]};
    }
    if (!nf) {
        snprintf(out, len, "(no stack)");
        return;
    }
    long k = ms_site_pick(&ms_site_rule, fi, nf);
    ms_site_frame_format(&fi[k < 0 ? 0 : k], out, len);
}

void monitor_site_text(struct monitor *m, size_t i, uint32_t stack_id, char *out, size_t len)
{
    struct ms_follow_proc *p = &m->f.procs[i];
    struct monitor_proc *q = &m->mp[i];
    if (!m->symcache) {
        m->symcache = calloc(1, sizeof *m->symcache);
        if (m->symcache)
            ms_symcache_init(m->symcache);
    }
    if (!q->sym || q->sym_nmods != p->nmods) { /* modules loaded since: built again */
        if (q->sym)
            ms_symbolizer_release(q->sym);
        else
            q->sym = calloc(1, sizeof *q->sym);
        struct ms_sym_module *mods = calloc(p->nmods ? p->nmods : 1, sizeof *mods);
        if (q->sym && mods) {
            for (size_t k = 0; k < p->nmods; k++)
                mods[k] = (struct ms_sym_module){p->mods[k].bias, p->mods[k].lo, p->mods[k].hi,
                                                 p->mods[k].path, 0};
            if (ms_symbolizer_init(q->sym, m->symcache, mods, p->nmods) < 0)
                memset(q->sym, 0, sizeof *q->sym);
            q->sym_nmods = p->nmods;
        }
        free(mods);
    }
    struct ms_symbolizer none = {0};
    site_text(p, q->sym ? q->sym : &none, stack_id, out, len);
}

/* The forecast by step of process p's host live bytes (dev < 0) or device dev's against limit,
 * when the program marked at least MONITOR_MIN_STEPS steps: the peak of each kept step
 * (ms_follow_step_peak) fitted by ms_forecast_steps. Returns 1 and fills the results, or 0 (no
 * steps: the caller's time forecast stands). */
static int step_forecast(const struct ms_follow_proc *p, int dev, double limit, uint64_t now_ns,
                         int *why, double *eta_s, struct ms_fit *fit, double *eta_step,
                         double *sec_per_step)
{
    if (p->step < MONITOR_MIN_STEPS)
        return 0;
    double x[MS_FOLLOW_STEP_RING], y[MS_FOLLOW_STEP_RING], t[MS_FOLLOW_STEP_RING];
    uint64_t from = p->step > MS_FOLLOW_STEP_RING ? p->step - MS_FOLLOW_STEP_RING + 1 : 1;
    const struct ms_follow_step_peak *first = NULL;
    int n = 0;
    for (uint64_t k = from; k <= p->step; k++) {
        const struct ms_follow_step_peak *sp = ms_follow_step_peak(p, k);
        if (!sp)
            continue; /* not kept (out of memory then) */
        if (!first)
            first = sp;
        x[n] = (double)k;
        y[n] = (double)(dev < 0 ? sp->host : sp->dev[dev]);
        t[n] = (double)(int64_t)(sp->ns - first->ns) / 1e9;
        n++;
    }
    if (n < MONITOR_MIN_STEPS || !first)
        return 0;
    struct ms_step_forecast f;
    double now_s = (double)(int64_t)(now_ns - first->ns) / 1e9;
    ms_forecast_steps(x, y, t, n, limit, now_s, &f);
    int64_t cur = dev < 0 ? p->step_host_hw : p->step_dev_hw[dev]; /* the step under way */
    *why = (double)cur >= limit ? MS_LIMIT_REACHED : f.s.status;
    *eta_s = *why == MS_LIMIT_REACHED ? 0 : f.eta_s;
    *fit = f.s.fit;
    *eta_step = f.s.status == MS_LIMIT_PREDICTED ? f.s.at : -1;
    *sec_per_step = f.sec_per_step;
    return 1;
}

/* The pools' lines of the report: reserved against allocated, the free bytes, the largest free
 * block and the fragmentation (fragmentation.c's rule: ms_pool_free_extents). */
static void report_pools(FILE *fp, const struct ms_follow_proc *p)
{
    if (!p->npools)
        return;
    fprintf(fp, "\npools (reserved, allocated, free, largest free block, fragmentation):\n");
    for (size_t k = 0; k < p->npools; k++) {
        const struct ms_follow_pool *pl = &p->pools[k];
        long long fr = 0, big = 0;
        char r[32], u[32], f[32], b[32];
        monitor_bytes((double)pl->reserved_bytes, r, sizeof r);
        monitor_bytes((double)pl->used_bytes, u, sizeof u);
        if (ms_pool_free_extents(&pl->used, &pl->regions, &fr, &big) < 0) {
            fprintf(fp, "  %-16s reserved %s, allocated %s (free extents: out of memory)\n",
                    ms_term_text(pl->name), r, u);
            continue;
        }
        monitor_bytes((double)fr, f, sizeof f);
        monitor_bytes((double)big, b, sizeof b);
        fprintf(fp,
                "  %-16s reserved %s (%lld B), allocated %s (%lld B), free %s (%lld B), largest "
                "free block %s (%lld B), fragmentation %.1f%%\n",
                ms_term_text(pl->name), r, (long long)pl->reserved_bytes, u,
                (long long)pl->used_bytes, f, fr, b, big,
                fr ? 100.0 * (double)(fr - big) / (double)fr : 0.0);
    }
}

/* The report's call sites growing fastest over the growth window (ms_follow_mark_sites). */
static void report_growing(struct monitor *m, size_t i, FILE *fp)
{
    struct ms_follow_proc *p = &m->f.procs[i];
    const struct monitor_proc *q = &m->mp[i];
    struct ms_follow_stack_live top[WARN_SITES];
    size_t n = ms_follow_top_growing(p, top, WARN_SITES);
    double span = m->now_ns > q->mark_ns[0] ? (double)(m->now_ns - q->mark_ns[0]) / 1e9 : 0;
    fprintf(fp, "\ncall sites growing fastest (over the last %.0f s):\n", span);
    for (size_t k = 0; k < n; k++) {
        char site[512], grow[32], held[32];
        monitor_site_text(m, i, top[k].stack_id, site, sizeof site);
        monitor_bytes(span > 0 ? (double)top[k].growth / span : 0, grow, sizeof grow);
        monitor_bytes((double)top[k].live, held, sizeof held);
        fprintf(fp, "  %zu. +%s/s by %s (%s live there)\n", k + 1, grow, site, held);
    }
    if (!n)
        fprintf(fp, "  (none)\n");
}

/* The warning: one line on stderr, and the report of what holds the memory. */
static void warn(struct monitor *m, size_t i)
{
    struct ms_follow_proc *p = &m->f.procs[i];
    struct monitor_proc *q = &m->mp[i];
    struct ms_follow_stack_live top[WARN_SITES];
    size_t nt = ms_follow_top_stacks(p, top, WARN_SITES);
    char sites[WARN_SITES][512];
    for (size_t k = 0; k < nt; k++)
        monitor_site_text(m, i, top[k].stack_id, sites[k], sizeof sites[k]);
    char lim[32], live[32], rate[32], held[32];
    monitor_bytes(q->limit, lim, sizeof lim);
    monitor_bytes((double)p->host_live, live, sizeof live);
    monitor_bytes(q->growth_s, rate, sizeof rate);
    static const char *const from[] = {"--limit", "the cgroup's memory.max", "MemAvailable"};
    char rank[48] = "";
    if (q->rank[0])
        snprintf(rank, sizeof rank, " (rank %s)", q->rank);
    char report[4096 + 64] = "";
    if (m->o.report_dir) {
        snprintf(report, sizeof report, "%s/memscope-oom-warning-%" PRIu64 ".txt", m->o.report_dir,
                 p->pid);
        struct ms_output out;
        FILE *fp = NULL;
        if (ms_output_open(&out, report) == 0 && !(fp = fdopen(out.fd, "w")))
            ms_output_abort(&out);
        if (fp) {
            fprintf(fp, "memscope: out-of-memory warning for process %" PRIu64 "%s %s\n", p->pid,
                    rank, p->exe);
            fprintf(fp, "limit: %s (%s)\n", lim, from[q->limit_from]);
            char peak[32];
            monitor_bytes((double)p->host_peak, peak, sizeof peak);
            fprintf(fp, "live now: %s (heap and mmap); peak %s\n", live, peak);
            char per[32];
            monitor_bytes(q->fit.slope, per, sizeof per);
            if (q->why == MS_LIMIT_REACHED)
                fprintf(fp, "the limit is reached\n");
            else if (q->by_step)
                fprintf(fp,
                        "growth: %s per step (the peak of each of the last %d steps, R^2 %.3f; "
                        "%.3f s a step: %s/s); the limit in about %.0f s\n",
                        per, q->fit.n, q->fit.r2, q->sec_per_step, rate, q->eta_s);
            else
                fprintf(fp,
                        "growth: %s/s over the last %d s (R^2 %.3f); the limit in about %.0f s\n",
                        rate, q->fit.n, q->fit.r2, q->eta_s);
            if (p->step)
                fprintf(fp, "step: %" PRIu64 " now%s", p->step, q->eta_step >= 0 ? "" : "\n");
            if (p->step && q->eta_step >= 0)
                fprintf(fp, "; the limit at about step %.0f\n", q->eta_step);
            fprintf(fp, "\nowners (live bytes):\n");
            for (int c = 0; c < MS_OWNER_COUNT; c++) {
                monitor_bytes((double)p->owner_live[c], held, sizeof held);
                fprintf(fp, "  %-16s %s\n", ms_follow_owner_name(c), held);
            }
            fprintf(fp, "\ncall sites holding the most live bytes:\n");
            for (size_t k = 0; k < nt; k++) {
                monitor_bytes((double)top[k].live, held, sizeof held);
                fprintf(fp, "  %zu. %s by %s (%" PRIu64 " allocations there)\n", k + 1, held,
                        sites[k], top[k].allocs);
            }
            if (!nt)
                fprintf(fp, "  (none)\n");
            report_growing(m, i, fp);
            report_pools(fp, p);
            int bad = ferror(fp);
            fp = (fclose(fp), NULL);
            out.fd = -1;
            if (bad || ms_output_commit(&out) < 0)
                report[0] = 0;
        } else
            report[0] = 0;
    }
    char held0[32] = "", at_step[48] = "";
    if (q->eta_step >= 0)
        snprintf(at_step, sizeof at_step, ", at about step %.0f", q->eta_step);
    if (nt)
        monitor_bytes((double)top[0].live, held0, sizeof held0);
    if (q->why == MS_LIMIT_REACHED)
        snprintf(m->last_warning, sizeof m->last_warning,
                 "warning: process %" PRIu64 "%s has reached its limit of %s (live %s); most "
                 "held by %.300s: %s",
                 p->pid, rank, lim, live, nt ? sites[0] : "(no stack)", held0);
    else
        snprintf(m->last_warning, sizeof m->last_warning,
                 "warning: process %" PRIu64 "%s reaches its limit of %s in about %.0f s%s (live "
                 "%s, growing %s/s); most held by %.300s: %s",
                 p->pid, rank, lim, q->eta_s, at_step, live, rate, nt ? sites[0] : "(no stack)",
                 held0);
    if (report[0])
        cli_error("%s; report: %s", m->last_warning, report);
    else
        cli_error("%s", m->last_warning);
    m->warnings++;
}

/* Each device of process i against its total: the forecast, and a warning line once. */
static void forecast_devices(struct monitor *m, size_t i, uint64_t now_ns)
{
    struct ms_follow_proc *p = &m->f.procs[i];
    struct monitor_proc *q = &m->mp[i];
    for (int d = 0; d < MS_FOLLOW_MAX_DEVICES; d++) {
        if (!p->layer[MS_FOLLOW_DEVICE0 + d].allocs)
            continue;
        if (!q->dev[d] && !(q->dev[d] = calloc(1, sizeof *q->dev[d])))
            continue;
        struct monitor_dev *v = q->dev[d];
        ms_forecast_add(&v->fc, now_ns, p->dev_hw[d]);
        p->dev_hw[d] = p->layer[MS_FOLLOW_DEVICE0 + d].live;
        v->limit = (p->dev_seen & (1u << d)) ? (double)p->dev_total[d] : 0;
        if (!v->limit)
            continue;
        v->why = ms_forecast_eta(&v->fc, v->limit, now_ns, &v->eta_s, &v->fit);
        v->growth_s = v->fit.slope;
        double at_step, pace;
        v->by_step = step_forecast(p, d, v->limit, q->gone && p->last_ns ? p->last_ns : now_ns,
                                   &v->why, &v->eta_s, &v->fit, &at_step, &pace);
        if (v->by_step)
            v->growth_s = pace > 0 ? v->fit.slope / pace : 0;
        if (m->o.warn_before > 0 && !v->warned &&
            (v->why == MS_LIMIT_REACHED ||
             (v->why == MS_LIMIT_PREDICTED && v->eta_s < m->o.warn_before))) {
            v->warned = 1;
            struct ms_follow_stack_live top;
            char site[512] = "(no stack)", lim[32], live[32], rate[32];
            if (ms_follow_top_stacks(p, &top, 1))
                monitor_site_text(m, i, top.stack_id, site, sizeof site);
            monitor_bytes(v->limit, lim, sizeof lim);
            monitor_bytes((double)p->layer[MS_FOLLOW_DEVICE0 + d].live, live, sizeof live);
            monitor_bytes(v->growth_s, rate, sizeof rate);
            cli_error("warning: process %" PRIu64 "%s%s reaches the %s of cuda:%d in about %.0f s "
                      "(live %s there, growing %s/s); most held by %.300s",
                      p->pid, q->rank[0] ? " rank " : "", q->rank, lim, d, v->eta_s, live, rate,
                      site);
            m->warnings++;
        }
    }
}

int monitor_tick(struct monitor *m, uint64_t now_ns)
{
    int ended = __atomic_load_n(&m->ended, __ATOMIC_ACQUIRE);
    long rc = ms_follow_poll(&m->f, ended ? UINT64_MAX : now_ns - MONITOR_GRACE_NS);
    m->now_ns = now_ns;
    m->ticks++;
    if (m->f.nprocs > m->amp) {
        size_t n = m->f.nprocs + 16;
        struct monitor_proc *mp = realloc(m->mp, n * sizeof *mp);
        if (!mp)
            return MS_ENOMEM;
        memset(mp + m->amp, 0, (n - m->amp) * sizeof *mp);
        m->mp = mp;
        m->amp = n;
    }
    uint64_t avail = 0;
    size_t gone = 0;
    for (size_t i = 0; i < m->f.nprocs; i++) {
        struct ms_follow_proc *p = &m->f.procs[i];
        struct monitor_proc *q = &m->mp[i];
        pid_t pid = (pid_t)p->pid;
        if (!q->rank_read) {
            q->rank_read = 1;
            if (m->o.rank)
                snprintf(q->rank, sizeof q->rank, "%s", m->o.rank);
            else
                read_rank(pid, q->rank, sizeof q->rank);
        }
        if (!q->gone && now_ns - q->usage_ns >= 1000000000u) { /* once a second */
            q->usage_ns = now_ns;
            if (!q->cg_found)
                q->cg_found = ms_usage_cgroup_find(pid, &q->cg) == 0 ? 1 : -1;
            struct ms_usage_sample s;
            int u =
                ms_usage_read_paced(pid, q->cg_found > 0 ? &q->cg : NULL, &q->next_smaps_ns, &s);
            if (u == 0) {
                if (!(s.flags & MS_USAGE_F_SMAPS) && q->have_usage) { /* keep the last PSS/USS */
                    s.pss = q->usage.pss;
                    s.uss = q->usage.uss;
                    s.flags |= q->usage.flags & MS_USAGE_F_SMAPS;
                }
                q->usage = s;
                q->have_usage = 1;
            } else if (u == -ESRCH || u == -ENOENT) {
                q->gone = 1, q->gone_ns = now_ns;
                /* its files: read once more, then closed; not for a process never seen alive
                 * unless it is memscope run's (a directory shared with another pid namespace
                 * names pids that are not this one's) */
                if (q->have_usage || m->o.own_processes)
                    ms_follow_retire(&m->f, p->pid);
            }
        }
        gone += q->gone != 0;
        /* the call sites' growth window: their live bytes marked every half window */
        uint64_t half =
            (m->o.growth_window_ns ? m->o.growth_window_ns : MONITOR_GROWTH_WINDOW_NS) / 2;
        if (p->first_ns && !q->mark_ns[1])
            q->mark_ns[0] = q->mark_ns[1] = p->first_ns; /* nothing was live before */
        if (p->first_ns && !q->gone && now_ns >= q->mark_ns[1] + half) {
            ms_follow_mark_sites(p);
            q->mark_ns[0] = q->mark_ns[1];
            q->mark_ns[1] = now_ns;
        }
        if (!p->first_ns || (q->gone && q->fc.started))
            continue; /* nothing yet, or over: the last forecast stays (one is made for a process
                         found ended at once: memscope monitor --once) */
        if (!q->fc.started) {
            q->step0 = p->step;
            q->step0_ns = now_ns;
        }
        ms_forecast_add(&q->fc, now_ns, p->host_hw);
        p->host_hw = p->host_live;
        if (!q->rate_prev_ns || now_ns - q->rate_prev_ns >= 1000000000u) {
            if (q->rate_prev_ns)
                q->rate = (double)(p->host_live - q->rate_prev) * 1e9 /
                          (double)(now_ns - q->rate_prev_ns);
            q->rate_prev = p->host_live;
            q->rate_prev_ns = now_ns;
        }
        if (m->o.limit) {
            q->limit = (double)m->o.limit;
            q->limit_from = 0;
        } else if (q->have_usage && (q->usage.flags & MS_USAGE_F_CG_MAX)) {
            q->limit = (double)q->usage.cg_max;
            q->limit_from = 1;
        } else {
            if (!avail)
                avail = mem_available();
            q->limit = (double)p->host_live + (double)avail;
            q->limit_from = 2;
        }
        /* a process found ended: the forecast as of its last event */
        uint64_t at_ns = q->gone && p->last_ns ? p->last_ns : now_ns;
        q->by_step = step_forecast(p, -1, q->limit, at_ns, &q->why, &q->eta_s, &q->fit,
                                   &q->eta_step, &q->sec_per_step);
        if (q->by_step) {
            q->growth_s = q->sec_per_step > 0 ? q->fit.slope / q->sec_per_step : 0;
        } else {
            q->why = ms_forecast_eta(&q->fc, q->limit, now_ns, &q->eta_s, &q->fit);
            q->growth_s = q->fit.slope;
            /* the step then, at the rate the steps went since the first sample */
            q->eta_step = -1;
            if (q->why == MS_LIMIT_PREDICTED && p->step > q->step0 && now_ns > q->step0_ns)
                q->eta_step = (double)p->step + q->eta_s * (double)(p->step - q->step0) * 1e9 /
                                                    (double)(now_ns - q->step0_ns);
        }
        forecast_devices(m, i, now_ns);
        if (m->o.warn_before > 0 && !q->warned &&
            (q->why == MS_LIMIT_REACHED ||
             (q->why == MS_LIMIT_PREDICTED && q->eta_s < m->o.warn_before))) {
            q->warned = 1;
            warn(m, i);
        }
    }
    if (m->f.nprocs && gone == m->f.nprocs)
        __atomic_store_n(&m->all_gone, 1, __ATOMIC_RELEASE);
    return rc < 0 ? (int)rc : 0;
}

static int render_cb(void *ctx, char **body, size_t *len)
{
    return metrics_render(ctx, body, len);
}

static void *monitor_thread(void *arg)
{
    struct monitor *m = arg;
    uint64_t next = 0;
    int final_done = 0;
    for (;;) {
        uint64_t now = monitor_now_ns();
        int stop = __atomic_load_n(&m->stop, __ATOMIC_ACQUIRE);
        if (now >= next || (stop && !final_done)) {
            int ended = __atomic_load_n(&m->ended, __ATOMIC_ACQUIRE);
            if (!final_done) {
                if (monitor_tick(m, now) < 0)
                    cli_log(2, "the live monitor ran out of memory: its figures may miss events");
                final_done = ended;
            }
            next = now + MONITOR_TICK_NS;
        }
        if (stop)
            break;
        int ms = (int)((next > now ? next - now : 0) / 1000000u) + 1;
        if (m->lfd >= 0) {
            struct pollfd pf = {.fd = m->lfd, .events = POLLIN};
            if (poll(&pf, 1, ms) > 0 && mhttp_serve_one(m->lfd, render_cb, m) == 1)
                m->scrapes++;
        } else {
            struct timespec ts = {0, (long)ms * 1000000};
            nanosleep(&ts, NULL);
        }
    }
    struct timespec cpu;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) == 0)
        m->cpu_ns = (uint64_t)cpu.tv_sec * 1000000000u + (uint64_t)cpu.tv_nsec;
    return NULL;
}

int monitor_start(struct monitor *m)
{
    int rc = pthread_create(&m->thread, NULL, monitor_thread, m);
    if (rc)
        return -rc;
    m->started = 1;
    if (m->lfd >= 0 && !m->o.quiet)
        cli_log(1, "serving metrics on http://%s/metrics", m->bound);
    return 0;
}

void monitor_programs_ended(struct monitor *m)
{
    __atomic_store_n(&m->ended, 1, __ATOMIC_RELEASE);
}

void monitor_stop(struct monitor *m)
{
    if (!m || !m->started)
        return;
    __atomic_store_n(&m->stop, 1, __ATOMIC_RELEASE);
    pthread_join(m->thread, NULL);
    m->started = 0;
    cli_log(0, "live monitor: %" PRIu64 " ticks, %" PRIu64 " scrapes, %.1f ms of CPU", m->ticks,
            m->scrapes, m->cpu_ns / 1e6);
}

void monitor_release(struct monitor *m)
{
    if (!m)
        return;
    monitor_stop(m);
    if (m->lfd >= 0)
        close(m->lfd);
    m->lfd = -1;
    for (size_t i = 0; i < m->amp && m->mp; i++) {
        for (int d = 0; d < MS_FOLLOW_MAX_DEVICES; d++)
            free(m->mp[i].dev[d]);
        if (m->mp[i].sym) {
            ms_symbolizer_release(m->mp[i].sym);
            free(m->mp[i].sym);
        }
    }
    if (m->symcache) {
        ms_symcache_release(m->symcache);
        free(m->symcache);
        m->symcache = NULL;
    }
    ms_follow_release(&m->f);
    free(m->mp);
    m->mp = NULL;
    m->amp = 0;
}

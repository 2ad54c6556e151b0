/* monitor.h: the live monitor (docs/monitor.md): a thread of the memscope process that follows a
 * trace directory as it grows (trace/follow.h), samples each traced process's usage from /proc
 * (common/usage.h), forecasts when each one's live bytes reach the limit (common/forecast.h),
 * warns once when that is nearer than --warn-before, and serves the figures as Prometheus metrics
 * (metrics.c, metrics_http.h). Used by `memscope run --metrics` (and --warn-before / --limit),
 * `memscope monitor` and `memscope top`. The traced programs run nothing for it. */
#ifndef MS_CLI_MONITOR_H
#define MS_CLI_MONITOR_H

#include "common/forecast.h"
#include "common/usage.h"
#include "trace/follow.h"
#include "store/symbolize.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define MONITOR_TICK_NS 250000000ull  /* between polls of the trace */
#define MONITOR_GRACE_NS 200000000ull /* events younger than this wait for other threads' */
/* An ended process's series are served this long after its end, then dropped (a program that
 * starts thousands of short processes must not grow /metrics without bound). */
#define MONITOR_KEEP_ENDED_NS (300ull * 1000000000u)
/* The forecast is by step once this many steps were marked (docs/monitor.md, "The forecast"). */
#define MONITOR_MIN_STEPS 4
/* The call sites' growth is measured over the last one to two of these windows (their live bytes
 * marked at each one's end: ms_follow_mark_sites); `top --window` sets its own. */
#define MONITOR_GROWTH_WINDOW_NS (10ull * 1000000000u)

struct monitor_opts {
    const char *trace_dir;
    const char *listen;        /* HOST:PORT to serve /metrics on, or NULL */
    const char *rank;          /* --rank; NULL: each process's RANK (its environment), if any */
    uint64_t limit;            /* --limit in bytes; 0: the cgroup's limit, else MemAvailable */
    double warn_before;        /* --warn-before seconds (0: no warning) */
    const char *report_dir;    /* where the warning's report is written; NULL: not written */
    int quiet;                 /* no "serving metrics on" line */
    int own_processes;         /* the traced processes are memscope run's (this pid namespace) */
    uint64_t growth_window_ns; /* 0: MONITOR_GROWTH_WINDOW_NS */
};

/* The forecast of one CUDA device's live bytes against its total (NVML's, from the trace). */
struct monitor_dev {
    struct ms_forecast fc;
    struct ms_fit fit;
    double eta_s, limit; /* limit 0: the total is not known (no NVML report yet) */
    int why, warned;
    int by_step;     /* fit is of the steps' peaks (bytes per step), else of seconds */
    double growth_s; /* the fitted growth in bytes per second */
};

/* What the monitor keeps per followed process beside the follower's figures. */
struct monitor_proc {
    struct ms_usage_sample usage; /* the last sample (valid when have_usage) */
    int have_usage, gone, cg_found;
    uint64_t gone_ns; /* when it was seen ended */
    struct ms_usage_cgroup cg;
    uint64_t next_smaps_ns, usage_ns; /* usage_ns: the last /proc read */
    struct ms_forecast fc;
    double eta_s;   /* -1: no prediction */
    int why;        /* MS_LIMIT_* */
    double limit;   /* the capacity forecast against, bytes */
    int limit_from; /* 0 --limit, 1 cgroup, 2 MemAvailable */
    struct ms_fit fit;
    int warned;
    uint64_t step0, step0_ns; /* the step and time of the first forecast sample */
    double eta_step;          /* the step at which the limit is reached, -1 when unknown */
    int by_step;              /* fit is of the steps' peaks (bytes per step), else of seconds */
    double growth_s;          /* the fitted growth in bytes per second */
    double sec_per_step;      /* by_step: the steps' fitted pace */
    uint64_t mark_ns[2];      /* when the sites' live bytes were marked (ms_follow_mark_sites) */
    struct monitor_dev *dev[MS_FOLLOW_MAX_DEVICES]; /* devices the process allocated on */
    char rank[32];                                  /* "" when unknown */
    int rank_read;
    struct ms_symbolizer *sym; /* monitor_site_text's, built over sym_nmods modules */
    size_t sym_nmods;
    double rate; /* bytes per second over the last second */
    int64_t rate_prev;
    uint64_t rate_prev_ns;
};

struct monitor {
    struct monitor_opts o;
    struct ms_follow f;
    struct monitor_proc *mp;
    size_t amp;
    int lfd; /* listening socket, -1 without --metrics */
    char bound[300];
    char host[256], pod[128], ns[128];
    pthread_t thread;
    int started;
    int stop;     /* atomic: the thread ends */
    int ended;    /* atomic: the programs ended; the next tick reads everything */
    int all_gone; /* atomic: processes were seen, and every one has ended */
    uint64_t ticks, scrapes, cpu_ns, warnings;
    uint64_t now_ns; /* the last tick's time */
    char last_warning[1024];
    struct ms_symcache *symcache; /* the ELF files read for monitor_site_text */
};

/* Opens the trace directory and the listening socket (when o->listen). Returns 0, or -1 with a
 * one-line reason in err (not a directory, the port in use, a malformed address). */
int monitor_open(struct monitor *m, const struct monitor_opts *o, char *err, size_t errlen);

/* Starts the thread: a tick every MONITOR_TICK_NS, /metrics served between ticks. 0 or -errno. */
int monitor_start(struct monitor *m);

/* Says the traced programs ended: the next tick reads and applies every committed event. */
void monitor_programs_ended(struct monitor *m);

/* One tick, on the caller's thread (the thread's, or `top`'s loop): poll, sample, forecast,
 * warn. Returns 0 or MS_ENOMEM. */
int monitor_tick(struct monitor *m, uint64_t now_ns);

/* The call site of stack stack_id of process i (m->f.procs[i]) as the analyses name sites
 * ("function (file:line)"), symbolized with libdw (the files read once per monitor). */
void monitor_site_text(struct monitor *m, size_t i, uint32_t stack_id, char *out, size_t len);

/* Stops the thread after its last tick (the last values are served until then); nothing when
 * it is not running. A process must not fork while the thread runs (the child could find an
 * allocator lock held for ever): `memscope run` stops it before the conversion's fork. */
void monitor_stop(struct monitor *m);

/* Stops the thread (monitor_stop), closes the socket, frees. Accepts a monitor that was never
 * opened (zeroed). */
void monitor_release(struct monitor *m);

/* metrics.c: the Prometheus text exposition (format 0.0.4) of m's figures into a buffer the
 * caller frees with free(). Returns 0 or MS_ENOMEM. */
int metrics_render(struct monitor *m, char **body, size_t *len);

/* Writes n bytes as "12.3 MiB" into out. */
void monitor_bytes(double n, char *out, size_t len);

uint64_t monitor_now_ns(void);

#endif

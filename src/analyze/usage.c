/* usage.c: `memscope analyze usage`: what the OS said each process used (the usage monitor's
 * samples, usage_samples) beside what memscope recorded live, and what that says: memory the
 * allocator keeps after it was freed (allocator_retention), a deep main-thread stack (stack),
 * shared memory that no allocation shows (shared_memory). Definitions and thresholds are in
 * docs/usage.md; the rule of each finding is the one place below (find_*).
 *
 * Computed first (one struct per process image, from SQL over usage_samples and
 * process_stats), then rendered as text or JSON. Reads a compact database as it is. Workload:
 * ten samples a second per process: thousands of rows. */
#include "analyze.h"
#include "common/db_ids.h"

#include "common/grow.h"
#include "common/ms_error.h"
#include "common/term_text.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PROCS 100000

/* The layers whose live bytes the samples carry (convert_usage.c): heap and mmap. */
#define SQL_LIVE_LAYERS "1, 2"
_Static_assert(MS_LAYER_HEAP == 1 && MS_LAYER_MMAP == 2, "SQL_LIVE_LAYERS names them");

/* Thresholds of the findings (docs/usage.md, "Findings"). */
#define RETENTION_MIN (32ll << 20) /* retained bytes ... */
#define STACK_MIN (4ll << 20)      /* a main-thread stack of 4 MiB: half of the usual 8 MiB */
#define SHMEM_MIN (16ll << 20)     /* resident shared memory */
#define COW_MIN (8ll << 20)        /* a forked process's copies of its parent's blocks */
#define COW_SITES 5                /* call sites reported per forked process */
#define DEVICE_MIN (32ll << 20)    /* device memory NVML reports that no hooked call explains */
#define MAX_DEVICES 64

/* One CUDA device of a process, from what NVML reported at the agent's steps and exit
 * (usage_devices): the largest share it listed, the device's capacity, and the most that no
 * hooked allocation explained, with the figures then. */
struct usage_device {
    int64_t device, peak_process_used, total, unattributed, una_used, una_hooked, una_ts;
};

struct cow_site {
    const char *site; /* interned by ms__sites_get: compared by pointer */
    int64_t bytes;
};

struct usage_proc {
    int64_t process_id, pid, samples;
    char *command;
    int64_t peak_rss_anon, peak_pss, peak_uss, peak_stack, peak_shmem, peak_live;
    int have_smaps;
    /* the sample of maximum retained bytes: anonymous RSS - live - stack */
    int64_t max_retained, retained_ts, retained_rss_anon, retained_live, retained_stack;
    /* copy-on-write (usage_cow): a forked image walked; its parent's pid, the fork's time,
     * its number among its parent's walked children ("worker N"), the bytes of its parent's
     * blocks in its private pages, and the top sites of those */
    int have_cow;
    int64_t cow_bytes, cow_parent_pid, cow_fork_ns, cow_worker;
    struct cow_site cow_sites[COW_SITES];
    size_t ncow_sites;
    struct usage_device *devices;
    size_t ndevices;
};

struct finding {
    const char *kind;
    int64_t pid, bytes;
    char message[2048];
};

struct usage_result {
    struct usage_proc *procs;
    size_t nprocs;
    struct finding *findings;
    size_t nfindings;
    int have_nvml; /* any usage_devices row: NVML was there */
};

static void result_release(struct usage_result *r)
{
    for (size_t i = 0; i < r->nprocs; i++) {
        free(r->procs[i].command);
        free(r->procs[i].devices);
    }
    free(r->procs);
    free(r->findings);
}

static int add_finding(struct usage_result *r, size_t *cap, const char *kind,
                       const struct usage_proc *p, int64_t bytes, const char *message)
{
    if (ms_grow((void **)&r->findings, cap, r->nfindings, sizeof *r->findings, 8, 3 * MAX_PROCS) <
        0)
        return MS_ENOMEM;
    struct finding *f = &r->findings[r->nfindings++];
    f->kind = kind;
    f->pid = p->pid;
    f->bytes = bytes;
    snprintf(f->message, sizeof f->message, "%s", message);
    return 0;
}

/* The findings of one process (docs/usage.md): each rule once, here. */
static int find(struct usage_result *r, size_t *cap, const struct usage_proc *p)
{
    char msg[2048], a[32], b[32], c[32];
    int rc = 0;
    if (p->max_retained >= RETENTION_MIN && p->max_retained >= p->retained_live) {
        ms_human_bytes(a, sizeof a, p->max_retained);
        ms_human_bytes(b, sizeof b, p->retained_rss_anon);
        ms_human_bytes(c, sizeof c, p->retained_live);
        snprintf(msg, sizeof msg,
                 "pid %" PRId64 " (%s): %s of its %s of anonymous memory was not explained by "
                 "live allocations (%s live in heap and mmap then) or its stack: the allocator "
                 "kept memory the program had freed. Try malloc_trim(0) after the phase that "
                 "frees (or a timer calling it), MALLOC_ARENA_MAX=2 when many threads allocate, "
                 "or another allocator (jemalloc, mimalloc, tcmalloc through LD_PRELOAD)",
                 p->pid, p->command, a, b, c);
        rc = add_finding(r, cap, "allocator_retention", p, p->max_retained, msg);
    }
    if (rc == 0 && p->peak_stack >= STACK_MIN) {
        ms_human_bytes(a, sizeof a, p->peak_stack);
        snprintf(msg, sizeof msg,
                 "pid %" PRId64 " (%s): the main thread's stack reached %s (deep recursion or "
                 "large local arrays); the usual limit is 8 MiB (ulimit -s), beyond which the "
                 "program dies of SIGSEGV. Make the recursion iterative, or move large locals "
                 "to the heap",
                 p->pid, p->command, a);
        rc = add_finding(r, cap, "stack", p, p->peak_stack, msg);
    }
    if (rc == 0 && p->peak_shmem >= SHMEM_MIN) {
        ms_human_bytes(a, sizeof a, p->peak_shmem);
        snprintf(msg, sizeof msg,
                 "pid %" PRId64 " (%s): %s of shared memory was resident in it (POSIX shared "
                 "memory, /dev/shm, memfd or shared anonymous mappings), which no allocation "
                 "shows. Unmap and shm_unlink objects no longer needed and look for leftovers in "
                 "/dev/shm; in a container /dev/shm's size (docker --shm-size) bounds it; "
                 "PyTorch's DataLoader workers pass tensors through it",
                 p->pid, p->command, a);
        rc = add_finding(r, cap, "shared_memory", p, p->peak_shmem, msg);
    }
    if (rc == 0 && p->have_cow && p->cow_bytes >= COW_MIN) {
        char sites[600] = "", one[200];
        size_t len = 0;
        for (size_t i = 0; i < p->ncow_sites && i < 3 && len < sizeof sites - 1; i++) {
            ms_human_bytes(a, sizeof a, p->cow_sites[i].bytes);
            snprintf(one, sizeof one, "%s%s in blocks allocated by %.120s", i ? ", " : ": ", a,
                     p->cow_sites[i].site);
            len += (size_t)snprintf(sites + len, sizeof sites - len, "%s", one);
        }
        ms_human_bytes(a, sizeof a, p->cow_bytes);
        snprintf(msg, sizeof msg,
                 "worker %" PRId64 " (pid %" PRId64 ", forked by pid %" PRId64 ") copied %s of "
                 "its parent's memory%s. A forked process shares its parent's pages until one "
                 "of them writes to a page, which then becomes a private copy: in Python merely "
                 "reading an object writes its reference count. Try keeping such data in a few "
                 "large buffers (numpy arrays, tensors, bytes) instead of many Python objects, "
                 "gc.freeze() before forking, loading the data in each worker, or shared memory",
                 p->cow_worker, p->pid, p->cow_parent_pid, a, sites);
        rc = add_finding(r, cap, "copy_on_write", p, p->cow_bytes, msg);
    }
    for (size_t i = 0; rc == 0 && i < p->ndevices; i++) {
        const struct usage_device *d = &p->devices[i];
        if (d->unattributed < DEVICE_MIN)
            continue;
        ms_human_bytes(a, sizeof a, d->unattributed);
        ms_human_bytes(b, sizeof b, d->una_used);
        ms_human_bytes(c, sizeof c, d->una_hooked);
        snprintf(msg, sizeof msg,
                 "pid %" PRId64 " (%s): NVML reported %s of CUDA device %" PRId64 " for it while "
                 "the CUDA calls memscope hooks had %s live there: %s that no recorded allocation "
                 "explains: the CUDA context and its modules (hundreds of MiB per device and "
                 "process), NCCL's buffers, cuBLAS/cuDNN workspaces, or memory allocated by a "
                 "path memscope does not hook. Try CUDA_MODULE_LOADING=LAZY (fewer kernels "
                 "loaded), one process per device, and NCCL_BUFFSIZE for NCCL's buffers",
                 p->pid, p->command, b, d->device, c, a);
        rc = add_finding(r, cap, "device_unattributed", p, d->unattributed, msg);
    }
    return rc;
}

/* p's devices (usage_devices): per device, the largest share NVML listed and the moment of the
 * most bytes no hooked allocation explained. */
static int load_devices(struct ms_actx *x, struct usage_proc *p)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(x->db,
                           "SELECT device, process_used, device_total, hooked_bytes, ts_ns "
                           "FROM usage_devices WHERE process_id = ?1 ORDER BY device, ts_ns",
                           -1, &st, NULL) != SQLITE_OK)
        return MS_EDB;
    sqlite3_bind_int64(st, 1, p->process_id);
    size_t cap = 0;
    int rc = 0, step;
    while (rc == 0 && (step = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t dev = sqlite3_column_int64(st, 0), used = sqlite3_column_int64(st, 1);
        int64_t total = sqlite3_column_int64(st, 2), hooked = sqlite3_column_int64(st, 3);
        struct usage_device *d = p->ndevices ? &p->devices[p->ndevices - 1] : NULL;
        if (!d || d->device != dev) {
            if (ms_grow((void **)&p->devices, &cap, p->ndevices, sizeof *p->devices, 4,
                        MAX_DEVICES) < 0) {
                rc = MS_ENOMEM;
                break;
            }
            d = &p->devices[p->ndevices++];
            memset(d, 0, sizeof *d);
            d->device = dev;
            d->unattributed = -1;
        }
        if (used > d->peak_process_used)
            d->peak_process_used = used;
        d->total = total;
        int64_t una = used > hooked ? used - hooked : 0;
        if (una >= d->unattributed) { /* the latest of equal ones */
            d->unattributed = una;
            d->una_used = used;
            d->una_hooked = hooked;
            d->una_ts = sqlite3_column_int64(st, 4);
        }
    }
    if (rc == 0 && step != SQLITE_DONE)
        rc = MS_EDB;
    sqlite3_finalize(st);
    return rc;
}

static int cmp_cow_site(const void *a, const void *b)
{
    const struct cow_site *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    return strcmp(x->site, y->site);
}

/* p's copy-on-write figures (usage_cow) and its top sites (usage_cow_stacks, by the call-site
 * rule of the parent's blocks' stacks). */
static int load_cow(struct ms_actx *x, struct usage_proc *p)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(x->db,
                           "SELECT c.cow_bytes, pp.pid, c.fork_ns, "
                           "(SELECT count(*) FROM usage_cow c2 WHERE c2.parent_id = c.parent_id "
                           " AND (c2.fork_ns < c.fork_ns OR (c2.fork_ns = c.fork_ns AND "
                           " c2.process_id <= c.process_id))) "
                           "FROM usage_cow c JOIN processes pp ON pp.id = c.parent_id "
                           "WHERE c.process_id = ?1",
                           -1, &st, NULL) != SQLITE_OK)
        return MS_EDB;
    sqlite3_bind_int64(st, 1, p->process_id);
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW) {
        p->have_cow = 1;
        p->cow_bytes = sqlite3_column_int64(st, 0);
        p->cow_parent_pid = sqlite3_column_int64(st, 1);
        p->cow_fork_ns = sqlite3_column_int64(st, 2);
        p->cow_worker = sqlite3_column_int64(st, 3);
    }
    sqlite3_finalize(st);
    if (step != SQLITE_ROW)
        return step == SQLITE_DONE ? 0 : MS_EDB;
    if (sqlite3_prepare_v2(x->db,
                           "SELECT stack_id, bytes FROM usage_cow_stacks WHERE process_id = ?1 "
                           "ORDER BY bytes DESC, stack_id",
                           -1, &st, NULL) != SQLITE_OK)
        return MS_EDB;
    sqlite3_bind_int64(st, 1, p->process_id);
    struct cow_site *v = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    while (rc == 0 && (step = sqlite3_step(st)) == SQLITE_ROW) {
        const char *site = ms__sites_get(&x->sites, sqlite3_column_int64(st, 0));
        if (!site) {
            rc = MS_ENOMEM;
            break;
        }
        size_t i = 0;
        while (i < n && v[i].site != site)
            i++;
        if (i == n) {
            if (ms_grow((void **)&v, &cap, n, sizeof *v, 16, MAX_PROCS) < 0) {
                rc = MS_ENOMEM;
                break;
            }
            v[n++] = (struct cow_site){site, 0};
        }
        v[i].bytes += sqlite3_column_int64(st, 1);
    }
    if (rc == 0 && step != SQLITE_DONE)
        rc = MS_EDB;
    sqlite3_finalize(st);
    if (rc == 0 && n) {
        qsort(v, n, sizeof *v, cmp_cow_site);
        p->ncow_sites = n < COW_SITES ? n : COW_SITES;
        memcpy(p->cow_sites, v, p->ncow_sites * sizeof *v);
    }
    free(v);
    return rc;
}

/* The processes NVML reported for that have no sample (a program shorter than the sampler's
 * first look): listed with 0 samples, for their devices. */
static int add_device_only(sqlite3 *db, struct usage_result *r)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db,
                           "SELECT DISTINCT d.process_id, p.pid, coalesce(p.cmdline, p.exe, '?') "
                           "FROM usage_devices d JOIN processes p ON p.id = d.process_id "
                           "WHERE d.process_id NOT IN (SELECT process_id FROM usage_samples "
                           "WHERE exited = 0 AND rss_anon IS NOT NULL) ORDER BY d.process_id",
                           -1, &st, NULL) != SQLITE_OK)
        return MS_EDB;
    size_t cap = r->nprocs;
    int rc = 0, step;
    while (rc == 0 && (step = sqlite3_step(st)) == SQLITE_ROW) {
        if (ms_grow((void **)&r->procs, &cap, r->nprocs, sizeof *r->procs, 8, MAX_PROCS) < 0) {
            rc = MS_ENOMEM;
            break;
        }
        struct usage_proc *p = &r->procs[r->nprocs++];
        memset(p, 0, sizeof *p);
        p->process_id = sqlite3_column_int64(st, 0);
        p->pid = sqlite3_column_int64(st, 1);
        if (!(p->command = strdup((const char *)sqlite3_column_text(st, 2))))
            rc = MS_ENOMEM;
    }
    if (rc == 0 && step != SQLITE_DONE)
        rc = MS_EDB;
    sqlite3_finalize(st);
    return rc;
}

static int compute(struct ms_actx *x, struct usage_result *r)
{
    sqlite3 *db = x->db;
    sqlite3_stmt *st;
    /* one row per process image with samples; the sample of maximum retained bytes is found
     * by the second query */
    if (sqlite3_prepare_v2(
            db,
            "SELECT u.process_id, p.pid, coalesce(p.cmdline, p.exe, '?'), count(*), "
            "max(u.rss_anon), max(u.pss), max(u.uss), max(u.stack), max(u.rss_shmem), "
            "max(u.live_bytes), count(u.pss), "
            "(SELECT max(s.peak_bytes) FROM process_stats s WHERE s.process_id = u.process_id "
            " AND s.layer IN (" SQL_LIVE_LAYERS ")) "
            "FROM usage_samples u JOIN processes p ON p.id = u.process_id "
            "WHERE u.exited = 0 AND u.rss_anon IS NOT NULL GROUP BY u.process_id "
            "ORDER BY u.process_id",
            -1, &st, NULL) != SQLITE_OK)
        return MS_EDB;
    size_t cap = 0;
    int rc = 0, step = SQLITE_DONE;
    while (rc == 0 && (step = sqlite3_step(st)) == SQLITE_ROW) {
        if (ms_grow((void **)&r->procs, &cap, r->nprocs, sizeof *r->procs, 8, MAX_PROCS) < 0) {
            rc = MS_ENOMEM;
            break;
        }
        struct usage_proc *p = &r->procs[r->nprocs++];
        memset(p, 0, sizeof *p);
        p->process_id = sqlite3_column_int64(st, 0);
        p->pid = sqlite3_column_int64(st, 1);
        p->command = strdup((const char *)sqlite3_column_text(st, 2));
        if (!p->command)
            rc = MS_ENOMEM;
        p->samples = sqlite3_column_int64(st, 3);
        p->peak_rss_anon = sqlite3_column_int64(st, 4);
        p->peak_pss = sqlite3_column_int64(st, 5);
        p->peak_uss = sqlite3_column_int64(st, 6);
        p->peak_stack = sqlite3_column_int64(st, 7);
        p->peak_shmem = sqlite3_column_int64(st, 8);
        p->peak_live = sqlite3_column_int64(st, 9);
        p->have_smaps = sqlite3_column_int64(st, 10) > 0;
        int64_t recorded = sqlite3_column_int64(st, 11);
        if (recorded > p->peak_live)
            p->peak_live = recorded;
    }
    if (rc == 0 && step != SQLITE_DONE)
        rc = MS_EDB;
    sqlite3_finalize(st);
    if (rc < 0)
        return rc;
    if (sqlite3_prepare_v2(db,
                           "SELECT ts_ns, rss_anon, live_bytes, stack, "
                           "max(rss_anon - live_bytes - stack, 0) AS k FROM usage_samples "
                           "WHERE process_id = ?1 AND exited = 0 AND rss_anon IS NOT NULL "
                           "ORDER BY k DESC, ts_ns LIMIT 1",
                           -1, &st, NULL) != SQLITE_OK)
        return MS_EDB;
    for (size_t i = 0; i < r->nprocs && rc == 0; i++) {
        struct usage_proc *p = &r->procs[i];
        sqlite3_bind_int64(st, 1, p->process_id);
        if (sqlite3_step(st) == SQLITE_ROW) {
            p->retained_ts = sqlite3_column_int64(st, 0);
            p->retained_rss_anon = sqlite3_column_int64(st, 1);
            p->retained_live = sqlite3_column_int64(st, 2);
            p->retained_stack = sqlite3_column_int64(st, 3);
            p->max_retained = sqlite3_column_int64(st, 4);
        }
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    if (ms__has_column(db, "usage_cow", "cow_bytes"))
        for (size_t i = 0; i < r->nprocs && rc == 0; i++)
            rc = load_cow(x, &r->procs[i]);
    if (ms__has_column(db, "usage_devices", "hooked_bytes") && rc == 0)
        rc = add_device_only(db, r);
    if (ms__has_column(db, "usage_devices", "hooked_bytes"))
        for (size_t i = 0; i < r->nprocs && rc == 0; i++) {
            rc = load_devices(x, &r->procs[i]);
            r->have_nvml |= r->procs[i].ndevices > 0;
        }
    size_t fcap = 0;
    for (size_t i = 0; i < r->nprocs && rc == 0; i++)
        rc = find(r, &fcap, &r->procs[i]);
    return rc;
}

static void render_json(FILE *out, const struct usage_result *r, int64_t t0)
{
    struct ms_json j;
    ms_json_init(&j, out);
    ms_json_begin_object(&j, NULL);
    ms_json_begin_array(&j, "processes");
    for (size_t i = 0; i < r->nprocs; i++) {
        const struct usage_proc *p = &r->procs[i];
        ms_json_begin_object(&j, NULL);
        ms_json_int(&j, "pid", p->pid);
        ms_json_str(&j, "command", p->command);
        ms_json_int(&j, "samples", p->samples);
        ms_json_int(&j, "peak_rss_anon_bytes", p->peak_rss_anon);
        if (p->have_smaps) {
            ms_json_int(&j, "peak_pss_bytes", p->peak_pss);
            ms_json_int(&j, "peak_uss_bytes", p->peak_uss);
        } else {
            ms_json_null(&j, "peak_pss_bytes");
            ms_json_null(&j, "peak_uss_bytes");
        }
        ms_json_int(&j, "peak_stack_bytes", p->peak_stack);
        ms_json_int(&j, "peak_shmem_bytes", p->peak_shmem);
        ms_json_int(&j, "peak_live_bytes", p->peak_live);
        ms_json_int(&j, "max_retained_bytes", p->max_retained);
        ms_json_int(&j, "max_retained_live_bytes", p->retained_live);
        ms_json_int(&j, "max_retained_rss_anon_bytes", p->retained_rss_anon);
        ms_json_double(&j, "max_retained_at_s", (double)(p->retained_ts - t0) / 1e9);
        if (p->have_cow)
            ms_json_int(&j, "cow_private_bytes", p->cow_bytes);
        else
            ms_json_null(&j, "cow_private_bytes"); /* not a forked process, or not walked */
        ms_json_begin_array(&j, "cow_sites");
        for (size_t k = 0; k < p->ncow_sites; k++) {
            ms_json_begin_object(&j, NULL);
            ms_json_str(&j, "site", p->cow_sites[k].site);
            ms_json_int(&j, "bytes", p->cow_sites[k].bytes);
            ms_json_end_object(&j);
        }
        ms_json_end_array(&j);
        ms_json_begin_array(&j, "devices");
        for (size_t k = 0; k < p->ndevices; k++) {
            const struct usage_device *d = &p->devices[k];
            ms_json_begin_object(&j, NULL);
            ms_json_int(&j, "device", d->device);
            ms_json_int(&j, "peak_process_used_bytes", d->peak_process_used);
            ms_json_int(&j, "total_bytes", d->total);
            ms_json_int(&j, "max_unattributed_bytes", d->unattributed);
            ms_json_int(&j, "max_unattributed_hooked_bytes", d->una_hooked);
            ms_json_end_object(&j);
        }
        ms_json_end_array(&j);
        ms_json_end_object(&j);
    }
    ms_json_end_array(&j);
    if (!r->have_nvml)
        ms_json_str(&j, "devices",
                    "not sampled: no NVML figures (libnvidia-ml.so.1 absent, or "
                    "no process reached the CUDA driver)");
    ms_json_begin_array(&j, "findings");
    for (size_t i = 0; i < r->nfindings; i++) {
        const struct finding *f = &r->findings[i];
        ms_json_begin_object(&j, NULL);
        ms_json_str(&j, "kind", f->kind);
        ms_json_int(&j, "pid", f->pid);
        ms_json_int(&j, "bytes", f->bytes);
        ms_json_str(&j, "message", f->message);
        ms_json_end_object(&j);
    }
    ms_json_end_array(&j);
    ms_json_end_object(&j);
    ms_json_finish(&j);
}

static void render_text(FILE *out, const struct usage_result *r, int64_t t0)
{
    if (!r->nprocs) {
        fprintf(out, "no usage samples (memscope run samples every --usage-interval, 0.1 s by "
                     "default)\n");
        if (!r->have_nvml)
            fprintf(out, "device memory: not sampled (no NVML figures: libnvidia-ml.so.1 absent, "
                         "or no process reached the CUDA driver)\n");
        return;
    }
    fprintf(out, "%8s %8s %10s %10s %10s %10s %10s %10s %10s  %s\n", "pid", "samples", "rss anon",
            "pss", "uss", "stack", "shmem", "live", "retained", "command");
    for (size_t i = 0; i < r->nprocs; i++) {
        const struct usage_proc *p = &r->procs[i];
        char v[8][32];
        const int64_t x[8] = {p->peak_rss_anon, p->peak_pss,  p->peak_uss,     p->peak_stack,
                              p->peak_shmem,    p->peak_live, p->max_retained, 0};
        for (int k = 0; k < 7; k++)
            ms_human_bytes(v[k], sizeof v[k], x[k]);
        if (!p->have_smaps)
            snprintf(v[1], sizeof v[1], "-"), snprintf(v[2], sizeof v[2], "-");
        fprintf(out, "%8" PRId64 " %8" PRId64 " %10s %10s %10s %10s %10s %10s %10s  %.60s\n",
                p->pid, p->samples, v[0], v[1], v[2], v[3], v[4], v[5], v[6],
                ms_term_text(p->command));
    }
    fprintf(out, "(peaks over the samples; live: heap + mmap as recorded; retained: anonymous "
                 "RSS not explained by live bytes or the stack, at its worst)\n");
    for (size_t i = 0; i < r->nprocs; i++) {
        const struct usage_proc *p = &r->procs[i];
        if (p->max_retained) {
            char a[32], b[32];
            ms_human_bytes(a, sizeof a, p->max_retained);
            ms_human_bytes(b, sizeof b, p->retained_live);
            fprintf(out, "pid %" PRId64 ": most retained %s at %.3f s, with %s live then\n", p->pid,
                    a, (double)(p->retained_ts - t0) / 1e9, b);
        }
    }
    for (size_t i = 0; i < r->nprocs; i++) {
        const struct usage_proc *p = &r->procs[i];
        if (!p->have_cow)
            continue;
        char a[32];
        ms_human_bytes(a, sizeof a, p->cow_bytes);
        fprintf(out,
                "pid %" PRId64 ": forked by pid %" PRId64 " at %.3f s; copied %s of its "
                "parent's blocks\n",
                p->pid, p->cow_parent_pid, (double)(p->cow_fork_ns - t0) / 1e9, a);
        for (size_t k = 0; k < p->ncow_sites; k++) {
            ms_human_bytes(a, sizeof a, p->cow_sites[k].bytes);
            fprintf(out, "    %10s  %s\n", a, p->cow_sites[k].site);
        }
    }
    for (size_t i = 0; i < r->nprocs; i++) {
        const struct usage_proc *p = &r->procs[i];
        for (size_t k = 0; k < p->ndevices; k++) {
            const struct usage_device *d = &p->devices[k];
            char a[32], b[32], c[32];
            ms_human_bytes(a, sizeof a, d->peak_process_used);
            ms_human_bytes(b, sizeof b, d->total);
            ms_human_bytes(c, sizeof c, d->unattributed);
            fprintf(out,
                    "pid %" PRId64 ": CUDA device %" PRId64 ": NVML listed up to %s of %s for "
                    "it; at most %s not explained by hooked allocations\n",
                    p->pid, d->device, a, b, c);
        }
    }
    if (!r->have_nvml)
        fprintf(out, "device memory: not sampled (no NVML figures: libnvidia-ml.so.1 absent, or "
                     "no process reached the CUDA driver)\n");
    if (!r->nfindings)
        fprintf(out, "no findings\n");
    for (size_t i = 0; i < r->nfindings; i++)
        fprintf(out, "%s: %s\n", r->findings[i].kind, ms_term_text(r->findings[i].message));
}

int ms_analyze_usage(struct ms_actx *x)
{
    struct usage_result r = {0};
    int rc = 0;
    if (ms__has_column(x->db, "usage_samples", "rss_anon"))
        rc = compute(x, &r);
    if (rc == 0) {
        int64_t t0 = ms__run_start_ns(x->db);
        if (x->o->json)
            render_json(x->out, &r, t0);
        else
            render_text(x->out, &r, t0);
    } else if (rc == MS_ENOMEM) {
        rc = ms__actx_oom(x);
    } else {
        rc = ms__actx_db_fail(x, "cannot read the usage samples");
    }
    result_release(&r);
    return rc;
}

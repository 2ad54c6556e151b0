/* cmd_analyze.c: `memscope analyze <kind>|all DB [options]`: parses the options into
 * struct ms_analyze_opts and hands over to ms_analyze_run_list (src/analyze/run_list.c).
 * Exit status: 0 ok, 1 failure (database missing or unreadable, an analysis failed), 2 usage
 * error (bad option or value, unknown analysis, unknown layer, bad step numbers). */
#include "cli.h"

#include "analyze/analyze.h"
#include "analyze/budget.h"
#include "common/ms_error.h"
#include "common/files.h"
#include "common/size.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static const char analyze_usage[] =
    "usage: memscope analyze <analysis>[,<analysis>...]|all run.db [options]\n"
    "\n"
    "Analyses:\n"
    "%s"
    "  all              every analysis above, in one report\n"
    "\n"
    "Options:\n"
    "  --json              a JSON document instead of text (keys: docs/analyses.md)\n"
    "  -o, --output=FILE   write the report to FILE instead of stdout\n"
    "  --top=N             rows per ranking (default 10)\n"
    "  --site=user|innermost\n"
    "                      a Python call site: the innermost frame of the program's own\n"
    "                      code (user, default) or the innermost frame (never memscope's)\n"
    "  --site-skip=NAME[,NAME...]\n"
    "                      a native call site is never in these functions (the program's\n"
    "                      own allocation wrappers; NAME* for a prefix): their caller is.\n"
    "                      Also MEMSCOPE_SITE_SKIP; operator new, malloc, xmalloc, zmalloc,\n"
    "                      g_malloc, PyMem_* ... are built in (docs/analyses.md)\n"
    "  --layer=NAME        only this layer (heap, mmap, pool:NAME, ...; default: all memory)\n"
    "  --warmup=N          leaks, trend: steps <= N are warm-up (default 1)\n"
    "  --rule=growth|msmemscope\n"
    "                      leaks: a call site whose live bytes keep growing from step to\n"
    "                      step (growth, default), or msMemScope's step-aware check and\n"
    "                      console lines (msmemscope)\n"
    "  --steps=A,B         compare: two steps of this run\n"
    "  --with=OTHER.db     compare: against another run\n"
    "  --csv=FILE          compare: msMemScope's op-sequence compare CSV\n"
    "  compare BASE.db NEW.db [--layer=L] gates (docs/ci.md): exit 23 when NEW grew\n"
    "  --fail-if-peak-grows=PCT%%|BYTES\n"
    "                      compare: the highest peak of a process (heap+mmap, or L)\n"
    "  --fail-if-leak-grows=PCT%%|BYTES\n"
    "                      compare: the bytes live at exit (heap and mmap, or L)\n"
    "  --error-exitcode=N  compare: the status of a failed gate (default 23)\n"
    "  --limit=BYTES       trend: predict when live bytes reach BYTES (suffixes K, M, G, T)\n"
    "  --at=NS             decompose: at this time (epoch ns)\n"
    "  --step=N            decompose: at the end of step N\n"
    "  --by=owner|stack    decompose: split by owner (default) or by call stack\n"
    "                      (outermost frame first)\n"
    "  --idle-threshold=N  inefficient: API count for temporary idleness (default 3000)\n"
    "  --lazy-used=V, --delayed-free=V, --long-idle=V\n"
    "                      inefficient: Insight thresholds, V in ns or NN%% of the lifetime\n"
    "  --write-back        inefficient: also record findings in the database\n"
    "  --accessed-only     inefficient: only blocks with accesses (tensors) take part\n";

static void print_usage(FILE *f)
{
    char list[2048];
    size_t w = 0;
    for (const struct ms_analysis *a = ms_analyses; a->name && w < sizeof list; a++)
        if (a->run)
            w += (size_t)snprintf(list + w, sizeof list - w, "  %-16s %s\n", a->name, a->summary);
    fprintf(f, analyze_usage, list);
}

/* Parses a non-negative integer; 0 or -1. */
static int parse_u64(const char *s, uint64_t *v)
{
    if (!s || !*s || *s == '-' || *s == '+')
        return -1;
    errno = 0;
    char *end;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno || *end)
        return -1;
    *v = x;
    return 0;
}

static int parse_int(const char *s, int min, int *v)
{
    uint64_t x;
    if (parse_u64(s, &x) < 0 || x > INT_MAX || (int)x < min)
        return -1;
    *v = (int)x;
    return 0;
}

/* BYTES as every size memscope reads (common/size.h: K, KB, KiB ... powers of 1024), at least 1. */
static int parse_bytes(const char *s, uint64_t *v)
{
    return ms_size_parse(s, v) < 0 || *v < 1 ? -1 : 0;
}

/* VALUE in ns, or NN% of the lifetime. */
static int parse_threshold(const char *s, uint64_t *ns, double *pct)
{
    size_t len = s ? strlen(s) : 0;
    if (len > 1 && s[len - 1] == '%') {
        char *end;
        errno = 0;
        double p = strtod(s, &end);
        if (errno || end != s + len - 1 || p < 0 || p > 100)
            return -1;
        *pct = p;
        *ns = 0;
        return 0;
    }
    if (parse_u64(s, ns) < 0)
        return -1;
    *pct = 0;
    return 0;
}

int cli_resolve_layer(const char *cmd, const char *db_path, const char *name, int *layer)
{
    char err[512];
    sqlite3 *db;
    int rc = ms_analyze_open(db_path, 0, &db, err, sizeof err);
    if (rc < 0) {
        cli_error("%s: %s", cmd, err);
        return 1;
    }
    sqlite3_stmt *st;
    *layer = -1;
    if (sqlite3_prepare_v2(db,
                           "SELECT id FROM layers WHERE (lower(name) = lower(?1) OR "
                           "lower(event_type) = lower(?1)) AND id > 0 ORDER BY id",
                           -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW)
            *layer = sqlite3_column_int(st, 0);
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    if (*layer < 0)
        return usage_error("%s: no layer named '%s' in %s", cmd, name, db_path);
    return 0;
}

/* Whether database db_path has a layer of that name or event type (silent: no message). */
static int layer_exists(const char *db_path, const char *name)
{
    char err[512];
    sqlite3 *db;
    if (ms_analyze_open(db_path, 0, &db, err, sizeof err) < 0)
        return 0;
    sqlite3_stmt *st;
    int found = 0;
    if (sqlite3_prepare_v2(db,
                           "SELECT 1 FROM layers WHERE (lower(name) = lower(?1) OR "
                           "lower(event_type) = lower(?1)) AND id > 0",
                           -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
        found = sqlite3_step(st) == SQLITE_ROW;
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return found;
}

/* Checks the gates of `analyze compare BASE NEW` and says each on stderr: "gate failed: ..." with
 * the call sites that grew, or (info) "gate held: ...". 0 all held, 1 one failed, -1 error. */
static int check_gates(const char *base, const char *new_db, const struct ms_gate *g, int ng,
                       const char *layer)
{
    int failed = 0;
    for (int i = 0; i < ng; i++) {
        struct ms_gate_result r;
        char err[600];
        if (ms_gate_check(base, new_db, &g[i], layer ? layer : "", &r, err, sizeof err) < 0) {
            cli_error("analyze: %s could not be checked: %s", g[i].spec, err);
            return -1;
        }
        double pct = r.base > 0 ? (double)(r.now - r.base) * 100.0 / (double)r.base : 0;
        char pcts[48] = "";
        if (r.base > 0)
            snprintf(pcts, sizeof pcts, ", %+.1f%%", pct);
        fprintf(stderr, "memscope: gate %s: %s: %s %lld -> %lld bytes (%+lld%s)%s%s\n",
                r.failed ? "failed" : "held", g[i].spec, g[i].is_peak ? "peak" : "live at exit",
                (long long)r.base, (long long)r.now, (long long)(r.now - r.base), pcts,
                layer ? " in " : "", layer ? layer : "");
        failed |= r.failed;
        for (size_t k = 0; r.failed && k < r.nsites; k++)
            fprintf(stderr, "memscope:   +%lld bytes (%lld block%s in NEW): %s\n",
                    (long long)r.sites[k].bytes, (long long)r.sites[k].blocks,
                    r.sites[k].blocks == 1 ? "" : "s", r.sites[k].site);
        if (r.failed && r.more_sites)
            fprintf(stderr, "memscope:   ... %zu more call sites grew\n", r.more_sites);
    }
    return failed;
}

int cmd_analyze(int argc, char **argv)
{
    struct ms_gate gates[8];
    int ngates = 0, error_exitcode = MS_BUDGET_EXIT;
    const char *new_db = NULL;
    struct ms_analyze_opts o;
    ms_analyze_opts_init(&o);
    const char *kind = NULL, *db = NULL, *out_path = NULL, *layer = NULL;
    if (argc == 2 && !strcmp(argv[1], "list")) { /* what this build has, one per line */
        for (const struct ms_analysis *a = ms_analyses; a->name; a++)
            if (a->run)
                printf("%-16s %s\n", a->name, a->summary);
        return 0;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int missing = 0, sel;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            print_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            o.json = 1;
        } else if (!strcmp(a, "--write-back")) {
            o.write_back = 1;
        } else if (!strcmp(a, "--accessed-only")) {
            o.accessed_only = 1;
        } else if (!strcmp(a, "-o") || !strncmp(a, "--output", 8)) {
            if (!strcmp(a, "-o")) {
                if (++i >= argc)
                    return usage_error("analyze: -o needs a file name");
                out_path = argv[i];
            } else if ((v = cli_opt_value(argc, argv, &i, "--output", &missing))) {
                out_path = v;
            } else {
                return usage_error("analyze: unknown option '%s'", a);
            }
        } else if ((v = cli_opt_value(argc, argv, &i, "--site", &missing))) {
            if (missing || (strcmp(v, "user") && strcmp(v, "innermost")))
                return usage_error("analyze: --site needs user or innermost, not '%s'", v);
            ms_site_rule.py_innermost = !strcmp(v, "innermost");
        } else if ((v = cli_opt_value(argc, argv, &i, "--site-skip", &missing))) {
            int rc = cli_site_skip("analyze", "--site-skip", missing ? "" : v);
            if (rc)
                return rc;
        } else if ((v = cli_opt_value(argc, argv, &i, "--top", &missing))) {
            if (missing || parse_int(v, 1, &o.top) < 0)
                return usage_error("analyze: --top needs a positive number, not '%s'", v);
        } else if ((v = cli_opt_value(argc, argv, &i, "--warmup", &missing))) {
            if (missing || parse_int(v, 0, &o.warmup) < 0)
                return usage_error("analyze: --warmup needs a step number >= 0, not '%s'", v);
        } else if ((v = cli_opt_value(argc, argv, &i, "--rule", &missing))) {
            if (!missing && !strcmp(v, "growth"))
                o.leak_rule = MS_LEAKS_GROWTH;
            else if (!missing && !strcmp(v, "msmemscope"))
                o.leak_rule = MS_LEAKS_MSMEMSCOPE;
            else
                return usage_error("analyze: --rule needs growth or msmemscope, not '%s'", v);
        } else if ((v = cli_opt_value(argc, argv, &i, "--steps", &missing))) {
            const char *comma = strchr(v, ',');
            char first[32];
            if (missing || !comma || (size_t)(comma - v) >= sizeof first)
                return usage_error("analyze: --steps needs two step numbers A,B, not '%s'", v);
            memcpy(first, v, (size_t)(comma - v));
            first[comma - v] = 0;
            if (parse_int(first, 1, &o.step_a) < 0 || parse_int(comma + 1, 1, &o.step_b) < 0)
                return usage_error("analyze: bad step numbers '%s' (two steps >= 1: A,B)", v);
            if (o.step_a == o.step_b)
                return usage_error("analyze: --steps names step %d twice", o.step_a);
        } else if ((v = cli_opt_value(argc, argv, &i, "--by", &missing))) {
            if (!missing && !strcmp(v, "owner"))
                o.by_stack = 0;
            else if (!missing && !strcmp(v, "stack"))
                o.by_stack = 1;
            else
                return usage_error("analyze: --by needs owner or stack, not '%s'", v);
        } else if ((v = cli_opt_value(argc, argv, &i, "--with", &missing))) {
            if (missing || !*v)
                return usage_error("analyze: --with needs a database");
            o.other_db = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--csv", &missing))) {
            if (missing || !*v)
                return usage_error("analyze: --csv needs a file name");
            o.csv_path = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--limit", &missing))) {
            if (missing || parse_bytes(v, &o.limit) < 0)
                return usage_error("analyze: --limit needs a size in bytes (K, M, G suffixes), "
                                   "not '%s'",
                                   v);
        } else if ((v = cli_opt_value(argc, argv, &i, "--idle-threshold", &missing))) {
            if (missing || parse_u64(v, &o.idle_threshold) < 0 || o.idle_threshold == 0)
                return usage_error("analyze: --idle-threshold needs a positive count, not '%s'", v);
        } else if ((v = cli_opt_value(argc, argv, &i, "--lazy-used", &missing))) {
            if (missing || parse_threshold(v, &o.lazy_ns, &o.lazy_pct) < 0)
                return usage_error("analyze: --lazy-used needs ns or NN%%, not '%s'", v);
        } else if ((v = cli_opt_value(argc, argv, &i, "--delayed-free", &missing))) {
            if (missing || parse_threshold(v, &o.delayed_ns, &o.delayed_pct) < 0)
                return usage_error("analyze: --delayed-free needs ns or NN%%, not '%s'", v);
        } else if ((v = cli_opt_value(argc, argv, &i, "--long-idle", &missing))) {
            if (missing || parse_threshold(v, &o.idle_ns, &o.idle_pct) < 0)
                return usage_error("analyze: --long-idle needs ns or NN%%, not '%s'", v);
        } else if ((v = cli_opt_value(argc, argv, &i, "--fail-if-peak-grows", &missing)) ||
                   (v = cli_opt_value(argc, argv, &i, "--fail-if-leak-grows", &missing))) {
            int peak = strstr(a, "peak") != NULL;
            char err[300];
            if (ngates >= 8)
                return usage_error("analyze: at most 8 gates");
            if (missing || ms_gate_parse(&gates[ngates], peak, v, err, sizeof err) < 0)
                return usage_error("analyze: %s", missing ? "a gate needs PCT% or BYTES" : err);
            snprintf(gates[ngates].spec, sizeof gates[ngates].spec, "--fail-if-%s-grows=%s",
                     peak ? "peak" : "leak", v);
            ngates++;
        } else if ((v = cli_opt_value(argc, argv, &i, "--error-exitcode", &missing))) {
            if (missing || parse_int(v, 1, &error_exitcode) < 0 || error_exitcode > 255)
                return usage_error("analyze: --error-exitcode needs a status in 1..255, not '%s'",
                                   v);
        } else if ((sel = cli_select_option("analyze", argc, argv, &i, &o, &layer)) >= 0) {
            if (sel)
                return sel;
        } else if (a[0] == '-' && a[1]) {
            return usage_error("analyze: unknown option '%s'", a);
        } else if (!kind) {
            kind = a;
        } else if (!db) {
            db = a;
        } else if (!new_db && !strcmp(kind, "compare")) {
            new_db = a; /* compare BASE NEW: NEW is --with's */
        } else {
            return usage_error("analyze: unexpected argument '%s'", a);
        }
    }
    if (!kind) {
        print_usage(stderr);
        return 2;
    }
    if (o.pid || o.device || o.from_ns || o.to_ns)
        return usage_error("analyze: --process, --device, --from and --to select what memscope "
                           "export writes; the analyses take --layer, --step and --at");
    if (!db)
        return usage_error("analyze: no database given");
    if (out_path && !out_path[0])
        return usage_error("analyze: empty output file name");
    if (new_db && o.other_db)
        return usage_error("analyze: compare BASE NEW and --with name the same thing: one of them");
    if (new_db)
        o.other_db = new_db;
    if (ngates && (strcmp(kind, "compare") || !o.other_db))
        return usage_error("analyze: --fail-if-*-grows needs compare BASE.db NEW.db");
    if (ngates && !o.other_db[0])
        return usage_error("analyze: compare needs a NEW database");
    if (!ngates && error_exitcode != MS_BUDGET_EXIT)
        return usage_error("analyze: --error-exitcode needs a gate (--fail-if-*-grows)");
    if (ngates && layer) {
        /* the gates read layers as the budgets do (cuda: every device); the report filters on
         * the layer when the base database has one of that name */
        if (!ms_budget_layer_known(layer))
            return usage_error("analyze: unknown layer '%s' for a gate (heap, mmap, cuda[:N], "
                               "pool:NAME ...: docs/ci.md)",
                               layer);
        if (layer_exists(db, layer))
            o.layer = -1; /* resolved below */
        else
            o.layer = 0;
    }
    if (layer && (!ngates || o.layer == -1)) {
        int rc = cli_resolve_layer("analyze", db, layer, &o.layer);
        if (rc)
            return rc;
    }

    FILE *f = stdout;
    struct ms_output mo = {.fd = -1};
    if (out_path && strcmp(out_path, "-") != 0) {
        /* a new file renamed over the target (a device or FIFO: written in place) */
        int orc = ms_output_open(&mo, out_path);
        f = orc == 0 ? fdopen(mo.fd, "w") : NULL;
        if (!f) {
            cli_error("analyze: cannot create %s: %s", out_path,
                      ms_strerror(orc < 0 ? orc : -errno));
            ms_output_abort(&mo);
            return 1;
        }
    }
    char err[1024];
    int rc = ms_analyze_run_list(db, kind, &o, f, err, sizeof err);
    if (f != stdout) {
        if (fclose(f) != 0 && rc == 0) {
            snprintf(err, sizeof err, "cannot write %s: %s", out_path, strerror(errno));
            rc = MS_EIO;
        }
        mo.fd = -1; /* fclose closed it */
        /* A failed analysis keeps what was written (the others' results are still useful);
         * a rejected list or a failed write leaves the target as it was. */
        if (rc == MS_EINVAL || rc == MS_EIO)
            ms_output_abort(&mo);
        else if (ms_output_commit(&mo) < 0 && rc == 0) {
            snprintf(err, sizeof err, "cannot write %s: %s", out_path, strerror(errno));
            rc = MS_EIO;
        }
    } else if (fflush(stdout) != 0 && rc == 0) {
        snprintf(err, sizeof err, "cannot write to stdout: %s", strerror(errno));
        rc = MS_EIO;
    }
    if (rc == MS_EINVAL) {
        usage_error("analyze: %s", err[0] ? err : ms_strerror(rc));
        return 2;
    }
    if (rc < 0) {
        cli_error("analyze: %s", err[0] ? err : ms_strerror(rc));
        return 1;
    }
    if (ngates) {
        int g = check_gates(db, o.other_db, gates, ngates, layer);
        return g < 0 ? 1 : g ? error_exitcode : 0;
    }
    return 0;
}

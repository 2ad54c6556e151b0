/* cmd_export.c: `memscope export run.db --format=csv [-o out.csv]`: writes the database's
 * events as msMemScope's memscope_dump CSV (ms_store_export_csv), to stdout by default;
 * `memscope export run.db --format=db [-o full.db]`: the full database (one row per event,
 * memscope_dump) of a compact one (ms_store_expand); `--format=pprof|collapsed|speedscope|
 * perfetto` with the analyses' selectors: what other tools read (src/analyze/export.h,
 * docs/exports.md); `--format=parquet -o JOB`: the run as one rank of a job's Parquet tables
 * (src/columnar, docs/columnar.md). */
#include "cli.h"
#include "store/db_explain.h"

#include "analyze/analyze.h"
#include "analyze/export.h"
#include "common/ms_error.h"
#include "common/files.h"
#include "store/store.h"
#include "columnar/columnar.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char export_usage[] =
    "usage: memscope export run.db --format=csv [-o out.csv]\n"
    "       memscope export run.db --format=db [-o full.db]\n"
    "       memscope export run.db --format=torch-snapshot -o run.pickle\n"
    "       memscope export run.db --format=parquet -o JOB [--rank=N] [--host=H] [--job=ID]\n"
    "                      [--replace]\n"
    "       memscope export run.db --format=jsonl --table=NAME -o FILE [--rank=N] [--host=H]\n"
    "       memscope export run.db --format=pprof|collapsed|speedscope|perfetto [-o FILE]\n"
    "                      [--what=allocated|live-at-exit|peak|leaked] [selectors]\n"
    "\n"
    "csv: writes every event of run.db in msMemScope's CSV form (stdout by default).\n"
    "db:  writes the full database of a compact one (memscope run's default output): one row\n"
    "     per event and msMemScope's memscope_dump, as `memscope run --format=db` writes it.\n"
    "parquet: the run as rank N (default: the rank the run recorded, else 0) of host H\n"
    "     (default: the run's) in the job directory JOB: JOB/TABLE/host=H/rank=N/*.parquet\n"
    "     for its tables (blocks, sites, events, processes, steps, usage, timeline,\n"
    "     rank_summary: docs/columnar.md), through DuckDB's C library; a host and rank\n"
    "     already in JOB is refused unless --replace.\n"
    "jsonl: one of those tables as JSON lines (its Parquet column names, host and rank\n"
    "     added), for engines that ingest rows (ClickHouse's JSONEachRow, BigQuery).\n"
    "torch-snapshot: the run's pools (PyTorch's allocator, memscope.h or NVTX pools) as a\n"
    "     PyTorch memory snapshot (segments at the end, every pool event of the run), the\n"
    "     pickle PyTorch's memory_viz and torch.cuda._memory_viz read.\n"
    "pprof: gzip'd profile.proto (go tool pprof): alloc_objects, alloc_space, inuse_objects,\n"
    "     inuse_space per stack (inuse: live at the window's end, at exit without one).\n"
    "collapsed: folded stacks, root first, one line per stack with its bytes (flamegraph.pl).\n"
    "speedscope: speedscope's JSON file, one profile per process and layer, unit bytes.\n"
    "perfetto: Chrome's trace event JSON (ui.perfetto.dev, chrome://tracing): live bytes per\n"
    "     process and layer, steps, ranges (NVTX's too), marks and OOMs.\n"
    "  --format=FORMAT     the output format\n"
    "  --what=WHAT         collapsed, speedscope: bytes allocated in the window (default),\n"
    "                      live-at-exit (live at its end), peak (live at the peak of each\n"
    "                      process and layer), leaked (allocated in it, never freed)\n"
    "  selectors (pprof, collapsed, speedscope, perfetto): --process=PID, --layer=NAME,\n"
    "                      --device=cpu|N, --step=N, --at=NS (the window ends then),\n"
    "                      --from=NS, --to=NS (epoch ns, as the database's times)\n"
    "  -o, --output=FILE   write to FILE; csv: stdout by default; db: by default\n"
    "                      memscope_dump_<stamp>.db beside run.db (the name MindStudio\n"
    "                      Insight imports; <stamp> from a name memscope_<stamp>.db, else\n"
    "                      now), never over an existing file\n";

/* The default output of --format=db: memscope_dump_<stamp>.db in db's directory, <stamp> the
 * 14 digits of a name memscope_<stamp>.db (memscope run's), else the local time now. */
static void default_full_name(const char *db, char *out, size_t n)
{
    const char *base = strrchr(db, '/');
    int dirlen = base ? (int)(base - db) + 1 : 0;
    base = base ? base + 1 : db;
    char stamp[32] = "";
    size_t len = strlen(base);
    if (len == 26 && !strncmp(base, "memscope_", 9) && !strcmp(base + 23, ".db") &&
        strspn(base + 9, "0123456789") == 14)
        snprintf(stamp, sizeof stamp, "%.14s", base + 9);
    else {
        time_t now = time(NULL);
        strftime(stamp, sizeof stamp, "%Y%m%d%H%M%S", localtime(&now));
    }
    snprintf(out, n, "%.*smemscope_dump_%s.db", dirlen, db, stamp);
}

/* --format=db: the full database of a compact one. */
static int export_db(const char *db, const char *out)
{
    char dflt[4096 + 64];
    if (out && !strcmp(out, "-"))
        return usage_error("export: --format=db writes a file, not stdout");
    if (!out) {
        default_full_name(db, dflt, sizeof dflt);
        if (access(dflt, F_OK) == 0) {
            cli_error("export: %s exists; name the output with -o", dflt);
            return 1;
        }
        out = dflt;
    }
    if (access(db, R_OK) != 0) {
        cli_error("export: cannot open database %s: %s", db, strerror(errno));
        return 1;
    }
    char err[512] = "";
    int rc = ms_store_expand(db, out, 1, NULL, err, sizeof err);
    if (rc == MS_EINVAL) {
        cli_error("export: %s is already a full database (it has every event)", db);
        return 1;
    }
    if (rc == MS_EFORMAT && strstr(err, "not a memscope database"))
        ms_db_explain(db, err, sizeof err); /* damaged, truncated, or never one */
    if (rc < 0) {
        cli_error("export: %s", err[0] ? err : ms_strerror(rc));
        return 1;
    }
    cli_log(1, "wrote %s", out);
    return 0;
}

/* --format=parquet: the run's rank as partitions of the job directory out (docs/columnar.md). */
static int export_parquet(const char *db, const char *out, const char *host, const char *rank_s,
                          const char *job, int replace, const char *table)
{
    if (!out || !strcmp(out, "-"))
        return usage_error(table ? "export: --format=jsonl needs -o FILE"
                                 : "export: --format=parquet needs -o JOB (a directory)");
    if (table && !ms_columnar_table(table))
        return usage_error("export: no table '%s' (blocks, sites, events, processes, steps, "
                           "usage, timeline, rank_summary)",
                           table);
    long long rank = -1; /* the run's */
    if (rank_s) {
        char *end;
        errno = 0;
        rank = strtoll(rank_s, &end, 10);
        if (errno || *end || end == rank_s || rank < 0 || rank > INT32_MAX)
            return usage_error("export: --rank needs a number from 0 to %d, not '%s'", INT32_MAX,
                               rank_s);
    }
    struct ms_parquet_opts po = {.db_path = db,
                                 .job_dir = table ? NULL : out,
                                 .host = host,
                                 .rank = rank,
                                 .job = job,
                                 .replace = replace,
                                 .jsonl_table = table,
                                 .jsonl_out = table ? out : NULL};
    char err[1024] = "";
    int rc = ms_parquet_export(&po, err, sizeof err);
    if (rc == MS_EFORMAT && strstr(err, "not a memscope database"))
        ms_db_explain(db, err, sizeof err);
    if (rc < 0) {
        cli_error("export: %s", err[0] ? err : ms_strerror(rc));
        return 1;
    }
    return 0;
}

/* The formats made from a profile (src/analyze/export.h). */
static const char *const profile_formats[] = {"pprof", "collapsed", "speedscope", "perfetto", NULL};

static int profile_format(const char *format)
{
    for (int i = 0; format && profile_formats[i]; i++)
        if (!strcmp(format, profile_formats[i]))
            return i + 1;
    return 0;
}

/* Writes the profile of db's selection in format kind (profile_format's) to f. */
static int export_profile(const char *db_path, int kind, enum ms_export_what what,
                          const struct ms_analyze_opts *o, FILE *f, char *err, size_t errlen)
{
    sqlite3 *db;
    int rc = ms_analyze_open(db_path, 0, &db, err, errlen);
    if (rc < 0)
        return rc;
    /* one read transaction for the whole export: without it SQLite takes and drops its file
     * lock around every statement, and reading 100,000 stacks spent half its time in fcntl */
    sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
    struct ms_profile p;
    unsigned flags = kind == 4 ? MS_PROFILE_TIMELINE : 0;
    if (kind == 2 || kind == 3) /* collapsed, speedscope: the figure of --what */
        flags |= what == MS_WHAT_PEAK     ? MS_PROFILE_PEAK
                 : what == MS_WHAT_LEAKED ? MS_PROFILE_LEAKED
                                          : 0;
    rc = ms_profile_collect(&p, db, db_path, o, flags, err, errlen);
    if (rc == 0) {
        const char *base = strrchr(db_path, '/');
        base = base ? base + 1 : db_path;
        switch (kind) {
        case 1: rc = ms_export_pprof(&p, f, err, errlen); break;
        case 2: rc = ms_export_collapsed(&p, what, f, err, errlen); break;
        case 3: rc = ms_export_speedscope(&p, what, base, f, err, errlen); break;
        default: rc = ms_export_perfetto(&p, f, err, errlen);
        }
    }
    ms_profile_release(&p);
    struct ms_sampling smp;
    ms_sampling_read(db, &smp);
    if (rc == 0 && smp.bytes) { /* a sampled run: the sizes are the converter's estimates */
        char note[160];
        ms_sampling_note(&smp, note, sizeof note);
        cli_log(1, "%s; the export's object counts are samples", note);
    }
    sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    sqlite3_close(db);
    return rc;
}

int cmd_export(int argc, char **argv)
{
    const char *db = NULL, *out = NULL, *format = NULL, *layer = NULL, *what_s = NULL;
    const char *host = NULL, *job = NULL, *rank_s = NULL, *table = NULL;
    const char *v;
    int replace = 0, missing = 0;
    struct ms_analyze_opts o;
    ms_analyze_opts_init(&o);
    int selectors = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int sel;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(export_usage, stdout);
            return 0;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (++i >= argc)
                return usage_error("export: %s needs a file name", a);
            out = argv[i];
        } else if (!strncmp(a, "--output=", 9)) {
            out = a + 9;
        } else if (!strncmp(a, "-o", 2) && a[2]) {
            out = a + 2;
        } else if (!strcmp(a, "--format")) {
            if (++i >= argc)
                return usage_error("export: --format needs a value");
            format = argv[i];
        } else if (!strncmp(a, "--format=", 9)) {
            format = a + 9;
        } else if (!strcmp(a, "--what")) {
            if (++i >= argc)
                return usage_error("export: --what needs a value");
            what_s = argv[i];
        } else if (!strncmp(a, "--what=", 7)) {
            what_s = a + 7;
        } else if ((v = cli_opt_value(argc, argv, &i, "--host", &missing)) ||
                   (v = cli_opt_value(argc, argv, &i, "--job", &missing)) ||
                   (v = cli_opt_value(argc, argv, &i, "--rank", &missing)) ||
                   (v = cli_opt_value(argc, argv, &i, "--table", &missing))) {
            if (missing || !*v)
                return usage_error("export: %s needs a value", a);
            *(a[2] == 'h' ? &host : a[2] == 'j' ? &job : a[2] == 'r' ? &rank_s : &table) = v;
        } else if (!strcmp(a, "--replace")) {
            replace = 1;
        } else if ((sel = cli_select_option("export", argc, argv, &i, &o, &layer)) >= 0) {
            if (sel)
                return sel;
            selectors = 1;
        } else if (a[0] == '-' && a[1]) {
            return usage_error("export: unknown option '%s'", a);
        } else if (!db) {
            db = a;
        } else {
            return usage_error("export: unexpected argument '%s'", a);
        }
    }
    if (!db)
        return usage_error("export: no database given");
    int torch = format && !strcmp(format, "torch-snapshot");
    int kind = profile_format(format);
    int parquet = format && !strcmp(format, "parquet");
    int jsonl = format && !strcmp(format, "jsonl");
    if (format && strcmp(format, "csv") != 0 && strcmp(format, "db") != 0 && !torch && !kind &&
        !parquet && !jsonl)
        return usage_error("export: unknown format '%s' (supported: csv, db, parquet, jsonl, "
                           "torch-snapshot, pprof, collapsed, speedscope, perfetto)",
                           format);
    if (out && !out[0])
        return usage_error("export: empty output file name");
    if ((host || job || rank_s || replace) && !parquet && !jsonl)
        return usage_error("export: --host, --rank, --job and --replace apply to "
                           "--format=parquet and jsonl");
    if (!!table != jsonl)
        return usage_error("export: --format=jsonl takes one table: --table=NAME (blocks, "
                           "sites, events, processes, steps, usage, timeline, rank_summary), "
                           "and only it");
    if (parquet || jsonl)
        return (selectors || what_s || (jsonl && replace))
                   ? usage_error("export: --format=%s writes every row: no selector, --what or "
                                 "--replace",
                                 format)
                   : export_parquet(db, out, host, rank_s, job, replace, table);
    if ((selectors || what_s) && !kind)
        return usage_error("export: --what and the selectors (--process, --layer, --device, "
                           "--step, --at, --from, --to) apply to --format=pprof, collapsed, "
                           "speedscope and perfetto");
    if ((o.at_step && (o.at_ns || o.from_ns || o.to_ns)) || (o.at_ns && (o.from_ns || o.to_ns)))
        return usage_error("export: one window: --step, --at, or --from and --to");
    if (o.from_ns && o.to_ns && o.to_ns < o.from_ns)
        return usage_error("export: --to (%lld) is before --from (%lld)", (long long)o.to_ns,
                           (long long)o.from_ns);
    enum ms_export_what what = MS_WHAT_ALLOCATED;
    if (what_s && ms_export_what_parse(what_s, &what) < 0)
        return usage_error("export: --what needs allocated, live-at-exit, peak or leaked, not "
                           "'%s'",
                           what_s);
    if (what_s && (kind == 1 || kind == 4))
        return usage_error("export: --what applies to --format=collapsed and speedscope (pprof "
                           "has every figure as a sample type; perfetto is a timeline)");
    if (format && !strcmp(format, "db"))
        return export_db(db, out);
    if ((torch || kind == 1) && (!out || !strcmp(out, "-")) && isatty(STDOUT_FILENO))
        return usage_error("export: --format=%s writes a binary file: give -o FILE (or "
                           "redirect stdout)",
                           format);
    if (layer) {
        int rc = cli_resolve_layer("export", db, layer, &o.layer);
        if (rc)
            return rc;
    }

    FILE *f = stdout;
    struct ms_output mo = {.fd = -1};
    if (out && strcmp(out, "-") != 0) {
        /* a new file renamed over OUT when complete: a failure leaves OUT as it was, and a
         * device or FIFO given as OUT is written in place, never removed */
        int orc = ms_output_open(&mo, out);
        f = orc == 0 ? fdopen(mo.fd, "w") : NULL;
        if (!f) {
            cli_error("export: cannot create %s: %s", out, ms_strerror(orc < 0 ? orc : -errno));
            ms_output_abort(&mo);
            return 1;
        }
    }
    char err[512] = "";
    int rc = kind    ? export_profile(db, kind, what, &o, f, err, sizeof err)
             : torch ? ms_store_export_torch(db, f, err, sizeof err)
                     : ms_store_export_csv(db, f, err, sizeof err);
    if (f != stdout) {
        if (fclose(f) != 0 && rc == 0) {
            snprintf(err, sizeof err, "cannot write %s: %m", out);
            rc = MS_EIO;
        }
        mo.fd = -1; /* fclose closed it */
        if (rc == 0 && (rc = ms_output_commit(&mo)) < 0)
            snprintf(err, sizeof err, "cannot write %s: %s", out, ms_strerror(rc));
        if (rc < 0)
            ms_output_abort(&mo);
    } else if (fflush(stdout) != 0 && rc == 0) {
        snprintf(err, sizeof err, "cannot write to stdout: %m");
        rc = MS_EIO;
    }
    if (rc == MS_EFORMAT && strstr(err, "not a memscope database"))
        ms_db_explain(db, err, sizeof err); /* damaged, truncated, or never one */
    if (rc < 0) {
        cli_error("export: %s", err[0] ? err : ms_strerror(rc));
        return 1;
    }
    return 0;
}

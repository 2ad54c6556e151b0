/* cmd_export.c: `memscope export run.db --format=csv [-o out.csv]`: writes the database's
 * events as msMemScope's memscope_dump CSV (ms_store_export_csv), to stdout by default;
 * `memscope export run.db --format=db [-o full.db]`: the full database (one row per event,
 * memscope_dump) of a compact one (ms_store_expand). */
#include "cli.h"
#include "store/db_explain.h"

#include "common/ms_error.h"
#include "common/files.h"
#include "store/store.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char export_usage[] =
    "usage: memscope export run.db --format=csv [-o out.csv]\n"
    "       memscope export run.db --format=db [-o full.db]\n"
    "       memscope export run.db --format=torch-snapshot -o run.pickle\n"
    "\n"
    "csv: writes every event of run.db in msMemScope's CSV form (stdout by default).\n"
    "db:  writes the full database of a compact one (memscope run's default output): one row\n"
    "     per event and msMemScope's memscope_dump, as `memscope run --format=db` writes it.\n"
    "torch-snapshot: the run's pools (PyTorch's allocator, memscope.h or NVTX pools) as a\n"
    "     PyTorch memory snapshot (segments at the end, every pool event of the run), the\n"
    "     pickle PyTorch's memory_viz and torch.cuda._memory_viz read.\n"
    "  --format=csv|db|torch-snapshot  the output format\n"
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

int cmd_export(int argc, char **argv)
{
    const char *db = NULL, *out = NULL, *format = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
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
    if (format && strcmp(format, "csv") != 0 && strcmp(format, "db") != 0 && !torch)
        return usage_error("export: unknown format '%s' (supported: csv, db, torch-snapshot)",
                           format);
    if (out && !out[0])
        return usage_error("export: empty output file name");
    if (format && !strcmp(format, "db"))
        return export_db(db, out);
    if (torch && (!out || !strcmp(out, "-")) && isatty(STDOUT_FILENO))
        return usage_error("export: --format=torch-snapshot writes a binary pickle: give -o "
                           "FILE.pickle (or redirect stdout)");

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
    char err[512];
    int rc = torch ? ms_store_export_torch(db, f, err, sizeof err)
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

/* cmd_import.c: `memscope import TRACE_DIR -o run.db [--format=compact|db] [--no-symbols]`:
 * converts the traces of a run (<pid>.<n>.mst files) into the database of docs/database.md via
 * ms_store_convert(): the compact database (the default, as `memscope run` writes it) or the
 * full one.
 * Useful when `memscope run` was interrupted or the traces were copied from another machine. */
#include "cli.h"

#include "common/ms_error.h"
#include "store/store.h"

#include <stdio.h>
#include <string.h>

static const char import_usage[] =
    "usage: memscope import TRACE_DIR -o run.db [--format=compact|db] [--no-symbols]\n"
    "\n"
    "Converts the raw traces in TRACE_DIR into a memscope database.\n"
    "  -o, --output=FILE   the database to write (replaced if it exists)\n"
    "  --format=compact|db compact (default): summary tables and the packed traces;\n"
    "                      db: one row per event (msMemScope's memscope_dump)\n"
    "  --no-symbols        keep module offsets, do not read debug information\n";

int cmd_import(int argc, char **argv)
{
    const char *dir = NULL, *db = NULL;
    int symbolize = 1, compact = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(import_usage, stdout);
            return 0;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (++i >= argc)
                return usage_error("import: %s needs a file name", a);
            db = argv[i];
        } else if (!strncmp(a, "--output=", 9)) {
            db = a + 9;
        } else if (!strncmp(a, "-o", 2) && a[2]) {
            db = a + 2;
        } else if (!strcmp(a, "--format=compact")) {
            compact = 1;
        } else if (!strcmp(a, "--format=db")) {
            compact = 0;
        } else if (!strncmp(a, "--format", 8)) {
            return usage_error("import: --format: expected compact or db, not '%s'", a);
        } else if (!strcmp(a, "--no-symbols")) {
            symbolize = 0;
        } else if (!strcmp(a, "--")) {
            if (i + 1 < argc && !dir)
                dir = argv[++i];
            if (i + 1 < argc)
                return usage_error("import: unexpected argument '%s'", argv[i + 1]);
        } else if (a[0] == '-' && a[1]) {
            return usage_error("import: unknown option '%s'", a);
        } else if (!dir) {
            dir = a;
        } else {
            return usage_error("import: unexpected argument '%s'", a);
        }
    }
    if (!dir)
        return usage_error("import: no trace directory given");
    if (!db || !db[0])
        return usage_error("import: no output database given (-o run.db)");

    struct ms_store_options o = {
        .trace_dir = dir,
        .db_path = db,
        .argv = NULL,
        .exit_status = -1,
        .call_stack_c = 0,
        .events = NULL,
        .symbolize = symbolize,
        .compact = compact,
    };
    struct ms_store_result res;
    char err[512];
    static volatile int no_stop;
    int rc = run_convert(&o, &no_stop, &res, err, sizeof err); /* a crash takes a child */
    if (rc < 0) {
        cli_error("import: %s", err[0] ? err : ms_strerror(rc));
        return 1;
    }
    if (res.warning[0])
        cli_log(2, "import: damaged data was skipped, the rest converted: %s", res.warning);
    if (res.lost_events)
        cli_log(2, "import: %llu events were not recorded by the agent",
                (unsigned long long)res.lost_events);
    cli_log(1, "wrote %s: %llu events from %llu process%s", db, (unsigned long long)res.events,
            (unsigned long long)res.processes, res.processes == 1 ? "" : "es");
    return 0;
}

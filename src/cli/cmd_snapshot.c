/* cmd_snapshot.c: `memscope snapshot FILE [--json] [--top N] [--state-at N [--device D]]
 * [-o trace.db]`: reads a PyTorch memory snapshot (pickle or JSON) safely and prints its
 * summary, the allocator state at one event, or imports it into a database. */
#include "cli.h"

#include "common/ms_error.h"
#include "snapshot/snapshot.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char snapshot_usage[] =
    "usage: memscope snapshot FILE [--json] [--top N]\n"
    "       memscope snapshot FILE --state-at N [--device D]\n"
    "       memscope snapshot FILE -o trace.db\n"
    "\n"
    "Reads a PyTorch CUDA memory snapshot (torch.cuda.memory._dump_snapshot() pickle, any\n"
    "protocol 2-5, or its JSON form) without running anything from it.\n"
    "  --json          print the summary as JSON\n"
    "  --top N         allocation sites listed per device (default 10)\n"
    "  --state-at N    allocator state just after trace event N (JSON; -1: before the first)\n"
    "  --device D      device for --state-at (default: the first device with a trace)\n"
    "  -o FILE         import into a memscope database (the schema of docs/database.md)\n";

static int parse_i64(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end)
        return -1;
    *out = v;
    return 0;
}

int cmd_snapshot(int argc, char **argv)
{
    const char *file = NULL, *db = NULL;
    int json = 0, have_state = 0, have_device = 0;
    int64_t state_at = 0, device = 0, top = 10;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(snapshot_usage, stdout);
            return 0;
        }
        if (!strcmp(a, "--json")) {
            json = 1;
            continue;
        }
        if (!strcmp(a, "-o") || !strcmp(a, "--output") || !strcmp(a, "--state-at") ||
            !strcmp(a, "--device") || !strcmp(a, "--top")) {
            if (i + 1 >= argc)
                return usage_error("snapshot: %s needs a value", a);
            val = argv[++i];
        } else if (!strncmp(a, "--state-at=", 11) || !strncmp(a, "--device=", 9) ||
                   !strncmp(a, "--top=", 6) || !strncmp(a, "--output=", 9)) {
            val = strchr(a, '=') + 1;
        } else if (a[0] == '-' && a[1]) {
            return usage_error("snapshot: unknown option %s", a);
        } else {
            if (file)
                return usage_error("snapshot: more than one FILE");
            file = a;
            continue;
        }
        if (!strncmp(a, "-o", 2) || !strncmp(a, "--output", 8)) {
            db = val;
        } else if (!strncmp(a, "--state-at", 10)) {
            if (parse_i64(val, &state_at) || state_at < -1)
                return usage_error("snapshot: --state-at wants an event index >= -1, not %s", val);
            have_state = 1;
        } else if (!strncmp(a, "--device", 8)) {
            if (parse_i64(val, &device))
                return usage_error("snapshot: --device wants an integer, not %s", val);
            have_device = 1;
        } else {
            if (parse_i64(val, &top) || top < 0 || top > 1000000)
                return usage_error("snapshot: --top wants a count, not %s", val);
        }
    }
    if (!file)
        return usage_error("snapshot: no FILE given");
    if (have_state && db)
        return usage_error("snapshot: --state-at and -o do not go together");

    struct ms_snapshot s;
    ms_snapshot_init(&s, NULL);
    int rc = ms_snapshot_load_file(&s, file);
    if (rc) {
        const char *kind;
        if (rc == -ENOENT || rc == -EACCES || !cli_not_snapshot(file, s.err, &kind))
            cli_error("snapshot: %s: %s", file, s.err);
        else /* never a snapshot: what it is, not the pickle reader's complaint */
            cli_error("snapshot: '%s' is not a PyTorch memory snapshot: it is %s%s", file, kind,
                      !strcmp(kind, "an SQLite database")
                          ? " (a memscope database is read by memscope analyze, view, report)"
                          : "");
        ms_snapshot_release(&s);
        return 1;
    }
    int status = 0;
    if (have_state) {
        if (!have_device) {
            device = s.nsegs ? s.segs[0].device : 0;
            for (uint64_t i = 0; i < s.ntraces; i++)
                if (s.traces[i].nevents) {
                    device = s.traces[i].device;
                    break;
                }
        }
        struct ms_snap_state st;
        rc = ms_snapshot_state_at(&s, device, state_at, &st);
        if (rc == MS_EINVAL) {
            const struct ms_snap_trace *t = ms__snap_trace(&s, device);
            cli_error("snapshot: no event %lld on device %lld (it has %llu events)",
                      (long long)state_at, (long long)device,
                      (unsigned long long)(t ? t->nevents : 0));
            status = 2;
        } else if (rc) {
            cli_error("snapshot: %s", ms_strerror(rc));
            status = 1;
        } else {
            if (ms_snap_state_write_json(&s, &st, stdout))
                status = 1;
            ms_snap_state_release(&st);
        }
    } else if (db) {
        char err[512] = "";
        rc = ms_snapshot_write_db(&s, file, db, MS_SNAP_DB_DUMP, err, sizeof err);
        if (rc) {
            cli_error("snapshot: %s: %s", db, err[0] ? err : ms_strerror(rc));
            status = 1;
        } else {
            cli_log(1, "wrote %s", db);
        }
    } else {
        rc = ms_snapshot_write_summary(&s, stdout, json, (int)top);
        if (rc) {
            cli_error("snapshot: %s", ms_strerror(rc));
            status = 1;
        }
    }
    if (fflush(stdout) && !status) {
        cli_error("snapshot: writing output: %s", strerror(errno));
        status = 1;
    }
    ms_snapshot_release(&s);
    return status;
}

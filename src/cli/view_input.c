/* view_input.c: what `memscope view` and `memscope report` accept besides a database: a trace
 * directory (converted as `memscope import` does) or a PyTorch memory snapshot (imported as
 * `memscope snapshot -o` does), each into a private temporary directory removed afterwards. */
#include "cli.h"

#include "common/files.h"
#include "common/ms_error.h"
#include "store/db_explain.h"
#include "store/store.h"
#ifdef MEMSCOPE_HAVE_SNAPSHOT
#include "snapshot/snapshot.h"
#endif

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* 1 when the file at path starts as an SQLite database does. */
static int is_sqlite(const char *path)
{
    char head[16] = {0};
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    size_t n = fread(head, 1, sizeof head, f);
    fclose(f);
    return n == sizeof head && !memcmp(head, "SQLite format 3", 16);
}

int cli_not_snapshot(const char *path, const char *err, const char **kind)
{
    *kind = ms_file_kind(path);
    if (!strcmp(*kind, "a pickle") || !strcmp(*kind, "a JSON file") || !strcmp(*kind, "unreadable"))
        return 0;
    if (!strcmp(*kind, "a text file") || !strcmp(*kind, "binary data")) {
        /* a protocol 0 pickle reads as text: only a failure on its first byte says it is none */
        const char *at = strstr(err, "at byte offset ");
        return at && at[15] == '0' && !isdigit((unsigned char)at[16]);
    }
    return 1; /* empty, an SQLite database, a trace file, a directory */
}

int cli_view_input(const char *what, const char *path, struct cli_view_input *in)
{
    memset(in, 0, sizeof *in);
    struct stat st;
    /* a FIFO, a device, a socket: never opened (a FIFO's open would wait for a writer) */
    if (stat(path, &st) == 0 && !S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
        return cli_error("%s: '%s' is not a regular file or a directory", what, path);
    if (stat(path, &st) < 0 || (!S_ISDIR(st.st_mode) && is_sqlite(path))) {
        snprintf(in->db, sizeof in->db, "%s", path); /* a database, or an error to report */
        return 0;
    }
#ifndef MEMSCOPE_HAVE_SNAPSHOT
    if (!S_ISDIR(st.st_mode))
        return cli_error("%s: '%s' is not a memscope database or trace directory: it is %s", what,
                         path, ms_file_kind(path));
#endif
    if (snprintf(in->dir, sizeof in->dir, "%s/memscope-view-XXXXXX", ms_tmp_dir()) >=
            (int)sizeof in->dir ||
        !ms_temp_dir_create(in->dir)) {
        in->dir[0] = 0;
        return cli_error("%s: cannot create a temporary directory: %s", what, strerror(errno));
    }
    snprintf(in->db, sizeof in->db, "%s/run.db", in->dir);
    char err[512] = "";
    int rc;
    if (S_ISDIR(st.st_mode)) {
        struct ms_store_options o = {
            .trace_dir = path, .db_path = in->db, .exit_status = -1, .symbolize = 1, .compact = 1};
        struct ms_store_result res;
        static volatile int no_stop;
        rc = run_convert(&o, &no_stop, &res, err, sizeof err);
    } else {
#ifdef MEMSCOPE_HAVE_SNAPSHOT
        struct ms_snapshot s;
        ms_snapshot_init(&s, NULL);
        rc = ms_snapshot_load_file(&s, path);
        const char *kind;
        if (rc && cli_not_snapshot(path, s.err, &kind))
            snprintf(err, sizeof err,
                     "'%s' is not a memscope database, trace directory or PyTorch memory "
                     "snapshot: it is %s",
                     path, kind);
        else if (rc)
            snprintf(err, sizeof err,
                     "'%s' is %s, but not a PyTorch memory snapshot memscope reads: %s", path, kind,
                     s.err);
        else
            rc = ms_snapshot_write_db(&s, path, in->db, 0, err, sizeof err);
        ms_snapshot_release(&s);
#else
        rc = MS_EINVAL;
#endif
    }
    if (rc < 0 || rc > 0) {
        cli_view_input_release(in);
        return cli_error("%s: %s", what, err[0] ? err : ms_strerror(rc < 0 ? rc : MS_EFORMAT));
    }
    cli_log(0, "%s: %s converted into %s", what, path, in->db);
    return 0;
}

void cli_view_input_release(struct cli_view_input *in)
{
    if (!in->dir[0])
        return;
    unlink(in->db); /* ours: the conversion wrote it into our directory */
    char side[sizeof in->db + 16];
    static const char *const suffixes[] = {"-journal", "-wal", "-shm", ".lock"};
    for (size_t i = 0; i < sizeof suffixes / sizeof *suffixes; i++) {
        snprintf(side, sizeof side, "%s%s", in->db, suffixes[i]);
        unlink(side);
    }
    rmdir(in->dir);
    ms_cleanup_forget(in->dir);
    in->dir[0] = 0;
}

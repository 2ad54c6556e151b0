/* common.c: what every analysis shares: opening and checking the database, describing a call
 * site, human-readable sizes, the options' defaults, and the table of analyses. */
#include "analyze.h"

#include "error.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MS_DB_FORMAT_VERSION 1

void ms_analyze_opts_init(struct ms_analyze_opts *o)
{
    memset(o, 0, sizeof *o);
    o->top = 10;
    o->warmup = 1;
    o->idle_threshold = 3000;
}

const struct ms_analysis *ms_analysis_find(const char *name)
{
    for (const struct ms_analysis *a = ms_analyses; a->name; a++)
        if (a->run && !strcmp(a->name, name))
            return a;
    return NULL;
}

int ms_analyze_open(const char *path, int writable, sqlite3 **db, char *err, size_t errlen)
{
    *db = NULL;
    if (access(path, R_OK) != 0) {
        snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno));
        return MS_ENOTFOUND;
    }
    int flags = writable ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY;
    if (sqlite3_open_v2(path, db, flags, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "cannot open '%s': %s", path, sqlite3_errmsg(*db));
        sqlite3_close(*db);
        *db = NULL;
        return MS_EDB;
    }
    sqlite3_stmt *st = NULL;
    int version = -1;
    if (sqlite3_prepare_v2(*db, "SELECT value FROM meta WHERE key = 'format_version'", -1, &st,
                           NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        version = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    if (version < 0) {
        snprintf(err, errlen, "'%s' is not a memscope database", path);
        sqlite3_close(*db);
        *db = NULL;
        return MS_EFORMAT;
    }
    if (version > MS_DB_FORMAT_VERSION) {
        snprintf(err, errlen, "'%s' has database format version %d, newer than this memscope "
                              "reads (%d); upgrade memscope", path, version, MS_DB_FORMAT_VERSION);
        sqlite3_close(*db);
        *db = NULL;
        return MS_EVERSION;
    }
    return 0;
}

static int runtime_module(const char *path)
{
    static const char *const names[] = {"libc.so", "ld-linux", "libstdc++.so", "libgcc_s.so",
                                        "libmemscope.so"};
    const char *base = path ? strrchr(path, '/') : NULL;
    base = base ? base + 1 : path;
    if (!base)
        return 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strncmp(base, names[i], strlen(names[i])))
            return 1;
    return 0;
}

void ms_stack_site(sqlite3 *db, int64_t stack_id, char *out, size_t len)
{
    snprintf(out, len, "(no stack)");
    if (stack_id <= 0)
        return;
    sqlite3_stmt *st;
    const char *q = "SELECT fn.text, fl.text, f.line, m.path, f.pc - COALESCE(m.bias, 0) "
                    "FROM stack_frames sf JOIN frames f ON f.id = sf.frame_id "
                    "LEFT JOIN modules m ON m.id = f.module_id "
                    "LEFT JOIN strings fn ON fn.id = f.function_id "
                    "LEFT JOIN strings fl ON fl.id = f.file_id "
                    "WHERE sf.stack_id = ? ORDER BY sf.position";
    if (sqlite3_prepare_v2(db, q, -1, &st, NULL) != SQLITE_OK)
        return;
    sqlite3_bind_int64(st, 1, stack_id);
    int first = 1;
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *fn = (const char *)sqlite3_column_text(st, 0);
        const char *file = (const char *)sqlite3_column_text(st, 1);
        const char *mod = (const char *)sqlite3_column_text(st, 3);
        int runtime = runtime_module(mod);
        if (!first && runtime)
            continue;
        if (file)
            snprintf(out, len, "%s (%s:%d)", fn ? fn : "??", file, sqlite3_column_int(st, 2));
        else if (mod)
            snprintf(out, len, "%s (%s+0x%llx)", fn ? fn : "??", mod,
                     (unsigned long long)sqlite3_column_int64(st, 4));
        else
            snprintf(out, len, "%s", fn ? fn : "??");
        if (!runtime)
            break;
        first = 0;
    }
    sqlite3_finalize(st);
}

void ms_human_bytes(char *out, size_t len, long long b)
{
    long long a = b < 0 ? -b : b;
    if (a < 10 * 1024)
        snprintf(out, len, "%lld B", b);
    else if (a < 10ll * 1024 * 1024)
        snprintf(out, len, "%.1f KiB", b / 1024.0);
    else if (a < 10ll * 1024 * 1024 * 1024)
        snprintf(out, len, "%.1f MiB", b / 1048576.0);
    else
        snprintf(out, len, "%.1f GiB", b / 1073741824.0);
}

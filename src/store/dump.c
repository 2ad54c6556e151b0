/* dump.c: msMemScope's memscope_dump table of a full database (docs/database.md), one row per
 * event, filled from events once the conversion (or the snapshot import) has written them, and
 * its rows refreshed where an analysis writes findings that show in them (inefficient).
 *
 * A table and not a view: MindStudio Insight and msMemScope's analyzers look it up with
 * `type = 'table'`. Workload: one INSERT ... SELECT over events (about 1 us per row). */
#include "store.h"

#include "common/ms_error.h"
#include "common/db_schema.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ms_dump_is_table(sqlite3 *db)
{
    sqlite3_stmt *st;
    int yes = 0;
    if (sqlite3_prepare_v2(db,
                           "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = "
                           "'memscope_dump'",
                           -1, &st, NULL) != SQLITE_OK)
        return 0;
    yes = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    return yes;
}

/* Runs "<head> <ms_dump_select> <tail>". */
static int fill(sqlite3 *db, const char *head, const char *tail, char *err, size_t errlen)
{
    size_t n = strlen(head) + strlen(ms_dump_select) + strlen(tail) + 3;
    char *sql = malloc(n);
    if (!sql) {
        return ms_errf(err, errlen, MS_ENOMEM, "memscope_dump: out of memory");
    }
    snprintf(sql, n, "%s %s %s", head, ms_dump_select, tail);
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg) == SQLITE_OK ? 0 : MS_EDB;
    if (rc)
        snprintf(err, errlen, "memscope_dump: %s", msg ? msg : sqlite3_errmsg(db));
    sqlite3_free(msg);
    free(sql);
    return rc;
}

int ms_dump_create(sqlite3 *db, char *err, size_t errlen)
{
    char *msg = NULL;
    if (sqlite3_exec(db, ms_dump_ddl, NULL, NULL, &msg) != SQLITE_OK) {
        snprintf(err, errlen, "memscope_dump: %s", msg ? msg : sqlite3_errmsg(db));
        sqlite3_free(msg);
        return MS_EDB;
    }
    return fill(db, "INSERT INTO memscope_dump", "ORDER BY e.id", err, errlen);
}

int ms_dump_refresh(sqlite3 *db, const char *ids_sql, char *err, size_t errlen)
{
    if (!ms_dump_is_table(db))
        return 0; /* a database of an older memscope (a view) or a compact one (none) */
    size_t n = strlen(ids_sql) + 64;
    char *tail = malloc(n);
    if (!tail) {
        return ms_errf(err, errlen, MS_ENOMEM, "memscope_dump: out of memory");
    }
    snprintf(tail, n, "AND e.id IN (%s) ORDER BY e.id", ids_sql);
    int rc = fill(db, "INSERT OR REPLACE INTO memscope_dump", tail, err, errlen);
    free(tail);
    return rc;
}

int ms_dump_create_file(const char *db_path, char *err, size_t errlen)
{
    sqlite3 *db;
    if (sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "cannot open %s: %s", db_path, sqlite3_errmsg(db));
        sqlite3_close(db);
        return MS_EDB;
    }
    int rc = 0;
    if (sqlite3_exec(db, "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; BEGIN", NULL, NULL,
                     NULL) != SQLITE_OK) {
        snprintf(err, errlen, "%s: %s", db_path, sqlite3_errmsg(db));
        rc = MS_EDB;
    }
    if (rc == 0)
        rc = ms_dump_create(db, err, errlen);
    if (rc == 0 && sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "%s: %s", db_path, sqlite3_errmsg(db));
        rc = MS_EDB;
    }
    if (sqlite3_close(db) != SQLITE_OK && rc == 0) {
        snprintf(err, errlen, "cannot close %s", db_path);
        rc = MS_EDB;
    }
    return rc;
}

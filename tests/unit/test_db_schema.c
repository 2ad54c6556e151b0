/* test_db_schema.c: src/common/db_schema.c, the database's SQL that the converter and the
 * snapshot import both run: the tables, indexes and memscope_dump's DDL and SELECT are valid
 * SQL together; memscope_dump is filled from events with the named kinds (a MALLOC row with its
 * Attr JSON, a user's MARK as MSTX) and leaves memscope's own marks out; and the SQL form of the
 * own-mark rule (MS_SQL_OWN_MARK) and its C form (ms_own_mark, db_ids.h) agree. */
#include "test.h"

#include "common/db_ids.h"
#include "common/db_schema.h"

#include <sqlite3.h>
#include <stdlib.h>

static void exec(sqlite3 *db, const char *sql)
{
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        fprintf(stderr, "SQL failed: %s\n", msg ? msg : "?");
        exit(1);
    }
}

static long long one_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st;
    CHECK_EQ(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    CHECK_EQ(sqlite3_step(st), SQLITE_ROW);
    long long v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* the text of the dump row with this ID's column col */
static void dump_col(sqlite3 *db, int id, const char *col, const char *want)
{
    char *sql = sqlite3_mprintf("SELECT \"%w\" FROM memscope_dump WHERE ID = %d", col, id);
    sqlite3_stmt *st;
    CHECK_EQ(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    CHECK_EQ(sqlite3_step(st), SQLITE_ROW);
    CHECK_STREQ((const char *)sqlite3_column_text(st, 0), want);
    sqlite3_finalize(st);
    sqlite3_free(sql);
}

static const char *const names[] = {
    "memscope-tag:ptr=0x10;size=8;owner=weight",
    "memscope-module:fwd model.layer1 123",
    "describe addr=0x10 owner=kv",
    "memscope-tag",
    "user mark",
    "describe",
    "memscope-pytest start 1",
    "Memscope-tag:x",
};

int main(void)
{
    sqlite3 *db;
    CHECK_EQ(sqlite3_open(":memory:", &db), SQLITE_OK);
    exec(db, ms_schema_sql);
    CHECK_EQ(one_int(db, "SELECT count(*) FROM layers"), 3);
    CHECK_EQ(one_int(db, "SELECT id FROM event_kinds WHERE name = 'MARK'"), MS_KIND_MARK);
    CHECK_EQ(one_int(db, "SELECT id FROM event_kinds WHERE name = 'MALLOC'"), MS_KIND_MALLOC);
    exec(db, "INSERT INTO processes (id, pid, exe) VALUES (1, 4242, '/bin/prog');"
             "INSERT INTO threads (id, process_id, tid) VALUES (1, 1, 4243);"
             "INSERT INTO owners VALUES (1, 'weight');"
             "INSERT INTO events (id, ts_ns, kind, layer, process_id, thread_id, addr, size, "
             "  allocation_id) VALUES (1, 100, " MS_SQL_MALLOC ", 1, 1, 1, 4096, 64, 1);"
             "INSERT INTO blocks (allocation_id, layer, process_id, thread_id, addr, size, "
             "  alloc_ns, alloc_event_id, owner_id) VALUES (1, 1, 1, 1, 4096, 64, 100, 1, 1);"
             "INSERT INTO events (id, ts_ns, kind, layer, process_id, thread_id, addr, "
             "  allocation_id) VALUES (2, 200, " MS_SQL_FREE ", 1, 1, 1, 4096, 1);");
    /* every name above as a MARK, ids 10.. */
    size_t nnames = sizeof names / sizeof names[0];
    for (size_t i = 0; i < nnames; i++) {
        char *sql =
            sqlite3_mprintf("INSERT INTO events (id, ts_ns, kind, layer, process_id, "
                            "thread_id, name) VALUES (%d, %d, " MS_SQL_MARK ", 0, 1, 1, %Q)",
                            (int)(10 + i), (int)(300 + i), names[i]);
        exec(db, sql);
        sqlite3_free(sql);
    }
    exec(db, ms_schema_index_sql);
    char *dump = ms_dump_create_sql();
    CHECK(dump != NULL);
    exec(db, dump);
    free(dump);

    dump_col(db, 1, "Event", "MALLOC");
    dump_col(db, 1, "Event Type", "HOST");
    dump_col(db, 1, "Ptr", "0x0000000000001000");
    dump_col(db, 1, "Attr",
             "{\"allocation_id\":\"1\",\"addr\":\"0x0000000000001000\","
             "\"size\":\"64\",\"owner\":\"weight\"}");
    dump_col(db, 1, "Process Id", "4242");
    dump_col(db, 2, "Event", "FREE");
    dump_col(db, 2, "Attr", "{\"allocation_id\":\"1\",\"addr\":\"0x0000000000001000\"}");

    /* own marks: left out of the dump; the SQL and the C rule agree, name by name */
    long long own = 0;
    for (size_t i = 0; i < nnames; i++) {
        /* the macro's text as it is, not through a printf (a LIKE pattern's '%') */
        static const char sql[] = "SELECT " MS_SQL_OWN_MARK(
            name) ", (SELECT count(*) FROM memscope_dump WHERE ID = e.id) FROM events e "
                  "WHERE id = ?1";
        sqlite3_stmt *st;
        CHECK_EQ(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
        sqlite3_bind_int(st, 1, (int)(10 + i));
        CHECK_EQ(sqlite3_step(st), SQLITE_ROW);
        int in_sql = sqlite3_column_int(st, 0), in_dump = sqlite3_column_int(st, 1);
        sqlite3_finalize(st);
        if (in_sql != ms_own_mark(names[i]))
            fprintf(stderr, "own mark rules disagree on names[%zu]\n", i);
        CHECK_EQ(in_sql, ms_own_mark(names[i]));
        CHECK_EQ(in_dump, !in_sql);
        own += in_sql;
    }
    /* the first three are memscope's, and only they: "Memscope-tag:x" is the user's in both
     * rules (SQL's LIKE, which ignores ASCII case, said otherwise) */
    CHECK_EQ(own, 3);
    CHECK_EQ(ms_own_mark(NULL), 0);
    dump_col(db, 14, "Event", "MSTX");
    dump_col(db, 14, "Event Type", "Mark");
    dump_col(db, 14, "Name", "user mark");
    CHECK_EQ(one_int(db, "SELECT count(*) FROM memscope_dump"), 2 + nnames - 3);
    sqlite3_close(db);
    return 0;
}

/* test_analyze_common.c: the analyses' shared helpers (src/analyze/common.c) on a database made
 * with the store's DDL: the names of processes (basenames), layers ("layer<N>" when unknown) and
 * owners, escaped for a terminal in a text report; the layer filter, as SQL and in C, that
 * leaves out the regions pools carve from and agrees with itself; the live-set replay per
 * (process, layer) (a block replaced at its address, a free without an allocation id ignored);
 * the run's start; which conversion tables are computed; bytes for people; oom:K. */
#include "test.h"

#include "analyze/analyze.h"
#include "common/db_ids.h"
#include "common/db_schema.h"

#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>

static void exec(sqlite3 *db, const char *sql)
{
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        fprintf(stderr, "SQL failed: %s\n", msg ? msg : "?");
        exit(1);
    }
}

static sqlite3 *make_db(void)
{
    sqlite3 *db;
    CHECK_EQ(sqlite3_open(":memory:", &db), SQLITE_OK);
    exec(db, ms_schema_sql);
    exec(db, "INSERT INTO processes (id, pid, exe) VALUES (1, 100, '/usr/bin/python3'), "
             "(2, 200, 'bare'), (3, 300, NULL);"
             "INSERT INTO layers VALUES (16, 'pool:arena', 'HOST', 'cpu'), "
             "(17, 'pool:slab', 'HOST', 'cpu'), (20, 'pool:big', 'HOST', 'cpu');"
             "INSERT INTO pools VALUES (1, 'arena', 16, 2), (2, 'slab', 17, 20);"
             "INSERT INTO owners VALUES (1, 'weight'), (3, 'evil\x1b[2J');");
    return db;
}

static void test_names(sqlite3 *db)
{
    struct ms_names n;
    char err[128] = "";
    CHECK_EQ(ms__names_load(db, &n, err, sizeof err), 0);
    CHECK_EQ(n.nprocs, 3);
    CHECK_STREQ(ms__names_proc(&n, 1)->exe, "python3");
    CHECK_EQ(ms__names_proc(&n, 1)->pid, 100);
    CHECK_STREQ(ms__names_proc(&n, 2)->exe, "bare");
    CHECK_STREQ(ms__names_proc(&n, 3)->exe, "?");
    CHECK(ms__names_proc(&n, 4) == NULL);
    CHECK_STREQ(ms__names_layer(&n, 1), "heap");
    CHECK_STREQ(ms__names_layer(&n, 2), "mmap");
    CHECK_STREQ(ms__names_layer(&n, 16), "pool:arena");
    CHECK_STREQ(ms__names_layer(&n, 5), "layer5");
    CHECK_STREQ(ms__names_layer(&n, 9999), "layer9999");
    CHECK_STREQ(ms__names_owner(&n, 1), "weight");
    CHECK(ms__names_owner(&n, 0) == NULL);
    CHECK(ms__names_owner(&n, 2) == NULL);
    CHECK(ms__names_owner(&n, 4) == NULL);
    CHECK_STREQ(ms__names_owner(&n, 3), "evil\x1b[2J"); /* JSON keeps the bytes */
    n.term = 1;                                         /* a text report escapes them */
    CHECK_STREQ(ms__names_owner(&n, 3), "evil\\x1b[2J");
    ms__names_release(&n);
    CHECK_EQ(n.nprocs, 0);
    ms__names_release(&n);
}

/* The SQL filter and the C set select the same layers. */
static void test_layers(sqlite3 *db)
{
    struct ms_analyze_opts o;
    ms_analyze_opts_init(&o);
    static const int64_t layers[] = {-1, 0, 1, 2, 3, 16, 17, 20, 21, 1024};
    /* every memory layer but the pools' reserves (2: mmap, 20) */
    static const int want_all[] = {0, 0, 1, 0, 1, 1, 1, 0, 1, 1};
    for (int pass = 0; pass < 2; pass++) {
        o.layer = pass ? 17 : 0;
        struct ms_layer_set s;
        CHECK_EQ(ms__layer_set_load(db, &o, &s), 0);
        char *where = ms__layer_filter(db, &o, "v");
        CHECK(where != NULL);
        for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++) {
            char *sql =
                sqlite3_mprintf("SELECT %s FROM (SELECT %lld AS v)", where, (long long)layers[i]);
            sqlite3_stmt *st;
            CHECK_EQ(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
            CHECK_EQ(sqlite3_step(st), SQLITE_ROW);
            int in_sql = sqlite3_column_int(st, 0);
            sqlite3_finalize(st);
            sqlite3_free(sql);
            int want = pass ? layers[i] == 17 : want_all[i];
            if (in_sql != want || ms__layer_selected(&s, layers[i]) != want)
                fprintf(stderr, "layer %lld (--layer %d): SQL %d, C %d, want %d\n",
                        (long long)layers[i], o.layer, in_sql, ms__layer_selected(&s, layers[i]),
                        want);
            CHECK_EQ(in_sql, want);
            CHECK_EQ(ms__layer_selected(&s, layers[i]), want);
        }
        sqlite3_free(where);
        ms__layer_set_release(&s);
        ms__layer_set_release(&s);
    }
}

static void test_live(void)
{
    struct ms_live l;
    ms__live_init(&l);
    struct ms_live_pl *p = ms__live_apply(&l, MS_KIND_MALLOC, 1, 1, 0x1000, 100, 1);
    CHECK(p != NULL);
    CHECK_EQ(p->live, 100);
    CHECK_EQ(p->blocks, 1);
    p = ms__live_apply(&l, MS_KIND_MALLOC, 1, 1, 0x2000, 50, 1);
    CHECK_EQ(p->live, 150);
    /* another process, another layer: sets of their own */
    p = ms__live_apply(&l, MS_KIND_MALLOC, 2, 1, 0x1000, 7, 1);
    CHECK_EQ(p->live, 7);
    p = ms__live_apply(&l, MS_KIND_MALLOC, 1, 2, 0x1000, 4096, 1);
    CHECK_EQ(p->live, 4096);
    CHECK_EQ(l.n, 3);
    /* a MALLOC at a live address replaces the block there */
    p = ms__live_apply(&l, MS_KIND_MALLOC, 1, 1, 0x1000, 30, 1);
    CHECK_EQ(p->live, 80);
    CHECK_EQ(p->blocks, 2);
    /* a free of an unknown address, or without an allocation id, changes nothing */
    p = ms__live_apply(&l, MS_KIND_FREE, 1, 1, 0x3000, 0, 1);
    CHECK_EQ(p->live, 80);
    p = ms__live_apply(&l, MS_KIND_FREE, 1, 1, 0x2000, 0, 0);
    CHECK_EQ(p->live, 80);
    p = ms__live_apply(&l, MS_KIND_FREE, 1, 1, 0x2000, 0, 1);
    CHECK_EQ(p->live, 30);
    CHECK_EQ(p->blocks, 1);
    p = ms__live_apply(&l, MS_KIND_FREE, 1, 1, 0x2000, 0, 1); /* twice: nothing */
    CHECK_EQ(p->live, 30);
    /* other kinds are ignored; address INT64_MIN (the map's empty key) is a block too */
    p = ms__live_apply(&l, MS_KIND_MARK, 1, 1, 0x1000, 999, 1);
    CHECK_EQ(p->live, 30);
    p = ms__live_apply(&l, MS_KIND_MALLOC, 2, 1, INT64_MIN, 5, 1);
    CHECK_EQ(p->live, 12);
    p = ms__live_apply(&l, MS_KIND_FREE, 2, 1, INT64_MIN, 0, 1);
    CHECK_EQ(p->live, 7);
    CHECK_EQ(p->blocks, 1);
    ms__live_release(&l);
    CHECK_EQ(l.n, 0);
}

static void test_misc(sqlite3 *db)
{
    CHECK_EQ(ms__run_start_ns(db), 0);
    exec(db, "INSERT INTO events (id, ts_ns, kind, layer, process_id, thread_id) VALUES "
             "(1, 5000, 5, 0, 1, 1), (2, 4000, 5, 0, 1, 1)");
    CHECK_EQ(ms__run_start_ns(db), 4000);
    exec(db, "INSERT INTO meta VALUES ('start_time_ns', '1234')");
    CHECK_EQ(ms__run_start_ns(db), 1234);
    CHECK_EQ(ms__computed(db, "events"), 1);
    CHECK_EQ(ms__computed(db, "owners"), 1);
    CHECK_EQ(ms__computed(db, "blocks"), 0);
    CHECK_EQ(ms__computed(db, "no_such_table"), 0);
    CHECK_EQ(ms__retagged(db), 0);
    CHECK_EQ(ms__has_column(db, "pools", "reserve_layer"), 1);
    CHECK_EQ(ms__has_column(db, "pools", "nope"), 0);

    char b[32];
    ms_human_bytes(b, sizeof b, 10239);
    CHECK_STREQ(b, "10239 B");
    ms_human_bytes(b, sizeof b, 10240);
    CHECK_STREQ(b, "10.0 KiB");
    ms_human_bytes(b, sizeof b, -3 * 1048576LL * 5);
    CHECK_STREQ(b, "-15.0 MiB");
    ms_human_bytes(b, sizeof b, 10LL << 30);
    CHECK_STREQ(b, "10.0 GiB");

    CHECK_EQ(ms_oom_k("oom"), 10);
    CHECK_EQ(ms_oom_k("oom:1"), 1);
    CHECK_EQ(ms_oom_k("oom:1000"), 1000);
    CHECK_EQ(ms_oom_k("oom:1001"), 0);
    CHECK_EQ(ms_oom_k("oom:0"), 0);
    CHECK_EQ(ms_oom_k("oom:"), 0);
    CHECK_EQ(ms_oom_k("oom:5x"), 0);
    CHECK_EQ(ms_oom_k("oomx"), 0);
    CHECK_EQ(ms_oom_k("leaks"), 0);
    CHECK(ms_analysis_find("oom:5") == ms_analysis_find("oom"));
    CHECK(ms_analysis_find("oom") != NULL);
    CHECK(ms_analysis_find("no-such-analysis") == NULL);
}

int main(void)
{
    sqlite3 *db = make_db();
    test_names(db);
    test_layers(db);
    test_live();
    test_misc(db);
    sqlite3_close(db);
    return 0;
}

/* fuzz_view_query.c: fuzz target for the viewer's queries (src/view/api.c): an input is a
 * request as the server hands it over, "PATH?QUERY" (the query split at '&' and '=', as
 * libmicrohttpd does), answered by ms_view_api() over a small real database made once: a
 * heap run with two processes' worth of blocks, steps, owners and stacks. libFuzzer target
 * under MEMSCOPE_FUZZ; else (MS_FUZZ_REPLAY_MAIN) a program that replays the seed files. */
#include "common/db_schema.h"
#include "view/api.h"

#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_PARAMS 16

struct params {
    char *k[MAX_PARAMS], *v[MAX_PARAMS];
    int n;
};

static const char *param(void *ctx, const char *name)
{
    const struct params *p = ctx;
    for (int i = 0; i < p->n; i++)
        if (!strcmp(p->k[i], name))
            return p->v[i];
    return NULL;
}

/* The database: schema, meta, 200 blocks over 3 layers of 2 processes, 3 steps, 2 owners. */
static int make_db(const char *path)
{
    sqlite3 *db;
    if (sqlite3_open(path, &db) != SQLITE_OK)
        return -1;
    char *err = NULL;
    int rc = sqlite3_exec(db, ms_schema_sql, NULL, NULL, &err);
    rc |= sqlite3_exec(db,
                       "INSERT INTO meta VALUES ('format_version', 1), ('command_line', "
                       "'[\"fuzz\"]');"
                       "INSERT INTO processes (id, pid, exe) VALUES (1, 10, 'a'), (2, 11, 'b');"
                       "INSERT INTO owners VALUES (1, 'model@weight'), (2, 'model@activation');"
                       "INSERT INTO stacks (id, process_id, depth, c_text, py_text) VALUES "
                       "(1, 1, 2, 'f (a.c:1)\nmain (a.c:9)', NULL),"
                       " (2, 2, 1, 'g (b.c:2)', 'x.py(3): h');",
                       NULL, NULL, &err);
    sqlite3_stmt *st;
    rc |= sqlite3_prepare_v2(db,
                             "INSERT INTO events (id, ts_ns, kind, layer, process_id, thread_id, "
                             "addr, size, stack_id, allocation_id, name) VALUES "
                             "(?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?)",
                             -1, &st, NULL);
    int64_t id = 1;
    for (int i = 0; rc == 0 && i < 200; i++) {
        for (int kind = 1; kind <= 2; kind++) {
            if (kind == 2 && i % 7 == 0)
                continue; /* some never freed */
            sqlite3_bind_int64(st, 1, id);
            sqlite3_bind_int64(st, 2, 1000 + i * 10 + (kind == 2 ? 25 : 0));
            sqlite3_bind_int(st, 3, kind);
            sqlite3_bind_int(st, 4, 1 + i % 2);
            sqlite3_bind_int(st, 5, 1 + i % 3 / 2);
            sqlite3_bind_int64(st, 6, 0x1000 + i * 64);
            sqlite3_bind_int64(st, 7, 16 + i);
            sqlite3_bind_int(st, 8, 1 + i % 2);
            sqlite3_bind_int64(st, 9, i + 1);
            sqlite3_bind_null(st, 10);
            rc |= sqlite3_step(st) != SQLITE_DONE;
            sqlite3_reset(st);
            id++;
        }
        if (i % 70 == 0) {
            sqlite3_bind_int64(st, 1, id++);
            sqlite3_bind_int64(st, 2, 1000 + i * 10);
            sqlite3_bind_int(st, 3, 4);
            sqlite3_bind_int(st, 4, 0);
            sqlite3_bind_int(st, 5, 1);
            for (int k = 6; k <= 9; k++)
                sqlite3_bind_null(st, k);
            sqlite3_bind_text(st, 10, i ? "2" : "1", -1, SQLITE_STATIC);
            rc |= sqlite3_step(st) != SQLITE_DONE;
            sqlite3_reset(st);
        }
    }
    sqlite3_finalize(st);
    rc |= sqlite3_exec(db,
                       "INSERT INTO blocks (allocation_id, layer, process_id, thread_id, addr, "
                       "size, alloc_ns, alloc_event_id, owner_id) SELECT allocation_id, layer, "
                       "process_id, 1, addr, size, ts_ns, id, 1 + allocation_id % 2 FROM events "
                       "WHERE kind = 1",
                       NULL, NULL, &err);
    if (err)
        fprintf(stderr, "fuzz_view_query: %s\n", err);
    sqlite3_free(err);
    sqlite3_close(db);
    return rc ? -1 : 0;
}

static struct ms_view *view(void)
{
    static struct ms_view v;
    static int state; /* 0 not made, 1 made, -1 failed */
    if (state)
        return state > 0 ? &v : NULL;
    char dir[] = "/tmp/fuzz-view-XXXXXX", path[64], err[256];
    state = -1;
    if (!mkdtemp(dir))
        return NULL;
    snprintf(path, sizeof path, "%s/v.db", dir);
    if (make_db(path) == 0 && ms_view_open(&v, path, err, sizeof err) == 0)
        state = 1;
    else
        fprintf(stderr, "fuzz_view_query: no database: %s\n", err);
    unlink(path); /* the view keeps it open; the analyses, which open it by name, say it is gone */
    rmdir(dir);
    return state > 0 ? &v : NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ms_view *v = view();
    if (!v || size > 4096)
        return 0;
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = 0; /* the server's strings end at the first NUL too */
    struct params p = {.n = 0};
    char *q = strchr(s, '?');
    if (q) {
        *q++ = 0;
        for (char *kv = strtok(q, "&"); kv && p.n < MAX_PARAMS; kv = strtok(NULL, "&")) {
            char *eq = strchr(kv, '=');
            p.k[p.n] = kv;
            p.v[p.n++] = eq ? (*eq = 0, eq + 1) : (char *)"";
        }
    }
    char *body;
    size_t len;
    int status = ms_view_api(v, s, param, &p, &body, &len);
    if (status != 500 && (!body || !len || body[len - 1] != '\n'))
        abort(); /* every answer but out-of-memory is a whole JSON document */
    free(body);
    free(s);
    return 0;
}

#ifdef MS_FUZZ_REPLAY_MAIN
#include "replay_main.h"
#endif

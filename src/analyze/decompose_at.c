/* decompose_at.c: the blocks live at a given time in a compact database, from a replay of its
 * traces up to that time (analyze decompose --at; a compact database keeps the blocks rows of
 * some moments only). Workload: one replay of the run's events; a map of the blocks live at
 * each point, by allocation id and by (process, layer, address). */
#include "analyze.h"

#include "common/db_ids.h"
#include "common/ms_error.h"
#include "store/store.h"

#include <stdlib.h>
#include <string.h>

/* A block live at --at in a compact database's replay. */
struct at_block {
    int64_t process_id, layer, size, stack_id, owner_id, alloc_event_id;
    int64_t addr;
};

/* The replay up to --at: the blocks live then, by allocation id, and which is live at each
 * (process, layer, address) (an allocation there ends the block it replaces). */
struct at_ctx {
    int64_t at, eid;
    int done;
    struct ms_u64map live;     /* allocation id -> struct at_block */
    struct ms_u64map by_addr;  /* hash of (process, layer, address) -> allocation id */
    struct ms_u64map owner_of; /* allocation id -> its last owner, for the blocks kept */
};

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* The by_addr slot of (process, layer, addr): the one holding it, or a free one. */
static int64_t *addr_slot(struct at_ctx *x, int64_t proc, int64_t layer, int64_t addr, int create)
{
    uint64_t k = mix64((uint64_t)addr ^ mix64((uint64_t)layer ^ mix64((uint64_t)proc)));
    for (;;) {
        int64_t key = (int64_t)(k & INT64_MAX); /* never INT64_MIN */
        int64_t *id = ms_u64map_get(&x->by_addr, key);
        if (!id) {
            if (!create)
                return NULL;
            int isnew;
            return ms_u64map_put(&x->by_addr, key, &isnew);
        }
        const struct at_block *b = ms_u64map_get(&x->live, *id);
        if (b && b->process_id == proc && b->layer == layer && b->addr == addr)
            return id;
        if (!b) { /* stale: its block ended */
            if (!create)
                return NULL;
            return id;
        }
        k = mix64(k + 1);
    }
}

static int at_replayed(void *ctx, const struct ms_store_row *r)
{
    struct at_ctx *x = ctx;
    if (x->done || r->ts_ns > x->at) {
        x->done = 1;
        return 0; /* NEEDSWORK: the replay could stop here */
    }
    x->eid = r->id;
    if ((r->kind != MS_KIND_MALLOC && r->kind != MS_KIND_FREE) || !r->allocation_id)
        return 0;
    if (r->kind == MS_KIND_FREE) {
        const struct at_block *b = ms_u64map_get(&x->live, r->allocation_id);
        if (b) {
            int64_t *slot = addr_slot(x, b->process_id, b->layer, b->addr, 0);
            if (slot)
                *slot = 0;
            ms_u64map_del(&x->live, r->allocation_id, NULL);
        }
        return 0;
    }
    int64_t *slot = addr_slot(x, r->process_id, r->layer, r->addr, 1);
    if (!slot)
        return MS_ENOMEM;
    if (*slot && ms_u64map_get(&x->live, *slot))
        ms_u64map_del(&x->live, *slot, NULL); /* replaced without a free */
    int isnew;
    struct at_block *b = ms_u64map_put(&x->live, r->allocation_id, &isnew);
    slot = addr_slot(x, r->process_id, r->layer, r->addr, 1); /* the put may have moved it */
    if (!b || !slot)
        return MS_ENOMEM;
    const int64_t *w = ms_u64map_get(&x->owner_of, r->allocation_id);
    *b = (struct at_block){r->process_id,        r->layer, r->size, r->stack_id,
                           w ? *w : r->owner_id, r->id,    r->addr};
    *slot = r->allocation_id;
    return 0;
}

int ms__blocks_at(sqlite3 *db, int has_owner, int64_t at, int64_t *eid, char *err, size_t errlen)
{
    struct at_ctx x = {.at = at};
    ms_u64map_init(&x.live, sizeof(struct at_block), MS_U64MAP_MAX);
    ms_u64map_init(&x.by_addr, sizeof(int64_t), MS_U64MAP_MAX);
    ms_u64map_init(&x.owner_of, sizeof(int64_t), MS_U64MAP_MAX);
    sqlite3_stmt *st = NULL;
    int rc = 0;
    if (has_owner && sqlite3_prepare_v2(db,
                                        "SELECT allocation_id, COALESCE(owner_id, 0) FROM "
                                        "blocks",
                                        -1, &st, NULL) == SQLITE_OK) {
        int isnew;
        while (!rc && sqlite3_step(st) == SQLITE_ROW) {
            int64_t *v = ms_u64map_put(&x.owner_of, sqlite3_column_int64(st, 0), &isnew);
            if (!v)
                rc = MS_ENOMEM;
            else
                *v = sqlite3_column_int64(st, 1);
        }
        sqlite3_finalize(st);
    }
    if (rc == 0)
        rc = ms_store_replay(sqlite3_db_filename(db, "main"), at_replayed, &x, err, errlen);
    if (rc == 0 &&
        sqlite3_exec(db,
                     "CREATE TEMP TABLE blocks (allocation_id INTEGER PRIMARY KEY, layer, "
                     "process_id, size, stack_id, owner_id, alloc_event_id, free_ns, "
                     "free_event_id)",
                     NULL, NULL, NULL) != SQLITE_OK)
        rc = MS_EDB;
    if (rc == 0 && sqlite3_prepare_v2(db,
                                      "INSERT INTO temp.blocks VALUES (?,?,?,?,?,?,?,NULL,"
                                      "NULL)",
                                      -1, &st, NULL) != SQLITE_OK)
        rc = MS_EDB;
    uint64_t key;
    void *val;
    for (size_t pos = 0; rc == 0 && ms_u64map_next(&x.live, &pos, &key, &val);) {
        const struct at_block *b = val;
        sqlite3_bind_int64(st, 1, (int64_t)key);
        sqlite3_bind_int64(st, 2, b->layer);
        sqlite3_bind_int64(st, 3, b->process_id);
        sqlite3_bind_int64(st, 4, b->size);
        if (b->stack_id)
            sqlite3_bind_int64(st, 5, b->stack_id);
        else
            sqlite3_bind_null(st, 5);
        if (b->owner_id)
            sqlite3_bind_int64(st, 6, b->owner_id);
        else
            sqlite3_bind_null(st, 6);
        sqlite3_bind_int64(st, 7, b->alloc_event_id);
        if (sqlite3_step(st) != SQLITE_DONE)
            rc = MS_EDB;
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    *eid = x.eid;
    if (rc < 0)
        sqlite3_exec(db, "DROP TABLE IF EXISTS temp.blocks", NULL, NULL, NULL);
    ms_u64map_release(&x.live);
    ms_u64map_release(&x.by_addr);
    ms_u64map_release(&x.owner_of);
    return rc;
}

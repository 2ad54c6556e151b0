/* batch.c: multi-row INSERTs (see batch.h). Workload: one ms_batch_row per events or blocks row,
 * hundreds of millions in a big run; everything here is per row or per 64 rows. */
#include "batch.h"

#include "common/ms_error.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TEXT (64u << 20) /* copied text of one batch of rows */

void ms_batch_release(struct ms_batch *b)
{
    if (!b)
        return;
    sqlite3_finalize(b->many);
    sqlite3_finalize(b->one);
    free(b->cells);
    free(b->bound);
    free(b->text);
    memset(b, 0, sizeof *b);
}

/* "INSERT INTO table VALUES (?,...),..." with rows rows of ncols parameters; NULL when out of
 * memory. The caller frees it. */
static char *insert_sql(const char *table, int ncols, int rows)
{
    size_t tl = strlen(table), row = 2 * (size_t)ncols + 2;
    char *sql = malloc(tl + 32 + (size_t)rows * row);
    if (!sql)
        return NULL;
    char *p = sql;
    memcpy(p, "INSERT INTO ", 12);
    p += 12;
    memcpy(p, table, tl);
    p += tl;
    memcpy(p, " VALUES ", 8);
    p += 8;
    for (int r = 0; r < rows; r++) {
        *p++ = r ? ',' : '(';
        if (r)
            *p++ = '(';
        for (int k = 0; k < ncols; k++) {
            if (k)
                *p++ = ',';
            *p++ = '?';
        }
        *p++ = ')';
    }
    *p = 0;
    return sql;
}

static int prepare(sqlite3 *db, const char *table, int ncols, int rows, sqlite3_stmt **st)
{
    char *sql = insert_sql(table, ncols, rows);
    if (!sql)
        return MS_ENOMEM;
    int rc = sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL);
    free(sql);
    return rc == SQLITE_OK ? 0 : MS_EDB;
}

int ms_batch_init(struct ms_batch *b, sqlite3 *db, const char *table, int ncols, int ipk)
{
    memset(b, 0, sizeof *b);
    if (ncols < 1 || ncols > MS_BATCH_MAX_COLS)
        return MS_EINVAL;
    b->db = db;
    b->ncols = ncols;
    b->ipk = ipk;
    size_t nbound = (size_t)(MS_BATCH_ROWS + 1) * (size_t)ncols;
    b->cells = malloc((size_t)MS_BATCH_ROWS * (size_t)ncols * sizeof *b->cells);
    b->bound = malloc(nbound * sizeof *b->bound);
    if (!b->cells || !b->bound)
        return MS_ENOMEM;
    for (size_t i = 0; i < nbound; i++)
        b->bound[i].type = MS_CELL_COPY; /* unknown: the first use binds every parameter */
    int rc = prepare(db, table, ncols, MS_BATCH_ROWS, &b->many);
    if (rc == 0)
        rc = prepare(db, table, ncols, 1, &b->one);
    return rc;
}

/* Whether parameter state *bound already holds the value of cell c. */
static int same(const struct ms_cell *c, const struct ms_cell *bound)
{
    if (c->type != bound->type)
        return 0;
    switch (c->type) {
    case MS_CELL_NULL: return 1;
    case MS_CELL_INT: return c->i == bound->i;
    case MS_CELL_TEXT: return c->s == bound->s && c->len == bound->len;
    default: return 0; /* a copy lives only as long as its batch */
    }
}

/* Binds count cells to parameters 1..count of st, whose current values bound describes. */
static int bind_cells(struct ms_batch *b, sqlite3_stmt *st, struct ms_cell *bound,
                      const struct ms_cell *cells, int count)
{
    for (int k = 0; k < count; k++) {
        const struct ms_cell *c = &cells[k];
        if (same(c, &bound[k]))
            continue;
        int rc;
        switch (c->type) {
        case MS_CELL_INT: rc = sqlite3_bind_int64(st, k + 1, c->i); break;
        case MS_CELL_TEXT: rc = sqlite3_bind_text(st, k + 1, c->s, c->len, SQLITE_STATIC); break;
        case MS_CELL_COPY:
            rc = sqlite3_bind_text(st, k + 1, b->text + c->i, c->len, SQLITE_STATIC);
            break;
        default: rc = sqlite3_bind_null(st, k + 1); break;
        }
        if (rc != SQLITE_OK) {
            bound[k].type = MS_CELL_COPY;
            return MS_EDB;
        }
        bound[k] = *c;
    }
    return 0;
}

static int run(sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : MS_EDB;
}

/* The keys of the buffered rows that follow the largest key written before them become NULL
 * (SQLite then gives them that largest key + 1, the same value, without a search). */
static void append_keys(struct ms_batch *b)
{
    for (int r = 0; r < b->n; r++) {
        struct ms_cell *key = &b->cells[(size_t)r * (size_t)b->ncols];
        assert(key->type == MS_CELL_INT);
        /* SQLite's new key: 1 in an empty table, else the largest key + 1. */
        int64_t k = key->i;
        if (b->have_key ? k != INT64_MIN && k != INT64_MAX && k - 1 == b->max_key : k == 1)
            key->type = MS_CELL_NULL;
        if (!b->have_key || k > b->max_key)
            b->max_key = k;
        b->have_key = 1;
    }
}

int ms_batch_flush(struct ms_batch *b)
{
    int rc = 0;
    if (b->ipk)
        append_keys(b);
    if (b->n == MS_BATCH_ROWS) {
        rc = bind_cells(b, b->many, b->bound, b->cells, b->n * b->ncols);
        if (rc == 0)
            rc = run(b->many);
    } else {
        struct ms_cell *bound = b->bound + (size_t)MS_BATCH_ROWS * (size_t)b->ncols;
        for (int r = 0; r < b->n && rc == 0; r++) {
            rc = bind_cells(b, b->one, bound, b->cells + (size_t)r * (size_t)b->ncols, b->ncols);
            if (rc == 0)
                rc = run(b->one);
        }
    }
    b->n = 0;
    b->text_len = 0;
    return rc;
}

int ms_batch_row(struct ms_batch *b, struct ms_cell **row)
{
    if (b->n == MS_BATCH_ROWS) {
        int rc = ms_batch_flush(b);
        if (rc < 0)
            return rc;
    }
    *row = &b->cells[(size_t)b->n++ * (size_t)b->ncols];
    return 0;
}

int ms_batch_copy(struct ms_batch *b, struct ms_cell *c, const char *s, size_t len)
{
    if (len > MAX_TEXT - b->text_len)
        return MS_ENOMEM;
    if (!b->text || b->text_len + len > b->text_cap) { /* empty text too: NULL would bind NULL */
        size_t cap = b->text_cap ? b->text_cap : 4096;
        while (cap < b->text_len + len)
            cap *= 2;
        char *t = realloc(b->text, cap);
        if (!t)
            return MS_ENOMEM;
        b->text = t;
        b->text_cap = cap;
    }
    if (len)
        memcpy(b->text + b->text_len, s, len);
    c->type = MS_CELL_COPY;
    c->i = (int64_t)b->text_len;
    c->len = (int)len;
    b->text_len += len;
    return 0;
}

/* batch.h: multi-row INSERTs for the store's high-volume tables (events, blocks).
 *
 * Used by the conversion (convert_rows.c, convert_blocks.c), which writes one events row per
 * traced event and one blocks row per allocation. A one-row INSERT makes SQLite start and halt a statement, open a cursor and seek
 * from the root of the table's b-tree for every row; an INSERT of many rows pays that once per
 * statement, and its cursor appends the next row without a new seek. So rows are buffered here
 * and written MS_BATCH_ROWS at a time by one prepared `INSERT INTO t VALUES (?,...),(?,...),...`
 * (the few rows left at the end go through a one-row statement). Binding is most of what is
 * left per row: a parameter that already holds the value it is about to get (sqlite3_reset keeps
 * bindings) is not bound again, which skips most unchanging columns (process, layer, NULLs).
 * And the seek: SQLite finds the place of a row with an explicit INTEGER PRIMARY KEY by a binary
 * search from the root (OP_NotExists), but appends a row whose key is NULL at the end (OP_NewRowid:
 * the largest key + 1). The batch knows the largest key of the table, because every row of the
 * table goes through it, so a row whose key is that + 1 has its key bound as NULL: same row, no
 * search.
 *
 * The table's rows, their values and their order of insertion are exactly those of one-row
 * INSERTs made in the order of ms_batch_row() calls. */
#ifndef MS_STORE_BATCH_H
#define MS_STORE_BATCH_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

/* Rows per multi-row statement: 64 rows of up to 15 columns stay under SQLite's oldest limit of
 * 999 parameters, and larger statements gain little (the per-statement part is already small). */
#define MS_BATCH_ROWS 64
#define MS_BATCH_MAX_COLS 15

enum ms_cell_type {
    MS_CELL_NULL,
    MS_CELL_INT,
    MS_CELL_TEXT, /* s: text that stays valid and unchanged until ms_batch_release */
    MS_CELL_COPY, /* text copied into the batch (i: its offset there) */
};

/* One value of a buffered row. len: bytes of text, -1 for NUL-terminated. */
struct ms_cell {
    int64_t i;
    const char *s;
    int len;
    int type;
};

struct ms_batch {
    sqlite3 *db;
    sqlite3_stmt *many; /* MS_BATCH_ROWS rows */
    sqlite3_stmt *one;  /* one row, for the rows left at the end */
    int ncols;
    int ipk;               /* column 0 is the table's INTEGER PRIMARY KEY */
    int have_key;          /* ipk: a row was written */
    int64_t max_key;       /* ipk: the largest key written so far */
    int n;                 /* rows buffered */
    struct ms_cell *cells; /* MS_BATCH_ROWS * ncols: the buffered rows */
    struct ms_cell *bound; /* (MS_BATCH_ROWS + 1) * ncols: what each parameter of many, then
                             * of one, holds now (type MS_CELL_COPY: unknown, bind again) */
    char *text;            /* MS_CELL_COPY bytes of the buffered rows */
    size_t text_len, text_cap;
};

/* Prepares the statements for table (ncols columns, 1..MS_BATCH_MAX_COLS) of db. ipk nonzero:
 * column 0 is the table's INTEGER PRIMARY KEY, the table is empty and every row written to it
 * from now on goes through this batch, with a non-NULL key. Returns 0, or MS_EDB
 * (sqlite3_errmsg(db) says why) or MS_ENOMEM. Release the batch in either case. */
int ms_batch_init(struct ms_batch *b, sqlite3 *db, const char *table, int ncols, int ipk);

/* Finalizes the statements and frees the buffers; buffered rows are dropped (flush first).
 * Accepts NULL and a batch whose init failed or never ran (zeroed). */
void ms_batch_release(struct ms_batch *b);

/* Starts a row: *row points at its ncols cells, which the caller sets, all of them, before the
 * next call on the batch. Writes the buffered rows first when the buffer is full. Returns 0 or
 * the error of ms_batch_flush. */
int ms_batch_row(struct ms_batch *b, struct ms_cell **row);

/* Writes every buffered row. Returns 0, MS_EDB (sqlite3_errmsg says why; the rows of the
 * failed statement may be partly written) or MS_ENOMEM. */
int ms_batch_flush(struct ms_batch *b);

/* Sets cell c of the row being built to a copy of the len bytes at s. Returns 0 or MS_ENOMEM
 * (the copies of one batch are capped at 64 MiB). */
int ms_batch_copy(struct ms_batch *b, struct ms_cell *c, const char *s, size_t len);

static inline void ms_cell_int(struct ms_cell *c, int64_t v)
{
    c->type = MS_CELL_INT;
    c->i = v;
}

static inline void ms_cell_null(struct ms_cell *c)
{
    c->type = MS_CELL_NULL;
}

/* v when present, else NULL. */
static inline void ms_cell_opt(struct ms_cell *c, int64_t v, int present)
{
    c->type = present ? MS_CELL_INT : MS_CELL_NULL;
    c->i = v;
}

/* s (NULL: a NULL value) must stay valid and unchanged until ms_batch_release: string literals
 * and other static text. */
static inline void ms_cell_static(struct ms_cell *c, const char *s)
{
    c->type = s ? MS_CELL_TEXT : MS_CELL_NULL;
    c->s = s;
    c->len = -1;
}

#endif

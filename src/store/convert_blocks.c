/* convert_blocks.c: the conversion's blocks rows: the window that writes them in allocation
 * order, and, in a compact conversion, the thread that writes the rows it keeps while pass 2
 * matches the heap events. Called by the sinks (sink_full.c, sink_compact.c), convert_rows.c
 * (the drain at the end) and convert_compact.c (the kept blocks). Workload: one row per closed block of a full database; in a compact one
 * the blocks live at a step's end, an OOM or the exit (a third of a training run's blocks). */
#include "convert_internal.h"

/* Rows per chunk handed to the writer's thread (about 150 KiB), and rows written per hold of
 * the connection: an annotation of pass 2 waits at most that many rows (about 50 us). */
#define KEPT_CHUNK 1024
#define ROWS_PER_HOLD 64

struct kept_chunk {
    struct kept_chunk *next;
    size_t n;
    struct closed_block rows[KEPT_CHUNK];
};

int conv__block_row(struct conv *c, const struct closed_block *cb)
{
    const struct block *b = &cb->b;
    struct ms_cell *row;
    int rc = ms_batch_row(&c->blocks_ins, &row);
    if (rc < 0)
        return conv__batch_fail(c, rc, "insert block");
    ms_cell_int(&row[0], b->alloc_id);
    ms_cell_int(&row[1], cb->layer);
    ms_cell_int(&row[2], cb->process_id);
    ms_cell_int(&row[3], b->thread_id);
    ms_cell_int(&row[4], b->addr);
    ms_cell_int(&row[5], b->size);
    ms_cell_static(&row[6], b->func);
    ms_cell_int(&row[7], b->alloc_ns);
    ms_cell_opt(&row[8], cb->free_ns, cb->have_free);
    ms_cell_int(&row[9], b->alloc_event_id);
    ms_cell_opt(&row[10], cb->free_event, cb->have_free && cb->free_event);
    ms_cell_opt(&row[11], b->stack_id, b->stack_id != 0);
    ms_cell_opt(&row[12], b->owner_id, b->owner_id != 0);
    ms_cell_int(&row[13], b->step);
    return 0;
}

/* Writes the waiting rows in id order from closed_next: through every id below upto, passing
 * over the ids of blocks still live (written out of order when they close), then on while the
 * next id is waiting. */
static int closed_drain(struct conv *c, int64_t upto)
{
    int rc = 0;
    for (;; c->closed_next++) {
        struct closed_block *cb = &c->closed[(uint64_t)c->closed_next & (REORDER - 1)];
        if (cb->b.alloc_id != c->closed_next) {
            if (c->closed_next >= upto)
                return 0;
            continue; /* still live: passed over */
        }
        if ((rc = conv__block_row(c, cb)) < 0)
            return rc;
        cb->b.alloc_id = 0;
    }
}

/* Blocks close in about allocation order (most live briefly), and rows written in key order are
 * appended to the table's b-tree, where a row out of order costs SQLite a search from the root
 * and page splits (about 40% of a row's cost on churn). The window holds REORDER rows (8 MiB);
 * a block live longer than REORDER later allocations is passed over and its row written out of
 * order when it closes. */
int conv__write_block(struct conv *c, const struct closed_block *cb)
{
    int64_t id = cb->b.alloc_id;
    if (!c->closed) {
        c->closed = calloc(REORDER, sizeof *c->closed);
        if (!c->closed)
            return conv__oom(c, "blocks");
        c->closed_next = 1;
    }
    if (id < c->closed_next)
        return conv__block_row(c, cb); /* passed over while it was live */
    int rc = 0;
    if (id - c->closed_next >= (int64_t)REORDER)
        rc = closed_drain(c, id - (int64_t)REORDER + 1);
    if (rc < 0)
        return rc;
    c->closed[(uint64_t)id & (REORDER - 1)] = *cb;
    return id == c->closed_next ? closed_drain(c, 0) : 0;
}

int conv__drain_blocks(struct conv *c)
{
    return c->closed ? closed_drain(c, c->next_alloc + 1) : 0;
}

/* ---- The kept blocks' thread (compact output) ------------------------------------------------ */

/* Every chunk of the queue, waiting for one; NULL once the queue is closed and empty.
 * *failed: the thread or the conversion stopped on an error (the chunks are only freed). */
static struct kept_chunk *next_chunks(struct conv *c, int *failed)
{
    pthread_mutex_lock(&c->kept_mu);
    while (!c->kept_head && !c->kept_closed)
        pthread_cond_wait(&c->kept_cv, &c->kept_mu);
    struct kept_chunk *k = c->kept_head;
    c->kept_head = c->kept_tail = NULL;
    *failed = c->kept_rc != 0;
    pthread_mutex_unlock(&c->kept_mu);
    return k;
}

int conv__cmp_block_ref(const void *a, const void *b)
{
    const struct block_ref *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Writes the rows of the chunks k.., in allocation order. The kept blocks live long (across a
 * step's end): nearly every row comes after rows of later ids and costs SQLite a search from
 * the root; in id order, the searches of a batch go down to the same pages one after the
 * other. Holds the connection ROWS_PER_HOLD rows at a time. */
static int write_chunks(struct conv *c, const struct kept_chunk *k)
{
    size_t n = 0;
    for (const struct kept_chunk *x = k; x; x = x->next)
        n += x->n;
    struct block_ref *refs = malloc(n * sizeof *refs);
    if (!refs)
        return conv__oom(c, "blocks of the compact database");
    n = 0;
    for (const struct kept_chunk *x = k; x; x = x->next)
        for (size_t i = 0; i < x->n; i++)
            refs[n++] = (struct block_ref){x->rows[i].b.alloc_id, &x->rows[i]};
    qsort(refs, n, sizeof *refs, conv__cmp_block_ref);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i += ROWS_PER_HOLD) {
        size_t end = i + ROWS_PER_HOLD < n ? i + ROWS_PER_HOLD : n;
        pthread_mutex_lock(&c->db_mu);
        for (size_t j = i; j < end && rc == 0; j++)
            rc = conv__write_block(c, refs[j].cb);
        pthread_mutex_unlock(&c->db_mu);
    }
    free(refs);
    return rc;
}

/* The thread: writes the rows of the chunks queued, all those waiting at a time (the connection
 * is also used by the symbolization's thread and pass 2's annotations). After an error it only
 * frees what comes, and pass 2 stops at its next chunk. */
static void *write_kept(void *arg)
{
    struct conv *c = arg;
    struct kept_chunk *k;
    int failed;
    while ((k = next_chunks(c, &failed))) {
        int rc = failed ? 0 : write_chunks(c, k);
        while (k) {
            struct kept_chunk *next = k->next;
            free(k);
            k = next;
        }
        if (rc < 0) {
            pthread_mutex_lock(&c->kept_mu);
            c->kept_rc = rc;
            pthread_mutex_unlock(&c->kept_mu);
        }
    }
    return NULL;
}

int conv__kept_start(struct conv *c)
{
    if (pthread_create(&c->kept_thread, NULL, write_kept, c) == 0)
        c->kept_running = 1;
    return 0; /* no thread: pass 2 writes the rows itself (conv__keep_block) */
}

/* Hands the chunk being filled to the thread; returns its error, if it stopped on one. */
static int hand_chunk(struct conv *c)
{
    struct kept_chunk *k = c->kept_fill;
    c->kept_fill = NULL;
    pthread_mutex_lock(&c->kept_mu);
    int rc = c->kept_rc;
    if (k && rc == 0) {
        if (c->kept_tail)
            c->kept_tail->next = k;
        else
            c->kept_head = k;
        c->kept_tail = k;
        k = NULL;
        pthread_cond_signal(&c->kept_cv);
    }
    pthread_mutex_unlock(&c->kept_mu);
    free(k);
    return rc;
}

int conv__keep_block(struct conv *c, const struct closed_block *cb)
{
    if (!c->kept_running) {
        pthread_mutex_lock(&c->db_mu); /* the symbolization's thread may hold it */
        int rc = conv__write_block(c, cb);
        pthread_mutex_unlock(&c->db_mu);
        return rc;
    }
    if (!c->kept_fill) {
        c->kept_fill = malloc(sizeof *c->kept_fill);
        if (!c->kept_fill)
            return conv__oom(c, "blocks of the compact database");
        c->kept_fill->next = NULL;
        c->kept_fill->n = 0;
    }
    c->kept_fill->rows[c->kept_fill->n++] = *cb;
    return c->kept_fill->n == KEPT_CHUNK ? hand_chunk(c) : 0;
}

int conv__kept_join(struct conv *c, int failed)
{
    if (!c->kept_running)
        return 0;
    int rc = failed ? 0 : hand_chunk(c);
    pthread_mutex_lock(&c->kept_mu);
    if (failed && !c->kept_rc)
        c->kept_rc = -ECANCELED; /* the conversion failed: the rows are not needed */
    c->kept_closed = 1;
    pthread_cond_signal(&c->kept_cv);
    pthread_mutex_unlock(&c->kept_mu);
    pthread_join(c->kept_thread, NULL);
    c->kept_running = 0;
    free(c->kept_fill);
    c->kept_fill = NULL;
    return rc < 0 ? rc : c->kept_rc;
}

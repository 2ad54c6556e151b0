/* pack.c: the packer of traces (see pack.h): a raw trace (version 1) recoded into a packed
 * one (version 2) with the model of pack_model.h.
 *
 * Called by `memscope run` after the traced program has ended and by `memscope pack`
 * (ms_pack_file). Workload: millions of events per thread, packed once; the raw trace is read
 * through the reader (reader.h) and cut into jobs of about one packed chunk, packed in
 * parallel and written in order. */
#include "pack.h"

#include "pack_record.h"
#include "common/ms_error.h"
#include "reader.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- Chunk payload -------------------------------------------------------------------------- */

/* Scales counts (total n) to frequencies summing to SCALE, each used symbol at least 1. */
static void normalize_freqs(const uint32_t *count, unsigned alpha, size_t n, uint16_t *freq)
{
    uint32_t sum = 0;
    unsigned big = 0;
    for (unsigned i = 0; i < alpha; i++) {
        freq[i] = 0;
        if (!count[i])
            continue;
        uint64_t f = ((uint64_t)count[i] * SCALE + n / 2) / n;
        freq[i] = (uint16_t)(f ? f : 1);
        sum += freq[i];
        if (freq[i] > freq[big])
            big = i;
    }
    if (sum <= SCALE) {
        freq[big] = (uint16_t)(freq[big] + (SCALE - sum));
        return;
    }
    /* Many rare symbols were rounded up: take one from the largest, the first of equals, until
     * the sum is right. The largest stay the largest until each has given one, so each pass
     * over the alphabet takes one from every symbol at the top, in order. */
    while (sum > SCALE) {
        uint16_t top = 0;
        for (unsigned i = 0; i < alpha; i++)
            top = freq[i] > top ? freq[i] : top;
        for (unsigned i = 0; i < alpha && sum > SCALE; i++)
            if (freq[i] == top) {
                freq[i]--;
                sum--;
            }
    }
}

/* The encoder's view of one symbol of frequency f starting at cumulative frequency c:
 * x -> (x / f) * SCALE + x % f + c computed as x + bias + q * cmpl with q = x / f by a
 * multiplication: q = (x * rcp) >> (64 + shift), exact for x < 2^63 with sh = ceil(log2 f),
 * rcp = ceil(2^(63 + sh) / f) and shift = sh - 1 (the error x * (rcp - 2^(63 + sh) / f) /
 * 2^(63 + sh) stays below 1 / f). For f = 1, rcp = 2^64 - 1 gives q = x - 1, which bias and
 * cmpl make up for. */
struct rsym {
    uint64_t xmax; /* states from here on put out a 32-bit word first */
    uint64_t rcp;
    uint32_t bias;
    uint16_t cmpl;
    uint16_t shift;
};

__extension__ typedef unsigned __int128 pack_u128; /* GCC and Clang on 64-bit targets */

static struct rsym rsym_make(uint32_t f, uint32_t c)
{
    struct rsym y = {((RANS_L >> SCALE_BITS) << 32) * f, ~0ull, c + SCALE - 1,
                     (uint16_t)(SCALE - f), 0};
    if (f >= 2) {
        unsigned sh = 0;
        while ((1u << sh) < f)
            sh++;
        y.rcp = (uint64_t)((((pack_u128)1 << (63 + sh)) + f - 1) / f);
        y.shift = (uint16_t)(sh - 1);
        y.bias = c;
    }
    return y;
}

/* Puts a token into rANS state x, 32-bit words going down from *pp; returns the new state.
 * The state stays below 2^63, so at most one word goes out, stored unconditionally and kept
 * or not (no branch: this is the encoder's dependency chain). */
INLINE uint64_t rans_put(uint64_t x, const struct rsym *y, uint8_t **pp)
{
    uint8_t *p = *pp;
    int out = x >= y->xmax;
    uint32_t lo = (uint32_t)x;
    memcpy(p - 4, &lo, 4);
    *pp = p - 4 * out;
    x = out ? x >> 32 : x;
    uint64_t q = (uint64_t)(((pack_u128)x * y->rcp) >> 64) >> y->shift;
    return x + y->bias + q * y->cmpl;
}

/* Codes tokens tok[0..n) of one stream with rANS into out: two 64-bit states, then the 32-bit words
 * the decoder reads forwards. buf has room for 4 * n + 16 bytes. */
static void rans_encode(const uint16_t *tok, size_t n, const struct rsym *sym, uint8_t *buf,
                        size_t cap, struct obuf *out)
{
    uint8_t *p = buf + cap;
    /* Two states, token i in x_(i & 1), so that two dependency chains overlap; both stay in
     * registers (an indexed array of states would go through memory). */
    uint64_t x0 = RANS_L, x1 = RANS_L;
    size_t i = n;
    if (i & 1) {
        i--;
        x0 = rans_put(x0, &sym[tok[i]], &p);
    }
    while (i) {
        i -= 2;
        x1 = rans_put(x1, &sym[tok[i + 1]], &p);
        x0 = rans_put(x0, &sym[tok[i]], &p);
    }
    p -= 16;
    memcpy(p, &x0, 8);
    memcpy(p + 8, &x1, 8);
    obuf_varint(out, (uint64_t)(buf + cap - p));
    obuf_put(out, p, (size_t)(buf + cap - p));
}

/* chunk_finish()'s tables: one stream's frequencies, and each stream's symbols for rANS. */
struct tables {
    uint16_t freq[ALPHA_MAX];
    struct rsym sym[NSTREAM][ALPHA_MAX];
};

/* Writes the chunk's payload: the frequency table of each stream used, then each segment: for
 * each stream used its rANS bytes, the raw bits, the check value. Returns 0 or -1 (memory). */
static int chunk_finish(struct model *m, struct obuf *out)
{
    if (!m->tables && !(m->tables = malloc(sizeof *m->tables)))
        return -1;
    struct tables *tb = m->tables;
    size_t most = 0;
    if (m->nrec % SEGMENT || !m->nseg)
        seg_close(m);
    uint8_t nused = 0;
    for (int i = 0; i < NSTREAM; i++) {
        nused = (uint8_t)(nused + (ntok(m, i) > 0));
        if (ntok(m, i) > most)
            most = ntok(m, i);
    }
    obuf_put(out, &nused, 1);
    for (int sid = 0; sid < NSTREAM; sid++) {
        const struct etok *e = &m->et[sid];
        unsigned alpha = kinds[sid].alpha;
        size_t n = ntok(m, sid);
        if (!n)
            continue;
        uint16_t *freq = tb->freq;
        normalize_freqs(e->count, alpha, n, freq);
        uint8_t id = (uint8_t)sid;
        obuf_put(out, &id, 1);
        unsigned used = 0;
        for (unsigned i = 0; i < alpha; i++)
            used += freq[i] > 0;
        obuf_varint(out, used);
        uint32_t cum = 0;
        for (unsigned i = 0, prev = 0; i < alpha; i++) {
            uint16_t f = freq[i];
            if (f)
                tb->sym[sid][i] = rsym_make(f, cum);
            cum += f;
            if (!f)
                continue;
            obuf_varint(out, i - prev);
            obuf_varint(out, f - 1u);
            prev = i + 1;
        }
    }
    size_t cap = 4 * most + 16;
    if (cap > m->rans_cap) {
        free(m->rans_buf);
        if (!(m->rans_buf = malloc(cap))) {
            m->rans_cap = 0;
            return -1;
        }
        m->rans_cap = cap;
    }
    uint8_t *buf = m->rans_buf;
    obuf_varint(out, m->nseg);
    for (uint32_t g = 0; g < m->nseg; g++) {
        for (int sid = 0; sid < NSTREAM; sid++) {
            const struct etok *e = &m->et[sid];
            if (e->w == e->tok)
                continue;
            uint32_t a = g ? m->seg_end[g - 1][sid] : 0, b = m->seg_end[g][sid];
            if (a == b)
                obuf_varint(out, 0);
            else
                rans_encode(e->tok + a, b - a, tb->sym[sid], buf, cap, out);
        }
        size_t a = g ? m->seg_raw[g - 1] : 0;
        obuf_varint(out, m->seg_raw[g] - a);
        obuf_put(out, m->raw.p + a, m->seg_raw[g] - a);
        obuf_put(out, &m->seg_check[g], 4);
    }
    return out->oom || m->raw.oom ? -1 : 0;
}

/* ---- Packer -------------------------------------------------------------------------------- */

/* The output of one thread: description chunks then packed chunks, each with its header. */
struct job {
    const struct ms_trace *t;
    unsigned flags;     /* MS_PACK_* */
    size_t first, end;  /* its raw chunks */
    struct obuf out[2]; /* its description chunks, then its packed chunks */
    uint64_t events, records, damaged;
    int rc;
    int done; /* packed (under the pool's lock) */
};

struct meta {
    struct obuf buf; /* records of the open description chunk */
    struct ms_enc_state st;
};

static void put_chunk_header(struct obuf *o, uint32_t magic, size_t payload, const struct job *j,
                             uint32_t seq, uint32_t used, uint64_t base_ns)
{
    const struct ms_trace_chunk_info *ci = &j->t->chunks[j->first];
    struct ms_trace_chunk_header h = {magic,   (uint32_t)(MS_TRACE_CHUNK_HEADER_SIZE + payload),
                                      ci->tid, ci->thread_serial,
                                      seq,     used,
                                      base_ns};
    obuf_put(o, &h, sizeof h);
}

/* Closes the open packed chunk: its payload goes to o right after a header (no copy through
 * another buffer). Returns 0 or -1 (memory). */
static int packed_chunk(struct model *m, struct obuf *o, const struct job *j, uint32_t seq,
                        uint32_t used, uint64_t base_ns)
{
    size_t at = o->len;
    put_chunk_header(o, MS_TRACE_PACK_MAGIC, 0, j, seq, used, base_ns);
    if (chunk_finish(m, o) < 0)
        return -1;
    uint32_t size = (uint32_t)(o->len - at); /* header + payload */
    memcpy(o->p + at + offsetof(struct ms_trace_chunk_header, size), &size, sizeof size);
    return 0;
}

/* Finds the payload after dts in an extension record's raw bytes (which the reader accepted, so
 * its varints are whole and its payload inside them). */
static void ext_rest(const uint8_t *rec, size_t n, const uint8_t **rest, size_t *rest_len)
{
    const uint8_t *p = rec + 1, *end = rec + n;
    uint64_t plen = 0;
    int shift = 0;
    while (p < end && (*p & 0x80))
        plen |= (uint64_t)(*p++ & 0x7f) << shift, shift += 7;
    if (p < end)
        plen |= (uint64_t)*p++ << shift;
    const uint8_t *payload = p;
    while (p < end && (*p & 0x80))
        p++;
    p++;
    *rest = p;
    *rest_len = (size_t)(payload + plen - p);
}

/* Copies one description record (raw bytes rec[0..n)) into the description chunks. Extension
 * records get their dts recomputed for the description chunk's own time state. */
static void meta_add(struct meta *mt, const struct ms_record *r, const uint8_t *rec, size_t n)
{
    if (rec[0] < MS_REC_EXTENSION) {
        obuf_put(&mt->buf, rec, n);
        return;
    }
    const uint8_t *rest;
    size_t rest_len;
    ext_rest(rec, n, &rest, &rest_len);
    uint8_t hdr[1 + MS_VARINT_MAX], ts[MS_VARINT_MAX];
    uint8_t *q = ms_put_ts(ts, &mt->st, r->ns);
    size_t tlen = (size_t)(q - ts);
    hdr[0] = rec[0];
    q = ms_put_varint(hdr + 1, tlen + rest_len);
    obuf_put(&mt->buf, hdr, (size_t)(q - hdr));
    obuf_put(&mt->buf, ts, tlen);
    obuf_put(&mt->buf, rest, rest_len);
}

static int is_description(const struct ms_record *r)
{
    return r->type == MS_REC_STACK || r->type == MS_REC_MODULE || r->type == MS_REC_PROCESS ||
           (r->type == MS_REC_EXTENSION &&
            (r->fn == MS_EXT_PYFRAME || r->fn == MS_EXT_PYSTACK || r->fn == MS_EXT_CUDA_FUNC));
}

/* Packs one job with model m (reset here: a worker keeps one model for all its jobs). */
INLINE void pack_thread(struct job *j, struct model *m)
{
    const struct ms_trace *t = j->t;
    struct obuf packed = {0}, metas = {0};
    struct meta mt = {{0}, {t->chunks[j->first].base_ns, 0}};
    uint64_t meta_base = t->chunks[j->first].base_ns, chunk_base = meta_base;
    struct ms_enc_state st = {chunk_base, 0};
    struct ms_trace_cursor *cur = calloc(1, sizeof *cur);
    uint32_t nmeta = 0, npacked = 0;
    size_t raw = 0;
    model_reset(m, chunk_base);
    if (!cur) {
        j->rc = MS_ENOMEM;
        goto out;
    }
    for (size_t k = j->first; k < j->end; k++) {
        ms_trace_cursor_init(cur, t, k);
        for (;;) {
            const uint8_t *start = cur->p;
            struct ms_record r;
            struct prec pr;
            struct ms_enc_state probe;
            size_t len;
            /* the raw record's delta state: when it is the decoded chunk's, a record of the
             * fast path decodes to the same bytes (ms_trace_cursor_next_heap()) */
            int same = cur->prev_ns == st.prev_ns && cur->prev_addr == st.prev_addr;
            if (ms_trace_cursor_next_heap(cur, &pr.h)) { /* most records */
                j->records++;
                pr.rest = NULL;
                pr.rest_len = 0;
                if (same && raw + (size_t)(cur->p - start) <= MS_PACK_MAX_RAW) {
                    len = (size_t)(cur->p - start);
                    st.prev_ns = cur->prev_ns;
                    st.prev_addr = cur->prev_addr;
                    j->events++;
                    goto code;
                }
                goto event;
            }
            int rc = ms_trace_cursor_next(cur, &r);
            if (rc < 0)
                j->damaged++;
            if (rc != 1)
                break;
            j->records++;
            size_t n = (size_t)(cur->p - start);
            pr = (struct prec){{start[0] >= MS_REC_EXTENSION ? start[0] : r.type + r.fn, r.ns,
                                r.addr, r.size, r.stack_id},
                               NULL,
                               0};
            if (r.type == MS_REC_EXTENSION) { /* its fields stay in the payload bytes */
                ext_rest(start, n, &pr.rest, &pr.rest_len);
                pr.h.addr = pr.h.size = pr.h.stack_id = 0;
            }
            if (is_description(&r) || pr.rest_len > EXT_REST_MAX) {
                if (mt.buf.len + n + 2 * MS_VARINT_MAX >
                    MS_TRACE_MAX_CHUNK - MS_TRACE_CHUNK_HEADER_SIZE) {
                    put_chunk_header(&metas, MS_TRACE_CHUNK_MAGIC, mt.buf.len, j, nmeta++,
                                     (uint32_t)mt.buf.len, meta_base);
                    obuf_put(&metas, mt.buf.p, mt.buf.len);
                    mt.buf.len = 0;
                    meta_base = mt.st.prev_ns;
                    mt.st.prev_addr = 0;
                }
                if (r.type == MS_REC_STACK && (j->flags & MS_PACK_STACK_IDS)) {
                    uint8_t stub[1 + 2 * MS_VARINT_MAX]; /* the id alone: depth 0 */
                    n = (size_t)(ms_enc_stack(stub, r.stack_id, NULL, 0) - stub);
                    meta_add(&mt, &r, stub, n);
                } else
                    meta_add(&mt, &r, start, n);
                continue;
            }
        event:
            j->events++;
            probe = st;
            len = kind_of(pr.h.type) == K_OTHER ? emit(NULL, &probe, &pr) : heap_len(&probe, &pr);
            if (raw + len > MS_PACK_MAX_RAW) { /* close this packed chunk, start the next */
                if (packed_chunk(m, &packed, j, npacked++, (uint32_t)raw, chunk_base) < 0) {
                    j->rc = MS_ENOMEM;
                    goto out;
                }
                chunk_base = st.prev_ns;
                st = (struct ms_enc_state){chunk_base, 0};
                model_reset(m, chunk_base);
                probe = st;
                len = emit(NULL, &probe, &pr);
                raw = 0;
            }
            st = probe;
        code:
            if (code_record(0, m, &pr, NULL) < 0) {
                j->rc = MS_ENOMEM; /* the encoder's only failure: the live table is full */
                goto out;
            }
            check_record(m, &pr);
            if (m->nrec % SEGMENT == 0)
                seg_close(m);
            raw += len;
        }
    }
    if (raw) {
        if (packed_chunk(m, &packed, j, npacked++, (uint32_t)raw, chunk_base) < 0) {
            j->rc = MS_ENOMEM;
            goto out;
        }
    }
    if (mt.buf.len) {
        put_chunk_header(&metas, MS_TRACE_CHUNK_MAGIC, mt.buf.len, j, nmeta++, (uint32_t)mt.buf.len,
                         meta_base);
        obuf_put(&metas, mt.buf.p, mt.buf.len);
    }
    /* Description chunks first, then the packed ones; ms_pack_file() numbers them. */
    if (packed.oom || metas.oom || mt.buf.oom)
        j->rc = MS_ENOMEM;
    j->out[0] = metas;
    j->out[1] = packed;
    metas = packed = (struct obuf){0};
out:
    if (cur)
        ms_trace_cursor_release(cur);
    free(cur);
    free(packed.p);
    free(metas.p);
    free(mt.buf.p);
}

static void pack_thread_any(struct job *j, struct model *m)
{
    pack_thread(j, m);
}

POPCNT_CLONE static void pack_thread_popcnt(struct job *j, struct model *m)
{
    pack_thread(j, m);
}

/* The jobs and the output file. Workers take jobs in order; a finished job's output goes to the
 * file as soon as every job before it is there, by whichever worker finds it so (one at a time:
 * `writing`), so that writing overlaps packing and each job's buffer is freed early. */
struct pool {
    struct job *jobs;
    size_t njobs, next; /* jobs planned; the next one to take */
    size_t written;     /* jobs whose output is in the file (or dropped after an error) */
    int writing;        /* a worker is writing finished jobs */
    int fd;
    int rc;               /* the first error; written by the writing worker only */
    uint32_t serial, seq; /* chunk numbering across jobs (number_chunks()) */
    int numbered;         /* a chunk has been numbered */
    uint64_t out_bytes;
    pthread_mutex_t lock;
};

static int write_all(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n) {
        ssize_t w = write(fd, b, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Gives the chunks of job j (the next in output order) the sequence numbers that follow those
 * of the same thread in the jobs before it: 0, 1, 2, ... per thread. */
static void number_chunks(struct pool *pl, struct job *j)
{
    for (int k = 0; k < 2; k++) {
        struct obuf *o = &j->out[k];
        for (size_t off = 0; off + MS_TRACE_CHUNK_HEADER_SIZE <= o->len;) {
            struct ms_trace_chunk_header h;
            memcpy(&h, o->p + off, sizeof h);
            if (h.thread_serial != pl->serial || !pl->numbered) {
                pl->serial = h.thread_serial;
                pl->seq = 0;
                pl->numbered = 1;
            }
            h.seq = pl->seq++;
            memcpy(o->p + off, &h, sizeof h);
            off += h.size;
        }
    }
}

/* Called with the lock held after a job is done: writes every finished job that is next in
 * order, unless another worker is doing so (it will see this job before it stops). */
static void write_done(struct pool *pl)
{
    if (pl->writing)
        return;
    pl->writing = 1;
    while (pl->written < pl->njobs && pl->jobs[pl->written].done) {
        struct job *j = &pl->jobs[pl->written];
        pthread_mutex_unlock(&pl->lock);
        if (pl->rc == 0)
            pl->rc = j->rc;
        if (pl->rc == 0) {
            number_chunks(pl, j);
            for (int k = 0; k < 2 && pl->rc == 0; k++) {
                pl->rc = write_all(pl->fd, j->out[k].p, j->out[k].len);
                pl->out_bytes += j->out[k].len;
            }
        }
        for (int k = 0; k < 2; k++) {
            free(j->out[k].p);
            j->out[k] = (struct obuf){0};
        }
        pthread_mutex_lock(&pl->lock);
        pl->written++;
    }
    pl->writing = 0;
}

static void *worker(void *arg)
{
    struct pool *pl = arg;
    void (*pack)(struct job *, struct model *) =
        HAVE_POPCNT() ? pack_thread_popcnt : pack_thread_any;
    struct model *m = model_new(0);
    if (m && enc_buffers(m) < 0) {
        model_free(m);
        m = NULL;
    }
    for (;;) {
        pthread_mutex_lock(&pl->lock);
        size_t i = pl->next++;
        pthread_mutex_unlock(&pl->lock);
        if (i >= pl->njobs)
            break;
        if (m)
            pack(&pl->jobs[i], m);
        else
            pl->jobs[i].rc = MS_ENOMEM;
        for (size_t k = pl->jobs[i].first; k < pl->jobs[i].end; k++)
            ms_trace_drop_chunk(pl->jobs[i].t, k); /* packed: not read again */
        pthread_mutex_lock(&pl->lock);
        pl->jobs[i].done = 1;
        write_done(pl);
        pthread_mutex_unlock(&pl->lock);
    }
    model_free(m);
    return NULL;
}

/* Cuts the trace into jobs: runs of one thread's raw chunks holding at most MS_PACK_MAX_RAW
 * bytes of records (or one bigger chunk), so that each job makes about one packed chunk and a
 * thread with many events keeps every worker busy. Fills jobs when not NULL; returns the count. */
static size_t plan_jobs(const struct ms_trace *t, struct job *jobs)
{
    size_t n = 0;
    for (size_t k = 0; k < t->nchunks;) {
        size_t e = k + 1;
        uint64_t bytes = t->chunks[k].used;
        while (e < t->nchunks && t->chunks[e].thread_serial == t->chunks[k].thread_serial &&
               bytes + t->chunks[e].used <= MS_PACK_MAX_RAW)
            bytes += t->chunks[e++].used;
        if (jobs) {
            jobs[n].t = t;
            jobs[n].first = k;
            jobs[n].end = e;
        }
        n++;
        k = e;
    }
    return n;
}

int ms_pack_file(const char *in_path, const char *out_path, int workers, struct ms_pack_stats *st)
{
    return ms_pack_file_flags(in_path, out_path, workers, 0, st);
}

int ms_pack_file_flags(const char *in_path, const char *out_path, int workers, unsigned flags,
                       struct ms_pack_stats *st)
{
    struct ms_trace t;
    int rc = ms_trace_open(&t, in_path);
    if (rc < 0)
        return rc;
    if (t.hdr.version != MS_TRACE_VERSION) {
        ms_trace_release(&t);
        return MS_EINVAL;
    }
    size_t njobs = plan_jobs(&t, NULL);
    struct pool pl = {.jobs = calloc(njobs + 1, sizeof *pl.jobs),
                      .njobs = njobs,
                      .lock = PTHREAD_MUTEX_INITIALIZER};
    if (!pl.jobs) {
        ms_trace_release(&t);
        return MS_ENOMEM;
    }
    plan_jobs(&t, pl.jobs);
    for (size_t i = 0; i < njobs; i++)
        pl.jobs[i].flags = flags;
    /* The header goes first with its magic zero, and whole at the end with the file's size:
     * the magic last, as the agent does, so that a half-written file is never taken for a
     * trace. */
    uint8_t hdr[MS_TRACE_V2_HEADER_SIZE] = {0};
    /* a new file (files.h): a link planted at out_path is never followed */
    pl.fd = open(out_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (pl.fd < 0)
        rc = -errno;
    else
        rc = write_all(pl.fd, hdr, sizeof hdr);
    if (rc == 0) {
        if (workers < 1)
            workers = 1;
        if ((size_t)workers > njobs)
            workers = njobs ? (int)njobs : 1;
        pthread_t tids[64];
        int started = 0;
        for (int i = 1; i < workers && i < 64; i++)
            if (pthread_create(&tids[started], NULL, worker, &pl) == 0)
                started++;
        worker(&pl);
        for (int i = 0; i < started; i++)
            pthread_join(tids[i], NULL);
        rc = pl.rc;
    }
    struct ms_pack_stats s = {0};
    s.in_bytes = t.size;
    for (size_t i = 0; i < njobs; i++) {
        s.events += pl.jobs[i].events;
        s.records += pl.jobs[i].records;
        s.damaged += pl.jobs[i].damaged;
        free(pl.jobs[i].out[0].p); /* only after an error: written jobs are freed at once */
        free(pl.jobs[i].out[1].p);
    }
    s.out_bytes = pl.out_bytes + sizeof hdr;
    if (rc == 0) {
        struct ms_trace_file_header h = t.hdr;
        h.version = MS_TRACE_PACKED_VERSION;
        h.header_size = MS_TRACE_V2_HEADER_SIZE;
        h.chunk_align = 1;
        h.flags |= MS_TRACE_F_PACKED;
        h.file_end = s.out_bytes;
        h.ring_start = h.ring_start ? 1 : 0; /* events were dropped; the offset means nothing */
        memcpy(hdr + 8, (const uint8_t *)&h + 8, sizeof h - 8);
        errno = 0;
        if (pwrite(pl.fd, hdr + 8, sizeof hdr - 8, 8) != (ssize_t)(sizeof hdr - 8) ||
            pwrite(pl.fd, MS_TRACE_MAGIC, 8, 0) != 8)
            rc = errno ? -errno : MS_EIO;
    }
    if (pl.fd >= 0 && close(pl.fd) < 0 && rc == 0)
        rc = -errno;
    free(pl.jobs);
    ms_trace_release(&t);
    if (rc == 0 && st)
        *st = s;
    return rc;
}

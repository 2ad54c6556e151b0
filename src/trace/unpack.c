/* unpack.c: the decoder of packed traces (format version 2, see pack.h and pack_model.h).
 *
 * Called by the reader (reader.c) for each packed chunk it hands out: ms_pack_decode() turns a
 * chunk's payload back into the version-1 records it was packed from. Workload: one call per
 * chunk of up to MS_PACK_MAX_RAW decoded bytes; every byte of the payload is hostile input. */
#include "unpack.h"

#include "pack_record.h"

#include <stdlib.h>
#include <string.h>

/* ---- Chunk payload ------------------------------------------------------------------------- */

/* Reads the frequency tables of a chunk's payload and finds its first segment. Returns 0, or -1
 * when the payload is malformed (every count, symbol, frequency and length is checked). */
static int chunk_open(struct model *m, const uint8_t *in, size_t len)
{
    const uint8_t *p = in, *end = in + len;
    uint64_t v;
    if (p >= end || *p > NSTREAM)
        return -1;
    unsigned nused = *p++;
    for (unsigned k = 0; k < nused; k++) {
        if (p >= end || *p >= NSTREAM || m->ts[*p].present)
            return -1;
        int sid = *p++;
        struct tstream *s = &m->ts[sid];
        unsigned alpha = kinds[sid].alpha;
        uint64_t used;
        if (ms_get_varint(&p, end, &used) || used == 0 || used > alpha)
            return -1;
        memset(s->freq, 0, sizeof s->freq);
        uint64_t sym = 0, total = 0;
        for (uint64_t i = 0; i < used; i++) {
            uint64_t gap, f;
            if (ms_get_varint(&p, end, &gap) || ms_get_varint(&p, end, &f) || gap >= alpha ||
                (sym += gap) >= alpha || f >= SCALE || (total += f + 1) > SCALE)
                return -1;
            s->freq[sym++] = (uint16_t)(f + 1);
        }
        if (total != SCALE)
            return -1;
        uint32_t cum = 0;
        for (unsigned i = 0; i < alpha; i++) {
            s->start[i] = (uint16_t)cum;
            for (uint32_t j = 0; j < s->freq[i]; j++)
                s->lut[cum + j] = (uint16_t)i;
            cum += s->freq[i];
        }
        s->present = 1;
    }
    if (ms_get_varint(&p, end, &v) || v == 0 || v > MAX_SEGS)
        return -1;
    m->segs_left = v;
    m->seg_p = p;
    m->seg_limit = end;
    return 0;
}

/* Opens the next segment: each stream's states and bytes, the raw bits, the check value.
 * Returns 0, or -1 when there is none or it is cut short or malformed. */
static int seg_open(struct model *m)
{
    const uint8_t *p = m->seg_p, *end = m->seg_limit;
    uint64_t v;
    if (!m->segs_left)
        return -1;
    for (int sid = 0; sid < NSTREAM; sid++) {
        struct tstream *s = &m->ts[sid];
        if (!s->present)
            continue;
        if (ms_get_varint(&p, end, &v) || (v && v < 16) || v > (uint64_t)(end - p))
            return -1;
        s->live = v != 0;
        if (v) {
            memcpy(&s->x[0], p, 8);
            memcpy(&s->x[1], p + 8, 8);
        }
        s->next = 0;
        s->p = p + (v ? 16 : 0);
        s->end = p + v;
        p += v;
    }
    if (ms_get_varint(&p, end, &v) || v > (uint64_t)(end - p))
        return -1;
    m->bits.p = p;
    m->bits.end = p + v;
    m->bits.acc = 0;
    m->bits.n = 0;
    p += v;
    if (end - p < 4)
        return -1;
    memcpy(&m->check, p, 4);
    m->seg_p = p + 4;
    m->segs_left--;
    return 0;
}

/* ---- Decoder ------------------------------------------------------------------------------- */

INLINE size_t pack_decode(const uint8_t *in, size_t len, uint64_t base_ns, uint8_t *out,
                          size_t want, int *damaged)
{
    *damaged = 0;
    size_t n = 0;
    if (want == 0)
        return 0;
    struct model *m = model_new(base_ns);
    uint8_t *scratch = malloc(EXT_REST_MAX);
    if (!m || !scratch) {
        model_free(m);
        free(scratch);
        *damaged = MS_PACK_OOM; /* not damage: the caller must fail, not skip the chunk */
        return 0;
    }
    if (chunk_open(m, in, len) < 0) {
        model_free(m);
        free(scratch);
        *damaged = 1;
        return 0;
    }
    /* Records are returned by whole segments whose check value matched: damage drops the
     * segment it is in and everything after it. */
    struct ms_enc_state st = {base_ns, 0};
    size_t good = 0;
    while (n < want) {
        struct prec r = {0};
        if ((m->nrec % SEGMENT == 0 && seg_open(m) < 0) || code_record(1, m, &r, scratch) < 0) {
            *damaged = 1;
            break;
        }
        struct ms_enc_state probe = st;
        size_t k = emit(NULL, &probe, &r);
        if (k > want - n) {
            *damaged = 1;
            break;
        }
        emit(out + n, &st, &r);
        n += k;
        check_record(m, &r);
        if (m->nrec % SEGMENT == 0 || n == want) {
            if (m->check != (uint32_t)(m->hash >> 32)) {
                *damaged = 1;
                break;
            }
            good = n;
        }
    }
    model_free(m);
    free(scratch);
    return good;
}

static size_t pack_decode_any(const uint8_t *in, size_t len, uint64_t base_ns, uint8_t *out,
                              size_t want, int *damaged)
{
    return pack_decode(in, len, base_ns, out, want, damaged);
}

POPCNT_CLONE static size_t pack_decode_popcnt(const uint8_t *in, size_t len, uint64_t base_ns,
                                              uint8_t *out, size_t want, int *damaged)
{
    return pack_decode(in, len, base_ns, out, want, damaged);
}

size_t ms_pack_decode(const uint8_t *in, size_t len, uint64_t base_ns, uint8_t *out, size_t want,
                      int *damaged)
{
    return (HAVE_POPCNT() ? pack_decode_popcnt : pack_decode_any)(in, len, base_ns, out, want,
                                                                  damaged);
}

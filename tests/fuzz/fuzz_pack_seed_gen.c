/* fuzz_pack_seed_gen.c: writes the seed corpus of fuzz_pack_decode into the directory argv[1]
 * and packed traces for fuzz_trace_reader into argv[2] (both created if needed). Extra
 * arguments are directories to create (the fuzzer's scratch corpus).
 *
 * Small raw traces built with tests/unit/tracegen.h (every record kind, several threads and
 * chunks) are packed with ms_pack_file(). Into argv[1] go, per packed trace, the file without its
 * header (fuzz_pack_decode reads its input after a header of its own) and, per packed chunk, its
 * base_ns, its decoded size and its payload (the input layout of ms_pack_decode() there); into
 * argv[2] the whole packed files. */
#include "tracegen.h"

#include "trace/pack.h"
#include "trace/reader.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

static void save(const char *dir, const char *name, const void *a, size_t alen, const void *b,
                 size_t blen)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(a, 1, alen, f) != alen || (blen && fwrite(b, 1, blen, f) != blen) ||
        fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

/* A raw trace: `threads` threads of `events` heap events each, in two chunks per thread, with
 * descriptions, mmap, lost and extension records. */
static void build(struct tg *g, int threads, int events)
{
    static const uint64_t pcs[4] = {0x401000, 0x401200, 0x7f0000001000, 0x400800};
    static const uint32_t pyframes[4] = {1, 12, 2, 40};
    tg_init(g, 1234, 1, 1000, 1700000000000000000ull);
    for (int t = 0; t < threads; t++) {
        uint64_t ns = 1000;
        for (int seq = 0; seq < 2; seq++) {
            struct tg_chunk c;
            tg_chunk_begin(g, &c, 1234 + (uint32_t)t, (uint32_t)t + 1, (uint32_t)seq, ns, 8192);
            if (t == 0 && seq == 0) {
                c.p = ms_enc_process(c.p, 1, "/bin/x", 6, "x\0-y\0", 5);
                c.p = ms_enc_module(c.p, 0, 0x400000, 0x402000, "/bin/x", 6);
                uint64_t v[2] = {1, 12};
                c.p = ms_enc_ext(c.p, &c.st, MS_EXT_PYFRAME, ns, v, 2, "a.py\0f", 6);
                c.p = ms_enc_pystack(c.p, &c.st, ns, (uint32_t)t + 1, pyframes, 2);
            }
            if (seq == 0)
                c.p = ms_enc_stack(c.p, (uint32_t)t + 1, pcs, 4);
            for (int i = 0; i < events; i++) {
                ns += (uint64_t)(i % 5) * 37;
                uint64_t a = 0x10000 + 0x40 * (uint64_t)(i % 17) + (i % 11 == 0 ? 8 : 0);
                c.p = ms_enc_alloc(c.p, &c.st, MS_REC_HEAP_ALLOC + i % MS_FN_HEAP_COUNT, ns, a,
                                   (uint64_t)(i % 7) * 24, (uint32_t)(i % 3));
                if (i % 3 != 1)
                    c.p = ms_enc_free(c.p, &c.st, ns, i % 4 ? a : a + 0x100000);
            }
            c.p = ms_enc_alloc(c.p, &c.st, MS_REC_MMAP_ALLOC + MS_FN_MMAP, ns + 1, 0x7f0000000000,
                               8192, 0);
            c.p = ms_enc_alloc(c.p, &c.st, MS_REC_MMAP_ALLOC + MS_FN_MREMAP, ns + 2,
                               0x7f0000100000, 16384, 1);
            c.p = ms_enc_munmap(c.p, &c.st, ns + 3, 0x7f0000100000, 16384);
            c.p = ms_enc_lost(c.p, &c.st, ns + 4, 2);
            uint64_t v[3] = {0x10000, 64, MS_ACCESS_WRITE};
            c.p = ms_enc_ext(c.p, &c.st, MS_EXT_ACCESS, ns + 5, v, 3, "op", 2);
            c.p = ms_enc_ext(c.p, &c.st, MS_EXT_MARK, ns + 6, NULL, 0, "mark", 4);
            c.p = ms_enc_ext(c.p, &c.st, MS_EXT_STEP, ns + 7, NULL, 0, NULL, 0);
            *c.p++ = 0xf0; /* an extension record of an unknown type: dts, then bytes */
            c.p = ms_put_varint(c.p, 4);
            memcpy(c.p, "\0ext", 4);
            c.p += 4;
            ns += 8;
            if (c.p > g->buf + c.off + c.size)
                abort(); /* the chunk overflowed: make it bigger */
            tg_chunk_end(g, &c);
        }
    }
}

static uint8_t *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f || fseek(f, 0, SEEK_END) != 0) {
        perror(path);
        exit(1);
    }
    long n = ftell(f);
    rewind(f);
    uint8_t *p = malloc((size_t)n + 1);
    if (n < 0 || !p || fread(p, 1, (size_t)n, f) != (size_t)n) {
        perror(path);
        exit(1);
    }
    fclose(f);
    *len = (size_t)n;
    return p;
}

/* Packs g and writes its seeds, named after `name`. */
static void seeds(const char *pack_dir, const char *reader_dir, const char *name, struct tg *g)
{
    char raw[4096], packed[4096], seed[256];
    snprintf(raw, sizeof raw, "%s/.tmp-%s.mst", pack_dir, name);
    snprintf(packed, sizeof packed, "%s/.tmp-%s.pk", pack_dir, name);
    if (tg_write(g, raw) < 0) {
        perror(raw);
        exit(1);
    }
    int rc = ms_pack_file(raw, packed, 1, NULL);
    if (rc < 0) {
        fprintf(stderr, "fuzz_pack_seed_gen: packing %s failed (%d)\n", name, rc);
        exit(1);
    }
    size_t len;
    uint8_t *p = read_all(packed, &len);
    unlink(raw);
    unlink(packed);
    snprintf(seed, sizeof seed, "packed-%s.mst", name);
    save(reader_dir, seed, p, len, NULL, 0);
    snprintf(seed, sizeof seed, "%s-chunks", name);
    save(pack_dir, seed, p + MS_TRACE_V2_HEADER_SIZE, len - MS_TRACE_V2_HEADER_SIZE, NULL, 0);
    struct ms_trace t;
    if (ms_trace_open_mem(&t, p, len) < 0) {
        fprintf(stderr, "fuzz_pack_seed_gen: the packed %s does not open\n", name);
        exit(1);
    }
    int n = 0;
    for (size_t k = 0; k < t.nchunks; k++) {
        const struct ms_trace_chunk_info *ci = &t.chunks[k];
        if (!ci->packed)
            continue;
        uint8_t head[12];
        memcpy(head, &ci->base_ns, 8);
        memcpy(head + 8, &ci->used, 4);
        snprintf(seed, sizeof seed, "%s-decode-%d", name, n++);
        save(pack_dir, seed, head, sizeof head, p + ci->offset + MS_TRACE_CHUNK_HEADER_SIZE,
             ci->size - MS_TRACE_CHUNK_HEADER_SIZE);
    }
    if (n == 0) {
        fprintf(stderr, "fuzz_pack_seed_gen: the packed %s has no packed chunk\n", name);
        exit(1);
    }
    ms_trace_release(&t);
    free(p);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: fuzz_pack_seed_gen PACK_CORPUS READER_CORPUS [SCRATCH_DIR...]\n");
        return 2;
    }
    for (int i = 1; i < argc; i++)
        if (mkdir(argv[i], 0755) < 0 && errno != EEXIST) {
            perror(argv[i]);
            return 1;
        }
    struct tg g;
    build(&g, 1, 3);
    seeds(argv[1], argv[2], "one-thread", &g);
    tg_release(&g);
    build(&g, 3, 40);
    seeds(argv[1], argv[2], "three-threads", &g);
    tg_release(&g);
    build(&g, 1, 150);
    seeds(argv[1], argv[2], "long", &g);
    tg_release(&g);
    return 0;
}

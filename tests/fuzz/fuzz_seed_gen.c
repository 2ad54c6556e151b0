/* fuzz_seed_gen.c: writes the seed corpus of fuzz_trace_reader into the directory argv[1]
 * (created if needed): small valid traces that use every record type, several threads and
 * chunks, zero pages, a damaged chunk and a truncated file, built with tests/unit/tracegen.h.
 * Extra arguments are directories to create (the fuzzer's scratch corpus). */
#include "tracegen.h"

#include <errno.h>
#include <sys/stat.h>

static const char *out_dir;

static void save(const char *name, const struct tg *g, size_t len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", out_dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(g->buf, 1, len, f) != len || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

static void build(struct tg *g, int threads, int events)
{
    static const uint64_t pcs[4] = {0x401000, 0x401200, 0x7f0000001000, 0x400800};
    tg_init(g, 1234, 1, 1000, 1700000000000000000ull);
    for (int t = 0; t < threads; t++) {
        for (int seq = 0; seq < 2; seq++) {
            struct tg_chunk c;
            tg_chunk_begin(g, &c, 1234 + (uint32_t)t, (uint32_t)t + 1, (uint32_t)seq,
                           1000 + 100 * (uint64_t)seq, 4096);
            if (t == 0 && seq == 0) {
                c.p = ms_enc_process(c.p, 1, "/bin/x", 6, "x\0-y\0", 5);
                c.p = ms_enc_module(c.p, 0, 0x400000, 0x402000, "/bin/x", 6);
            }
            if (seq == 0)
                c.p = ms_enc_stack(c.p, (uint32_t)t + 1, pcs, 4);
            for (int i = 0; i < events; i++) {
                uint64_t ns = 1000 + 100 * (uint64_t)seq + (uint64_t)i;
                uint64_t a = 0x10000 + 0x40 * (uint64_t)i;
                c.p = ms_enc_alloc(c.p, &c.st, MS_REC_HEAP_ALLOC + i % MS_FN_HEAP_COUNT, ns, a,
                                   (uint64_t)i * 8, (uint32_t)t + 1);
                if (i % 3 == 0)
                    c.p = ms_enc_free(c.p, &c.st, ns, a);
            }
            c.p = ms_enc_alloc(c.p, &c.st, MS_REC_MMAP_ALLOC + MS_FN_MMAP, 1200, 0x7f0000000000,
                               8192, 0);
            c.p = ms_enc_munmap(c.p, &c.st, 1201, 0x7f0000000000, 4096);
            c.p = ms_enc_lost(c.p, &c.st, 1202, 1);
            { /* the CUDA records: a device alloc, a free, an OOM, a kernel name and launch */
                uint64_t mem[8] = {MS_CU_MEM_ALLOC, 1, 0x7f1000000000, 1 << 20, 1, 0, 0, 0};
                uint64_t fr[8] = {MS_CU_MEM_FREE, 1, 0x7f1000000000, 0, 0, 0, 0, 0};
                uint64_t om[6] = {MS_CU_MEM_ALLOC, 2, 1ull << 34, 1, 1 << 20, 1ull << 34};
                uint64_t fn[1] = {0x8000};
                uint64_t la[12] = {
                    MS_CU_LAUNCH_KERNEL, 1, 0x8000, 0x5001, 128, 1, 1, 256, 1, 1, 0, 1};
                c.p = ms_enc_ext(c.p, &c.st, MS_EXT_CUDA_MEM, 1203, mem, 8, NULL, 0);
                c.p = ms_enc_ext(c.p, &c.st, MS_EXT_CUDA_FUNC, 1203, fn, 1, "vector_add", 10);
                c.p = ms_enc_ext(c.p, &c.st, MS_EXT_CUDA_LAUNCH, 1204, la, 12, NULL, 0);
                c.p = ms_enc_ext(c.p, &c.st, MS_EXT_CUDA_OOM, 1205, om, 6, NULL, 0);
                c.p = ms_enc_ext(c.p, &c.st, MS_EXT_CUDA_MEM, 1206, fr, 8, NULL, 0);
            }
            { /* the address-space records: a reservation, a commit in it, a decommit */
                uint64_t res[3] = {0x7f2000000000, 1 << 24, 1};
                uint64_t com[3] = {0x7f2000000000, 1 << 20, 1}, dec[2] = {0x7f2000080000, 4096};
                c.p = ms_enc_ext(c.p, &c.st, MS_EXT_MMAP_RESERVE, 1207, res, 3, NULL, 0);
                c.p = ms_enc_ext(c.p, &c.st, MS_EXT_MMAP_COMMIT, 1208, com, 3, NULL, 0);
                c.p = ms_enc_ext(c.p, &c.st, MS_EXT_MMAP_DECOMMIT, 1209, dec, 2, NULL, 0);
            }
            *c.p++ = 0xf0; /* an extension record of an unknown type: dts, then bytes */
            c.p = ms_put_varint(c.p, 4);
            memcpy(c.p, "\0ext", 4);
            c.p += 4;
            tg_chunk_end(g, &c);
        }
        if (t == 0)
            tg_zero_pages(g, 4096);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: fuzz_seed_gen DIR [SCRATCH_DIR...]\n");
        return 2;
    }
    for (int i = 1; i < argc; i++)
        if (mkdir(argv[i], 0755) < 0 && errno != EEXIST) {
            perror(argv[i]);
            return 1;
        }
    out_dir = argv[1];
    struct tg g;
    build(&g, 1, 3);
    save("one-thread.mst", &g, g.len);
    tg_release(&g);
    build(&g, 3, 10);
    save("three-threads.mst", &g, g.len);
    save("truncated.mst", &g, g.len - 5000);
    save("header-only.mst", &g, MS_TRACE_HEADER_SIZE);
    g.buf[MS_TRACE_HEADER_SIZE + MS_TRACE_CHUNK_HEADER_SIZE + 30] = 0x07; /* malformed record */
    g.buf[MS_TRACE_HEADER_SIZE + 4096 * 3 + 2] ^= 0x55;                   /* damaged chunk header */
    save("damaged.mst", &g, g.len);
    tg_release(&g);
    return 0;
}

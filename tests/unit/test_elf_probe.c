/* test_elf_probe.c: common/elf_probe.h, what an executable's ELF headers say (issue 37 items 16
 * and 17): known answers on files built here (a dynamic program, a static one, a 32-bit one, one
 * that needs libasan, one with a static sanitizer runtime's mark, a script, a non-ELF file), and
 * every prefix and thousands of random mutations of them read without a fault or a read out of
 * bounds (the ASan build checks that), with the class answers still sane. */
#include "common/elf_probe.h"
#include "test.h"

#include <stdint.h>
#include <sys/mman.h>

/* A little ELF64 executable image: header, 3 program headers (INTERP when dynamic, LOAD,
 * DYNAMIC), the dynamic section (DT_NEEDED per name, DT_STRTAB, DT_STRSZ) and the string
 * table, all in one PT_LOAD at vaddr 0x400000 + file offset. */
static size_t build(uint8_t *f, size_t cap, int cls, int dynamic, const char *const *needed,
                    const char *extra_str)
{
    memset(f, 0, cap);
    memcpy(f, "\177ELF", 4);
    f[4] = (uint8_t)cls;
    f[5] = 1;
    uint16_t machine = MS_ELF_MACHINE ? MS_ELF_MACHINE : 62, phentsize = 56, phnum = 3;
    memcpy(f + 18, &machine, 2);
    uint64_t phoff = 64, vbase = 0x400000;
    memcpy(f + 32, &phoff, 8);
    memcpy(f + 54, &phentsize, 2);
    memcpy(f + 56, &phnum, 2);
    size_t dyn = 64 + 3 * 56, str = dyn + 16 * 40, n = str;
    /* strings */
    f[n++] = 0;
    uint64_t name_off[8];
    size_t nn = 0;
    for (; needed && needed[nn]; nn++) {
        name_off[nn] = n - str;
        memcpy(f + n, needed[nn], strlen(needed[nn]) + 1);
        n += strlen(needed[nn]) + 1;
    }
    if (extra_str) {
        memcpy(f + n, extra_str, strlen(extra_str) + 1);
        n += strlen(extra_str) + 1;
    }
    uint64_t strsz = n - str;
    /* dynamic entries */
    size_t d = dyn;
    for (size_t i = 0; i < nn; i++, d += 16) {
        int64_t tag = 1;
        memcpy(f + d, &tag, 8);
        memcpy(f + d + 8, &name_off[i], 8);
    }
    int64_t tags[2] = {5, 10};
    uint64_t vals[2] = {vbase + str, strsz};
    for (int i = 0; i < 2; i++, d += 16) {
        memcpy(f + d, &tags[i], 8);
        memcpy(f + d + 8, &vals[i], 8);
    }
    /* program headers: INTERP (or NOTE when static), LOAD of the whole file, DYNAMIC */
    uint32_t types[3] = {dynamic ? 3u : 4u, 1u, dynamic ? 2u : 6u};
    uint64_t offs[3] = {str, 0, dyn}, sizes[3] = {1, n, d - dyn};
    for (int i = 0; i < 3; i++) {
        uint8_t *ph = f + 64 + 56 * i;
        memcpy(ph, &types[i], 4);
        memcpy(ph + 8, &offs[i], 8);
        uint64_t va = vbase + offs[i];
        memcpy(ph + 16, &va, 8);
        memcpy(ph + 32, &sizes[i], 8);
    }
    return n;
}

static int file_of(const uint8_t *b, size_t n)
{
    int fd = memfd_create("elf", MFD_CLOEXEC);
    CHECK(fd >= 0);
    CHECK(pwrite(fd, b, n, 0) == (ssize_t)n);
    return fd;
}

static void probe(const uint8_t *b, size_t n, struct ms_elf_info *e)
{
    int fd = file_of(b, n);
    CHECK_EQ(ms_elf_inspect(fd, e), 0);
    close(fd);
}

static uint8_t img[8192];

static void test_known(void)
{
    struct ms_elf_info e;
    const char *libc[] = {"libc.so.6", NULL};
    size_t n = build(img, sizeof img, 2, 1, libc, NULL);
    probe(img, n, &e);
    CHECK(e.elf && e.native && e.dynamic && !e.sanitizer_kind && !e.sanitizer_blocks);

    n = build(img, sizeof img, 2, 0, NULL, NULL);
    probe(img, n, &e);
    CHECK(e.elf && e.native && !e.dynamic && !e.sanitizer_kind);

    n = build(img, sizeof img, 1, 1, libc, NULL); /* ELFCLASS32 */
    probe(img, n, &e);
    CHECK(e.elf && !e.native && !e.dynamic);

    const char *asan[] = {"libasan.so.8", "libc.so.6", NULL};
    n = build(img, sizeof img, 2, 1, asan, NULL);
    probe(img, n, &e);
    CHECK_STREQ(e.sanitizer, "libasan.so.8");
    CHECK_STREQ(e.sanitizer_kind, "AddressSanitizer");
    CHECK_EQ(e.sanitizer_blocks, 1);

    const char *tsan[] = {"libc.so.6", "libtsan.so.2", NULL};
    n = build(img, sizeof img, 2, 1, tsan, NULL);
    probe(img, n, &e);
    CHECK_STREQ(e.sanitizer_kind, "ThreadSanitizer");
    CHECK_EQ(e.sanitizer_blocks, 0); /* works under the agent */

    n = build(img, sizeof img, 2, 1, libc, "__sanitizer_malloc_hook");
    probe(img, n, &e);
    CHECK_STREQ(e.sanitizer, "a static runtime");
    CHECK_EQ(e.sanitizer_blocks, 1);
    n = build(img, sizeof img, 2, 1, libc, "__sanitizer_malloc_hooks"); /* another name */
    probe(img, n, &e);
    CHECK(!e.sanitizer_kind);

    probe((const uint8_t *)"#!/bin/sh\necho\n", 15, &e);
    CHECK(!e.elf);
    probe((const uint8_t *)"", 0, &e);
    CHECK(!e.elf);
}

/* Every prefix and random mutations: no fault, no read out of bounds, sane answers. */
static void test_hostile(void)
{
    const char *asan[] = {"libasan.so.8", "libc.so.6", NULL};
    size_t n = build(img, sizeof img, 2, 1, asan, "__sanitizer_malloc_hook");
    struct ms_elf_info e;
    for (size_t len = 0; len <= n; len++) {
        probe(img, len, &e);
        CHECK(!e.native || e.elf);
        CHECK(!e.sanitizer_blocks || e.sanitizer_kind);
    }
    uint64_t x = 88172645463325252ull;
    uint8_t m[8192];
    for (int round = 0; round < 3000; round++) {
        memcpy(m, img, n);
        for (int k = 0; k < 1 + round % 8; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            size_t at = (size_t)(x % n);
            m[at] = (uint8_t)(x >> 32);
            if (x & 1) /* a large offset or count */
                m[at | 7] = 0xff;
        }
        probe(m, n, &e);
        CHECK(!e.sanitizer_blocks || e.sanitizer_kind);
        CHECK(strlen(e.sanitizer) < sizeof e.sanitizer);
    }
}

int main(void)
{
    test_known();
    test_hostile();
    puts("test_elf_probe ok");
    return 0;
}

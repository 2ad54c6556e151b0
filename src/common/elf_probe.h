/* elf_probe.h: what an executable's ELF headers say about whether memscope's agent can load
 * into it: whether it is an ELF program of this machine's class (a 32-bit program cannot load
 * a 64-bit agent), whether it is dynamically linked (a static one has no loader to honour
 * LD_PRELOAD), and which sanitizer runtime it needs, if any, and whether the agent can work
 * beside it: AddressSanitizer's must be the first library loaded (it aborts when LD_PRELOAD
 * comes first, or spins with verify_asan_link_order=0); a runtime linked into the program
 * serves malloc from the program itself, where no LD_PRELOAD library sees it (static LSan also
 * crashes); MemorySanitizer needs every library instrumented. ThreadSanitizer's and
 * LeakSanitizer's shared runtimes work under the agent (tests/integration/test_sanitizers.sh). Read with pread from an open descriptor: no allocation, no stdio,
 * a bounded number of reads, so that `memscope run` uses it before it starts its program and
 * the agent before an exec (src/agent/exec.c). Header-only, like agent_api.h: the agent links
 * nothing of src/common. The file is treated as hostile: every offset and count is bounded. */
#ifndef MS_ELF_PROBE_H
#define MS_ELF_PROBE_H

#include <stdint.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__)
#define MS_ELF_MACHINE 62 /* EM_X86_64 */
#elif defined(__aarch64__)
#define MS_ELF_MACHINE 183 /* EM_AARCH64 */
#else
#define MS_ELF_MACHINE 0 /* unknown: any machine is taken as ours */
#endif

struct ms_elf_info {
    int elf;            /* 1: an ELF file (else a script or anything else: the rest is 0) */
    int native;         /* 1: 64-bit and this machine's: the agent can load into it */
    int dynamic;        /* 1: it has a program interpreter (PT_INTERP), so LD_PRELOAD applies */
    char sanitizer[64]; /* the sanitizer runtime it needs, "" when none: a library name
                           ("libasan.so.8") or what the static runtime's symbols show */
    const char *sanitizer_kind; /* "AddressSanitizer", ... (static text), NULL when none */
    int sanitizer_blocks;       /* 1: the agent cannot record it (see above) */
};

/* The sanitizer of shared runtime lib (a DT_NEEDED name), or NULL: the sanitizers whose
 * runtime replaces malloc (UBSan alone does not: not listed). *blocks: 1 when the agent
 * cannot record a program that needs it. */
static inline const char *ms_elf_sanitizer_kind(const char *lib, int *blocks)
{
    static const struct {
        const char *prefix, *kind;
        int blocks;
    } runtimes[] = {
        {"libasan.", "AddressSanitizer", 1},     {"libclang_rt.asan", "AddressSanitizer", 1},
        {"libhwasan.", "HWAddressSanitizer", 1}, {"libclang_rt.hwasan", "HWAddressSanitizer", 1},
        {"libmsan.", "MemorySanitizer", 1},      {"libclang_rt.msan", "MemorySanitizer", 1},
        {"libtsan.", "ThreadSanitizer", 0},      {"libclang_rt.tsan", "ThreadSanitizer", 0},
        {"liblsan.", "LeakSanitizer", 0},        {"libclang_rt.lsan", "LeakSanitizer", 0},
    };
    for (size_t i = 0; i < sizeof runtimes / sizeof runtimes[0]; i++)
        if (!strncmp(lib, runtimes[i].prefix, strlen(runtimes[i].prefix))) {
            *blocks = runtimes[i].blocks;
            return runtimes[i].kind;
        }
    return NULL;
}

static inline int ms_elf_read(int fd, void *buf, size_t n, uint64_t off)
{
    return off < ((uint64_t)1 << 62) && pread(fd, buf, n, (off_t)off) == (ssize_t)n ? 0 : -1;
}

/* Fills e from the file open at fd. Returns 0, or -1 when the file cannot be read (e is then
 * all zero, as for a file that is not ELF). */
static inline int ms_elf_inspect(int fd, struct ms_elf_info *e)
{
    memset(e, 0, sizeof *e);
    unsigned char eh[64];
    if (ms_elf_read(fd, eh, sizeof eh, 0) < 0)
        return pread(fd, eh, 4, 0) >= 0 ? 0 : -1; /* short: not ELF */
    if (memcmp(eh, "\177ELF", 4))
        return 0;
    e->elf = 1;
    uint16_t machine;
    memcpy(&machine, eh + 18, 2);
    if (eh[4] != 2 || eh[5] != 1 || (MS_ELF_MACHINE && machine != MS_ELF_MACHINE))
        return 0; /* 32-bit, big-endian or another machine's: nothing more is read */
    e->native = 1;
    uint64_t phoff;
    uint16_t phentsize, phnum;
    memcpy(&phoff, eh + 32, 8);
    memcpy(&phentsize, eh + 54, 2);
    memcpy(&phnum, eh + 56, 2);
    uint64_t dyn_off = 0, dyn_size = 0;
    struct {
        uint64_t vaddr, off, size;
    } load[16];
    int nload = 0;
    for (uint16_t i = 0; i < phnum && i < 256 && phentsize >= 56; i++) {
        unsigned char ph[56];
        if (ms_elf_read(fd, ph, sizeof ph, phoff + (uint64_t)i * phentsize) < 0)
            break;
        uint32_t type;
        memcpy(&type, ph, 4);
        if (type == 3) /* PT_INTERP */
            e->dynamic = 1;
        else if (type == 2) { /* PT_DYNAMIC */
            memcpy(&dyn_off, ph + 8, 8);
            memcpy(&dyn_size, ph + 32, 8);
        } else if (type == 1 && nload < 16) { /* PT_LOAD */
            memcpy(&load[nload].off, ph + 8, 8);
            memcpy(&load[nload].vaddr, ph + 16, 8);
            memcpy(&load[nload].size, ph + 32, 8);
            nload++;
        }
    }
    if (!dyn_size)
        return 0;
    /* The dynamic section: DT_NEEDED names, and the string table holding them. */
    uint64_t needed[32], strtab = 0, strsz = 0;
    int nneeded = 0;
    for (uint64_t at = 0; at + 16 <= dyn_size && at < 16 * 1024; at += 16) {
        int64_t tag;
        uint64_t val;
        unsigned char d[16];
        if (ms_elf_read(fd, d, sizeof d, dyn_off + at) < 0)
            break;
        memcpy(&tag, d, 8);
        memcpy(&val, d + 8, 8);
        if (tag == 0) /* DT_NULL */
            break;
        if (tag == 1 && nneeded < 32)
            needed[nneeded++] = val;
        else if (tag == 5)
            strtab = val;
        else if (tag == 10)
            strsz = val;
    }
    uint64_t str_off = 0;
    int found = 0;
    for (int i = 0; i < nload && !found; i++)
        if (strtab >= load[i].vaddr && strtab - load[i].vaddr < load[i].size) {
            str_off = load[i].off + (strtab - load[i].vaddr);
            found = 1;
        }
    if (!found || !strsz)
        return 0;
    for (int i = 0; i < nneeded && !e->sanitizer[0]; i++) {
        char name[64];
        if (needed[i] >= strsz || ms_elf_read(fd, name, 1, str_off + needed[i]) < 0)
            continue;
        ssize_t n = pread(fd, name, sizeof name - 1, (off_t)(str_off + needed[i]));
        if (n <= 0)
            continue;
        name[n] = 0;
        const char *kind = ms_elf_sanitizer_kind(name, &e->sanitizer_blocks);
        if (kind) {
            memcpy(e->sanitizer, name, strnlen(name, sizeof e->sanitizer - 1));
            e->sanitizer_kind = kind;
        }
    }
    if (e->sanitizer[0])
        return 0;
    /* A runtime linked into the program (-static-libasan): it leaves its allocator hook's
     * name, a weak reference, in the dynamic string table (AddressSanitizer and LeakSanitizer;
     * a static ThreadSanitizer or MemorySanitizer runtime leaves no mark there). */
    static const char marker[] = "__sanitizer_malloc_hook";
    char win[4096 + sizeof marker];
    uint64_t len = strsz < (4u << 20) ? strsz : (4u << 20);
    for (uint64_t at = 0; at < len; at += 4096) {
        size_t want = len - at < sizeof win ? (size_t)(len - at) : sizeof win;
        if (ms_elf_read(fd, win, want, str_off + at) < 0)
            break;
        for (size_t k = 0; k + sizeof marker <= want; k++)
            if (win[k] == '_' && !memcmp(win + k, marker, sizeof marker)) {
                memcpy(e->sanitizer, "a static runtime", sizeof "a static runtime");
                e->sanitizer_kind = "AddressSanitizer or LeakSanitizer";
                e->sanitizer_blocks = 1;
                return 0;
            }
    }
    return 0;
}

#endif

/* attach.c: in-process ("standalone") collection: memscope__attach() makes an agent that was
 * loaded with dlopen() into a running process see the allocations of every object already
 * loaded, and of every object loaded later; memscope__detach() undoes it.
 *
 * Called by the memscope Python package (memscope.start()/stop()) and by tests/progs/
 * attach_host.c; once per start, so cost is secondary to never harming the host. Under
 * LD_PRELOAD the agent's definitions already win symbol lookup, and both calls do nothing.
 *
 * How: the objects of the process reach malloc & co. through their GOT slots (JUMP_SLOT for
 * calls through the PLT, GLOB_DAT for address-taken or -fno-plt calls), which the dynamic loader
 * filled with the C library's addresses. For every loaded object except the agent, the dynamic
 * loader and the vDSO, attach reads the dynamic section, walks the RELA and JMPREL tables and
 * writes the agent's address into each slot of an interposed symbol, the way heaptrack_inject
 * and memray's elf_shenanigans do. Invariants that keep the host safe:
 *   - every pointer read from the object (dynamic entries, tables, symbols, strings, slots) is
 *     checked to lie inside the object's PT_LOAD ranges first; anything malformed skips the
 *     object, with one line on stderr at most;
 *   - a slot is written only when it holds the C library's function (or, for a symbol the
 *     object does not define, a not yet resolved lazy PLT stub of the object itself): an object
 *     bound to its own malloc or to another allocator is left alone, so a block is always freed
 *     by the allocator that made it (the agent only forwards to the C library);
 *   - attach refuses outright (-ENOTSUP) when the process's global malloc & co. are not the C
 *     library's (jemalloc or tcmalloc preloaded or linked in): the agent forwards to the C
 *     library, so blocks of the other allocator would reach the wrong free;
 *   - a slot in a RELRO page is made writable with mprotect for the one 8-byte atomic store and
 *     made read-only again; other threads calling through the slot see the old or the new
 *     address, both valid. Objects another thread is still loading are skipped (where
 *     _dl_find_object exists, glibc 2.35+, it only knows objects already relocated) and are
 *     patched when that thread's dlopen returns through the agent's hook.
 * Later loads: the GOT slots of dlopen are patched too, to dlopen_hook(), which calls the real
 * dlopen and then patches the objects that are new. Those of dlclose go to the agent's dlclose (agent.c),
 * which forgets a closed library's unwind tables, as under LD_PRELOAD. The agent deliberately exports no dlopen
 * symbol: under LD_PRELOAD it would become every program's dlopen and change the caller glibc
 * sees (see open_as_caller()), so LD_PRELOAD runs are untouched by this file.
 *
 * Known gaps (NEEDSWORK): allocations made by the constructors of a library while dlopen loads
 * it are not recorded (the hook patches after dlopen returns), and their frees show up as
 * unmatched; the dynamic loader's own allocations (link maps, TLS), and function pointers to
 * malloc taken before attach, looked up with dlsym or stored by R_X86_64_64 data relocations,
 * bypass the agent; after detach, frees of blocks recorded while attached are not recorded. */
#include "agent.h"

#include <dlfcn.h>
#include <elf.h>
#include <limits.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>

enum {
    F_MALLOC,
    F_FREE,
    F_CALLOC,
    F_REALLOC,
    F_REALLOCARRAY,
    F_POSIX_MEMALIGN,
    F_ALIGNED_ALLOC,
    F_MEMALIGN,
    F_VALLOC,
    F_PVALLOC,
    F_MMAP,
    F_MMAP64,
    F_MUNMAP,
    F_MREMAP,
    F_DLOPEN,
    F_DLCLOSE, /* the agent's dlclose forgets the closed library's unwind tables (agent.c) */
    NFUNCS
};

static const char *const fn_names[NFUNCS] = {
    "malloc",        "free",     "calloc", "realloc", "reallocarray", "posix_memalign",
    "aligned_alloc", "memalign", "valloc", "pvalloc", "mmap",         "mmap64",
    "munmap",        "mremap",   "dlopen", "dlclose"};

#define MAX_RELOCS (1u << 22) /* per table; far above any real object */
#define MAX_DYN 4096          /* dynamic entries read per object */
#define MAX_SEEN 4096         /* objects remembered as patched (a full table only costs time) */

static uintptr_t libc_fn[NFUNCS];  /* the C library's definitions (dlsym RTLD_NEXT) */
static uintptr_t libc_alt[NFUNCS]; /* a second accepted address (dlopen@GLIBC_2.2.5), or 0 */
static uintptr_t agent_fn[NFUNCS]; /* what the slots get: the agent's interposers */
static int attached;               /* 1 between attach and detach (atomic reads) */
static int preloaded;              /* 1: the agent already wins symbol lookup */
static int resolved;               /* the tables above are filled */
static int patch_lock;             /* one patch pass at a time */
static uintptr_t self_addr;        /* an address inside the agent, which is never patched */
static uintptr_t rtld_base, vdso_base;
#if defined(DLFO_STRUCT_HAS_EH_DBASE)
static int (*find_object)(void *, struct dl_find_object *); /* glibc 2.35+, else NULL */
#endif
static void *(*real_dlopen)(const char *, int);
static long page_size;

/* Objects patched by earlier passes of the dlopen hook, so that each dlopen only parses the
 * objects that are new. An entry is (base, phdr, name hash, one patched slot or 0); an object
 * is skipped only while that slot still holds the agent's address. */
struct seen {
    uintptr_t base;
    const void *phdr;
    uint64_t name_hash;
    uintptr_t *probe;
    int probe_fn;
};
static struct seen seen_tab[2][MAX_SEEN];
static unsigned nseen[2];
static int cur_seen;
static unsigned seen_cursor;

/* ---- one loaded object, as dl_iterate_phdr describes it ---- */

struct object {
    uintptr_t base;
    const ElfW(Phdr) * ph;
    int phnum;
    uintptr_t relro_lo, relro_hi; /* pages made read-only after relocation (may be empty) */
    const char *name;
    /* from the dynamic section, all checked to lie inside the object */
    const ElfW(Sym) * symtab;
    size_t nsyms; /* upper bound from DT_HASH, or SIZE_MAX when unknown */
    const char *strtab;
    size_t strsz;
    const ElfW(Rela) * rela, *jmprel;
    size_t nrela, njmprel;
    size_t rpath, runpath; /* strtab offsets, or SIZE_MAX */
};

/* Returns the PT_LOAD header of o that holds [p, p + n), or NULL. */
static const ElfW(Phdr) * load_of(const struct object *o, uintptr_t p, size_t n)
{
    for (int i = 0; i < o->phnum; i++) {
        const ElfW(Phdr) *ph = &o->ph[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t lo = o->base + ph->p_vaddr;
        if (p >= lo && p - lo <= ph->p_memsz && n <= ph->p_memsz - (p - lo))
            return ph;
    }
    return NULL;
}

/* A pointer from the dynamic section: glibc relocates most entries in place and the vDSO's stay
 * offsets, so v is taken as an address when it lies inside the object, else as an offset from
 * the base (for a shared object loaded high, offsets lie far below every segment, so the two
 * cannot be confused). Returns 0 when neither lies inside the object with n bytes. */
static uintptr_t dyn_ptr(const struct object *o, uintptr_t v, size_t n)
{
    if (load_of(o, v, n))
        return v;
    if (v <= UINTPTR_MAX - o->base && load_of(o, o->base + v, n))
        return o->base + v;
    return 0;
}

/* Fills o from info; returns 0, or -1 when the object is malformed (o is then unusable). */
static int object_parse(struct object *o, const struct dl_phdr_info *info)
{
    memset(o, 0, sizeof *o);
    o->base = info->dlpi_addr;
    o->ph = info->dlpi_phdr;
    o->phnum = info->dlpi_phnum;
    o->name = info->dlpi_name ? info->dlpi_name : "";
    o->nsyms = SIZE_MAX;
    o->rpath = o->runpath = SIZE_MAX;
    if (!o->ph || o->phnum <= 0 || o->phnum > 4096)
        return -1;
    const ElfW(Phdr) *dynph = NULL;
    for (int i = 0; i < o->phnum; i++) {
        if (o->ph[i].p_type == PT_DYNAMIC)
            dynph = &o->ph[i];
        if (o->ph[i].p_type == PT_GNU_RELRO) {
            uintptr_t lo = o->base + o->ph[i].p_vaddr;
            o->relro_lo = lo & ~(uintptr_t)(page_size - 1);
            o->relro_hi = (lo + o->ph[i].p_memsz) & ~(uintptr_t)(page_size - 1);
        }
    }
    if (!dynph)
        return 0; /* static: imports nothing */
    uintptr_t dynaddr = o->base + dynph->p_vaddr;
    const ElfW(Phdr) *seg = load_of(o, dynaddr, sizeof(ElfW(Dyn)));
    if (!seg || (dynaddr & 7))
        return -1;
    size_t room = (size_t)(o->base + seg->p_vaddr + seg->p_memsz - dynaddr) / sizeof(ElfW(Dyn));
    const ElfW(Dyn) *dyn = (const ElfW(Dyn) *)dynaddr;
    uintptr_t symtab = 0, strtab = 0, rela = 0, jmprel = 0, hash = 0;
    size_t relasz = 0, pltrelsz = 0, relaent = sizeof(ElfW(Rela)), syment = sizeof(ElfW(Sym));
    long pltrel = DT_RELA;
    size_t i;
    for (i = 0; i < room && i < MAX_DYN && dyn[i].d_tag != DT_NULL; i++) {
        uintptr_t v = dyn[i].d_un.d_val;
        switch (dyn[i].d_tag) {
        case DT_SYMTAB: symtab = v; break;
        case DT_STRTAB: strtab = v; break;
        case DT_STRSZ: o->strsz = v; break;
        case DT_SYMENT: syment = v; break;
        case DT_RELA: rela = v; break;
        case DT_RELASZ: relasz = v; break;
        case DT_RELAENT: relaent = v; break;
        case DT_JMPREL: jmprel = v; break;
        case DT_PLTRELSZ: pltrelsz = v; break;
        case DT_PLTREL: pltrel = (long)v; break;
        case DT_HASH: hash = v; break;
        case DT_RPATH: o->rpath = v; break;
        case DT_RUNPATH: o->runpath = v; break;
        default: break;
        }
    }
    if (i == room || i == MAX_DYN)
        return -1; /* no DT_NULL inside the segment */
    if (!symtab && !rela && !jmprel)
        return 0; /* nothing imported: nothing to patch */
    if (syment != sizeof(ElfW(Sym)) || relaent != sizeof(ElfW(Rela)))
        return -1;
    o->strtab = (const char *)dyn_ptr(o, strtab, o->strsz);
    o->symtab = (const ElfW(Sym) *)dyn_ptr(o, symtab, sizeof(ElfW(Sym)));
    if (!o->strtab || !o->strsz || !o->symtab)
        return -1;
    const uint32_t *h = (const uint32_t *)dyn_ptr(o, hash, 2 * sizeof(uint32_t));
    if (h)
        o->nsyms = h[1]; /* nchain = number of symbols; objects with only DT_GNU_HASH have
                            no such count, and every symbol read is range-checked anyway */
    if (rela && relasz) {
        o->nrela = relasz / sizeof(ElfW(Rela));
        o->rela = (const ElfW(Rela) *)dyn_ptr(o, rela, o->nrela * sizeof(ElfW(Rela)));
        if (!o->rela || o->nrela > MAX_RELOCS)
            return -1;
    }
    if (jmprel && pltrelsz && pltrel == DT_RELA) {
        o->njmprel = pltrelsz / sizeof(ElfW(Rela));
        o->jmprel = (const ElfW(Rela) *)dyn_ptr(o, jmprel, o->njmprel * sizeof(ElfW(Rela)));
        if (!o->jmprel || o->njmprel > MAX_RELOCS)
            return -1;
    }
    return 0;
}

/* The string at strtab offset off, or NULL when it does not end inside the table. */
static const char *object_str(const struct object *o, size_t off)
{
    if (!o->strtab || off >= o->strsz || !memchr(o->strtab + off, 0, o->strsz - off))
        return NULL;
    return o->strtab + off;
}

/* Which interposed function a symbol name is, or -1. */
static int fn_index(const struct object *o, size_t off)
{
    if (off >= o->strsz)
        return -1;
    const char *s = o->strtab + off;
    size_t left = o->strsz - off;
    switch (s[0]) {
    case 'm':
    case 'f':
    case 'c':
    case 'r':
    case 'p':
    case 'a':
    case 'v':
    case 'd': break;
    default: return -1;
    }
    for (int i = 0; i < NFUNCS; i++) {
        size_t l = strlen(fn_names[i]);
        if (l < left && s[l] == 0 && !memcmp(s, fn_names[i], l))
            return i;
    }
    return -1;
}

/* Which name of set a symbol name is, or -1. */
static int set_index(const struct object *o, size_t off, const struct got_set *set)
{
    if (off >= o->strsz)
        return -1;
    const char *s = o->strtab + off;
    size_t left = o->strsz - off;
    if (s[0] != set->names[0][0])
        return -1; /* every name of a set starts alike (cu...) */
    for (int i = 0; i < set->n; i++) {
        size_t l = strlen(set->names[i]);
        if (l < left && s[l] == 0 && !memcmp(s, set->names[i], l))
            return i;
    }
    return -1;
}

/* PROT_* the page holding slot has now: its segment's flags, read-only in the RELRO pages. */
static int slot_prot(const struct object *o, const ElfW(Phdr) * seg, uintptr_t slot)
{
    if (slot >= o->relro_lo && slot < o->relro_hi)
        return PROT_READ;
    return (seg->p_flags & PF_R ? PROT_READ : 0) | (seg->p_flags & PF_W ? PROT_WRITE : 0) |
           (seg->p_flags & PF_X ? PROT_EXEC : 0);
}

/* Stores v into slot; returns 0 or -errno (the slot is then unchanged). */
static int slot_write(const struct object *o, const ElfW(Phdr) * seg, uintptr_t *slot, uintptr_t v)
{
    int prot = slot_prot(o, seg, (uintptr_t)slot);
    if (prot & PROT_WRITE) {
        __atomic_store_n(slot, v, __ATOMIC_SEQ_CST);
        return 0;
    }
    void *page = (void *)((uintptr_t)slot & ~(uintptr_t)(page_size - 1));
    if (mprotect(page, (size_t)page_size, prot | PROT_READ | PROT_WRITE) != 0)
        return -errno;
    __atomic_store_n(slot, v, __ATOMIC_SEQ_CST);
    mprotect(page, (size_t)page_size, prot);
    return 0;
}

/* Is v an unresolved lazy PLT stub of o, i.e. code inside o itself? */
static int is_own_code(const struct object *o, uintptr_t v)
{
    const ElfW(Phdr) *seg = load_of(o, v, 1);
    return seg && (seg->p_flags & PF_X);
}

struct pass {
    const struct got_set *set; /* NULL: malloc & co. (the tables above); else got_redirect's */
    int restore;               /* 0: attach (libc -> agent), 1: detach (agent -> libc) */
    int dry;                   /* 1: only check every entry, write nothing */
    int failed;                /* objects skipped as malformed or unwritable */
    int patched;               /* slots written */
    uintptr_t *probe;
    int probe_fn;
};

/* Patches (or restores) the slots of one relocation table; returns 0 or -1 on a bad entry.
 * Run dry first over all tables of an object, so that a malformed one leaves it untouched. */
static int patch_table(const struct object *o, const ElfW(Rela) * r, size_t n, struct pass *p)
{
    for (size_t i = 0; i < n; i++) {
        unsigned type = ELF64_R_TYPE(r[i].r_info);
        if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT)
            continue;
        size_t si = ELF64_R_SYM(r[i].r_info);
        if (si == 0)
            continue;
        if (si >= o->nsyms || si > (SIZE_MAX - (uintptr_t)o->symtab) / sizeof(ElfW(Sym)) ||
            !load_of(o, (uintptr_t)(o->symtab + si), sizeof(ElfW(Sym))))
            return -1;
        const ElfW(Sym) *sym = &o->symtab[si];
        int f = p->set ? set_index(o, sym->st_name, p->set) : fn_index(o, sym->st_name);
        if (f < 0)
            continue;
        /* An object that defines the function itself (the C library does, so that its own
         * calls can be interposed) is patched only where the slot is bound to the C library:
         * a lazy stub there could resolve to the object's own copy. */
        int defined = sym->st_shndx != SHN_UNDEF;
        uintptr_t addr = o->base + r[i].r_offset;
        const ElfW(Phdr) *seg = load_of(o, addr, sizeof(uintptr_t));
        if (!seg || (addr & 7))
            return -1;
        uintptr_t *slot = (uintptr_t *)addr;
        if (p->dry)
            continue;
        uintptr_t v = __atomic_load_n(slot, __ATOMIC_RELAXED);
        uintptr_t want;
        if (p->set) {
            if (v != p->set->orig[f] &&
                !(type == R_X86_64_JUMP_SLOT && !defined && is_own_code(o, v)))
                continue; /* bound elsewhere, or already redirected */
            want = p->set->repl[f];
        } else if (p->restore) {
            if (v != agent_fn[f])
                continue;
            want = libc_fn[f];
        } else {
            if (v == agent_fn[f]) {
                if (!p->probe) {
                    p->probe = slot;
                    p->probe_fn = f;
                }
                continue;
            }
            if (v != libc_fn[f] && (!libc_alt[f] || v != libc_alt[f]) &&
                !(type == R_X86_64_JUMP_SLOT && !defined && is_own_code(o, v)))
                continue; /* bound elsewhere: leave it */
            want = agent_fn[f];
        }
        if (slot_write(o, seg, slot, want) < 0)
            return -1;
        p->patched++;
        if (!p->set && !p->restore && !p->probe) {
            p->probe = slot;
            p->probe_fn = f;
        }
    }
    return 0;
}

static uint64_t hash_name(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

/* The entry of an earlier pass for this object when that pass patched it and its probe slot
 * still holds the agent's address, else NULL. */
static const struct seen *seen_before(const struct object *o, uint64_t nh)
{
    const struct seen *old = seen_tab[cur_seen ^ 1];
    unsigned n = nseen[cur_seen ^ 1];
    /* Passes visit the objects in the same order: start where the last match was. */
    for (unsigned k = 0, i = seen_cursor; k < n; k++, i = i + 1 < n ? i + 1 : 0) {
        if (i >= n)
            i = 0;
        if (old[i].base != o->base || old[i].phdr != o->ph || old[i].name_hash != nh)
            continue;
        seen_cursor = i + 1;
        if (!old[i].probe)
            return &old[i];
        if (load_of(o, (uintptr_t)old[i].probe, sizeof(uintptr_t)) &&
            __atomic_load_n(old[i].probe, __ATOMIC_RELAXED) == agent_fn[old[i].probe_fn])
            return &old[i];
        return NULL;
    }
    return NULL;
}

static void remember(const struct object *o, uint64_t nh, uintptr_t *probe, int probe_fn)
{
    unsigned n = nseen[cur_seen];
    if (n == MAX_SEEN)
        return;
    seen_tab[cur_seen][n] = (struct seen){o->base, o->ph, nh, probe, probe_fn};
    nseen[cur_seen] = n + 1;
}

struct pass_ctx {
    struct pass *p;
    int incremental; /* skip objects an earlier pass patched */
};

static int patch_one(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct pass_ctx *c = arg;
    struct pass *p = c->p;
    (void)size;
    if (vdso_base && info->dlpi_addr == vdso_base)
        return 0;
    if (rtld_base && info->dlpi_addr == rtld_base)
        return 0;
    struct object o = {.base = info->dlpi_addr, .ph = info->dlpi_phdr, .phnum = info->dlpi_phnum};
    if (!o.ph || o.phnum <= 0 || load_of(&o, self_addr, 1))
        return 0; /* the agent itself */
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    if (strstr(name, "/ld-linux"))
        return 0; /* the dynamic loader, when AT_BASE did not name it */
#if defined(DLFO_STRUCT_HAS_EH_DBASE)
    if (find_object) {
        struct dl_find_object fo;
        uintptr_t first = 0;
        for (int i = 0; i < o.phnum && !first; i++)
            if (o.ph[i].p_type == PT_LOAD)
                first = o.base + o.ph[i].p_vaddr;
        if (first && find_object((void *)first, &fo) != 0)
            return 0; /* still being loaded by another thread: its dlopen hook patches it */
    }
#endif
    uint64_t nh = hash_name(name);
    if (c->incremental) {
        const struct seen *old = seen_before(&o, nh);
        if (old) {
            remember(&o, nh, old->probe, old->probe_fn);
            return 0;
        }
    }
    if (object_parse(&o, info) < 0) {
        p->failed++;
        agent_say("attach: skipping an object whose dynamic section is unreadable", o.name);
        remember(&o, nh, NULL, 0); /* once: not again at every dlopen */
        return 0;
    }
    p->probe = NULL;
    p->dry = 1;
    if (patch_table(&o, o.jmprel, o.njmprel, p) < 0 || patch_table(&o, o.rela, o.nrela, p) < 0) {
        p->failed++;
        agent_say("attach: skipping an object with a malformed relocation table", o.name);
    } else {
        p->dry = 0;
        if (patch_table(&o, o.jmprel, o.njmprel, p) < 0 ||
            patch_table(&o, o.rela, o.nrela, p) < 0) {
            p->failed++; /* mprotect refused: the slots written so far stay valid */
            agent_say("attach: cannot write the GOT of", o.name);
        }
    }
    remember(&o, nh, p->probe, p->probe_fn);
    return 0;
}

/* One pass over all loaded objects. The caller holds patch_lock. */
static void patch_all(struct pass *p, int incremental)
{
    struct pass_ctx c = {p, incremental};
    cur_seen ^= 1;
    nseen[cur_seen] = 0;
    dl_iterate_phdr(patch_one, &c);
}

/* ---- dlopen with the caller's search path ---- */

/* Finds the object holding address pc; fills o and returns 0, or -1. */
struct find_ctx {
    uintptr_t pc;
    struct object *o;
    int found;
};

static int find_one(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct find_ctx *c = arg;
    (void)size;
    struct object tmp = {.base = info->dlpi_addr, .ph = info->dlpi_phdr, .phnum = info->dlpi_phnum};
    if (!load_of(&tmp, c->pc, 1))
        return 0;
    c->found = object_parse(c->o, info) == 0;
    return 1;
}

/* Tries dlopen on each directory of the search list path (':'-separated, $ORIGIN expanded to
 * origin). Returns the handle, or NULL when no directory holds a loadable file. */
static void *open_in(const char *path, const char *origin, const char *file, int mode)
{
    char buf[PATH_MAX];
    size_t flen = strlen(file);
    while (*path) {
        const char *e = strchr(path, ':');
        size_t len = e ? (size_t)(e - path) : strlen(path);
        size_t n = 0;
        int ok = len > 0;
        for (size_t i = 0; i < len && ok;) {
            const char *s = path + i;
            size_t skip = 0;
            if (!strncmp(s, "$ORIGIN", 7) && (i + 7 == len || s[7] == '/'))
                skip = 7;
            else if (!strncmp(s, "${ORIGIN}", 9) && i + 9 <= len)
                skip = 9;
            if (skip) {
                size_t ol = strlen(origin);
                ok = *origin && n + ol < sizeof buf;
                if (ok)
                    memcpy(buf + n, origin, ol);
                n += ol;
                i += skip;
            } else if (*s == '$') {
                ok = 0; /* $LIB, $PLATFORM: not expanded here */
            } else {
                ok = n + 1 < sizeof buf;
                if (ok)
                    buf[n++] = *s;
                i++;
            }
        }
        if (ok && n + 1 + flen < sizeof buf) {
            buf[n++] = '/';
            memcpy(buf + n, file, flen + 1);
            if (access(buf, F_OK) == 0) {
                void *h = real_dlopen(buf, mode);
                if (h)
                    return h;
                dlerror(); /* wrong class or broken: go on, as the loader does */
            }
        }
        path = e ? e + 1 : path + len;
    }
    return NULL;
}

/* Is there a file named file in one of the directories of LD_LIBRARY_PATH? */
static int in_library_path(const char *file)
{
    const char *p = getenv("LD_LIBRARY_PATH");
    char buf[PATH_MAX];
    size_t flen = strlen(file);
    while (p && *p) {
        const char *e = strchr(p, ':');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len && len + 1 + flen < sizeof buf) {
            memcpy(buf, p, len);
            buf[len] = '/';
            memcpy(buf + len + 1, file, flen + 1);
            if (access(buf, F_OK) == 0)
                return 1;
        }
        p = e ? e + 1 : p + len;
    }
    return 0;
}

/* dlopen(file, mode) as if called from caller. glibc searches a bare name in the DT_RPATH or
 * DT_RUNPATH of the object that called dlopen; called from the agent, it would search the
 * agent's (none). So for a bare name that is not loaded yet this replays the caller's part of
 * the search: DT_RPATH (when there is no DT_RUNPATH) before everything else, DT_RUNPATH after
 * LD_LIBRARY_PATH, then the rest (cache, default directories, the program's DT_RPATH) comes
 * from the real dlopen. NEEDSWORK: the DT_RPATH of the caller's loaders, hwcaps subdirectories
 * and other namespaces than the base one are not replayed. */
static void *open_as_caller(const char *file, int mode, void *caller)
{
    if (!file || strchr(file, '/') || (mode & RTLD_NOLOAD))
        return real_dlopen(file, mode);
    void *h = real_dlopen(file, mode | RTLD_NOLOAD);
    if (h)
        return h; /* already loaded (found by name), with mode applied as dlopen would */
    dlerror();
    struct object o;
    struct find_ctx c = {(uintptr_t)caller, &o, 0};
    dl_iterate_phdr(find_one, &c);
    if (!c.found)
        return real_dlopen(file, mode);
    const char *rpath = o.runpath == SIZE_MAX ? object_str(&o, o.rpath) : NULL;
    const char *runpath = object_str(&o, o.runpath);
    if (!rpath && !runpath)
        return real_dlopen(file, mode);
    char origin[PATH_MAX];
    origin[0] = 0;
    if (o.name[0] && strlen(o.name) < sizeof origin) {
        strcpy(origin, o.name);
    } else if (!o.name[0]) {
        ssize_t l = readlink("/proc/self/exe", origin, sizeof origin - 1);
        origin[l > 0 ? l : 0] = 0;
    }
    char *slash = strrchr(origin, '/');
    if (slash == origin)
        origin[1] = 0; /* in / */
    else if (slash)
        *slash = 0;
    else
        origin[0] = 0; /* no directory known: $ORIGIN entries are skipped */
    if (rpath && (h = open_in(rpath, origin, file, mode)))
        return h;
    if (runpath && !in_library_path(file) && (h = open_in(runpath, origin, file, mode)))
        return h;
    return real_dlopen(file, mode);
}

/* What the GOT slots of dlopen point to while attached. */
static void *dlopen_hook(const char *file, int mode)
{
    void *caller = __builtin_return_address(0);
    void *h = open_as_caller(file, mode, caller);
    if (h && __atomic_load_n(&attached, __ATOMIC_ACQUIRE)) {
        int err = errno;
        agent_tls.internal++;
        spin_lock(&patch_lock);
        if (attached) {
            struct pass p = {0};
            patch_all(&p, 1);
        }
        spin_unlock(&patch_lock);
        agent_tls.internal--;
        errno = err;
    }
    return h;
}

/* ---- attach / detach ---- */

/* Fills the address tables; returns 0 or -errno. */
static int resolve_all(void)
{
    if (resolved)
        return 0;
    page_size = sysconf(_SC_PAGESIZE);
    if (page_size <= 0)
        page_size = 4096;
    Dl_info di;
    if (!dladdr((void *)&resolve_all, &di) || !di.dli_fname)
        return -ENOENT;
    self_addr = (uintptr_t)&resolve_all;
    rtld_base = getauxval(AT_BASE);
    vdso_base = getauxval(AT_SYSINFO_EHDR);
    /* The agent's own definitions: looked up in the agent's handle, which searches the agent
     * first (a plain reference to malloc here would give the global one, the C library's). */
    void *self = dlopen(di.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (!self)
        return -ENOENT;
    for (int i = 0; i < NFUNCS; i++) {
        libc_fn[i] = (uintptr_t)dlsym(RTLD_NEXT, fn_names[i]);
        agent_fn[i] = i == F_DLOPEN ? (uintptr_t)&dlopen_hook : (uintptr_t)dlsym(self, fn_names[i]);
        Dl_info d2;
        if (!libc_fn[i] || !agent_fn[i] || !dladdr((void *)agent_fn[i], &d2) ||
            d2.dli_fbase != di.dli_fbase) {
            dlclose(self);
            agent_say("attach: cannot resolve", fn_names[i]);
            return -ENOENT;
        }
    }
    dlclose(self);
    libc_alt[F_DLOPEN] = (uintptr_t)dlvsym(RTLD_NEXT, "dlopen", "GLIBC_2.2.5");
    libc_alt[F_DLCLOSE] = (uintptr_t)dlvsym(RTLD_NEXT, "dlclose", "GLIBC_2.2.5");
    real_dlopen = (void *(*)(const char *, int))libc_fn[F_DLOPEN];
#if defined(DLFO_STRUCT_HAS_EH_DBASE)
    find_object = (int (*)(void *, struct dl_find_object *))dlsym(RTLD_DEFAULT, "_dl_find_object");
#endif
    /* LD_PRELOAD (or a link against the agent): its definitions already win. */
    preloaded = (uintptr_t)dlsym(RTLD_DEFAULT, "malloc") == agent_fn[F_MALLOC];
    resolved = 1;
    return 0;
}

/* Returns 0, or -ENOTSUP when the process's global definition of one of the functions is
 * neither the C library's nor the agent's (another allocator is in use). */
/* A non-PIE executable that calls malloc exports an undefined "malloc" whose value is its PLT
 * entry, and the loader makes that the canonical address: dlsym(RTLD_DEFAULT) returns it. The
 * entry jumps to the C library's function, so it is not another allocator. */
static int canonical_plt_entry(uintptr_t g)
{
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    if (!dladdr1((void *)g, &info, (void **)&sym, RTLD_DL_SYMENT) || !sym)
        return 0;
    return sym->st_shndx == SHN_UNDEF && sym->st_value != 0;
}

static int check_global_allocator(void)
{
    for (int i = 0; i < F_DLOPEN; i++) {
        uintptr_t g = (uintptr_t)dlsym(RTLD_DEFAULT, fn_names[i]);
        if (g && g != libc_fn[i] && g != agent_fn[i] && !canonical_plt_entry(g)) {
            agent_say("attach: another allocator defines this function; use `memscope run` "
                      "(LD_PRELOAD) for this program",
                      fn_names[i]);
            return -ENOTSUP;
        }
    }
    return 0;
}

/* Starts in-process collection: redirects the GOT slots of malloc & co. and dlopen in every
 * loaded object to the agent. Returns 0 (also when already attached, or when the agent was
 * preloaded and needs no redirection), or a negative errno: -EINVAL when the agent is not
 * recording into a trace (MEMSCOPE_TRACE_DIR was unset when it was loaded, or the trace could
 * not be created), -ENOENT when it cannot find its own or the C library's functions, -ENOTSUP
 * when another allocator is in use. Objects that cannot be parsed or written are skipped. */
AGENT_API int memscope__attach(void)
{
    if (!agent.initialized || agent.broken)
        return -EINVAL;
    int err = errno;
    agent_tls.internal++;
    spin_lock(&patch_lock);
    int rc = resolve_all();
    if (rc == 0 && !preloaded && !attached) {
        rc = check_global_allocator();
        if (rc == 0) {
            struct pass p = {0};
            __atomic_store_n(&attached, 1, __ATOMIC_RELEASE);
            patch_all(&p, 0);
        }
    }
    spin_unlock(&patch_lock);
    agent_tls.internal--;
    errno = err;
    return rc;
}

/* Ends in-process collection: every GOT slot that holds one of the agent's functions gets the
 * C library's back (the resolved address, also where the slot held a lazy PLT stub before,
 * which is what the stub would have resolved to), including slots of objects loaded while
 * attached; objects unloaded meanwhile are simply no longer there. Recording itself is not
 * stopped (memscope__stop does that); calls through pointers to the agent's functions taken
 * while attached still reach the agent, which forwards them. Returns 0, or -EINVAL when not
 * attached. */
AGENT_API int memscope__detach(void)
{
    if (preloaded)
        return 0;
    int err = errno;
    agent_tls.internal++;
    spin_lock(&patch_lock);
    int rc = -EINVAL;
    if (attached) {
        struct pass p = {.restore = 1};
        __atomic_store_n(&attached, 0, __ATOMIC_RELEASE);
        patch_all(&p, 0);
        nseen[0] = nseen[1] = 0;
        rc = 0;
    }
    spin_unlock(&patch_lock);
    agent_tls.internal--;
    errno = err;
    return rc;
}

/* ---- redirecting another set of functions (cuda.c) ---- */

struct set_ctx {
    struct pass p;
    uintptr_t skip; /* an address inside the object that defines the set: never patched */
};

static int redirect_one(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct set_ctx *c = arg;
    (void)size;
    if ((vdso_base && info->dlpi_addr == vdso_base) || (rtld_base && info->dlpi_addr == rtld_base))
        return 0;
    struct object o = {.base = info->dlpi_addr, .ph = info->dlpi_phdr, .phnum = info->dlpi_phnum};
    if (!o.ph || o.phnum <= 0 || load_of(&o, self_addr, 1) || load_of(&o, c->skip, 1))
        return 0;
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    if (strstr(name, "/ld-linux"))
        return 0;
    if (object_parse(&o, info) < 0)
        return 0;
    c->p.dry = 1;
    if (patch_table(&o, o.jmprel, o.njmprel, &c->p) < 0 ||
        patch_table(&o, o.rela, o.nrela, &c->p) < 0)
        return 0; /* malformed: left alone */
    c->p.dry = 0;
    if (patch_table(&o, o.jmprel, o.njmprel, &c->p) < 0 ||
        patch_table(&o, o.rela, o.nrela, &c->p) < 0)
        c->p.failed++;
    return 0;
}

int got_redirect(const struct got_set *set)
{
    int err = errno;
    agent_tls.internal++;
    spin_lock(&patch_lock);
    if (!page_size) {
        page_size = sysconf(_SC_PAGESIZE);
        if (page_size <= 0)
            page_size = 4096;
    }
    self_addr = (uintptr_t)&got_redirect;
    rtld_base = getauxval(AT_BASE);
    vdso_base = getauxval(AT_SYSINFO_EHDR);
    struct set_ctx c = {.p = {.set = set}, .skip = set->skip};
    dl_iterate_phdr(redirect_one, &c);
    spin_unlock(&patch_lock);
    agent_tls.internal--;
    errno = err;
    return c.p.patched;
}

/* cuda.c's dlopen hook: dlopen(file, mode) as if called from caller (open_as_caller). */
void *agent_dlopen_as_caller(const char *file, int mode, void *caller)
{
    if (!real_dlopen)
        real_dlopen = (void *(*)(const char *, int))ms_real_dlsym(RTLD_NEXT, "dlopen");
    if (!real_dlopen)
        return NULL;
    return open_as_caller(file, mode, caller);
}

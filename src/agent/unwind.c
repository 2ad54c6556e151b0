/* unwind.c: the agent's DWARF unwinder: full native stacks through code built without frame
 * pointers (most distributions' libraries, any -O2 program), read from each module's
 * .eh_frame, without locks, allocation or system calls on the hook's path.
 *
 * For a return address the unwinder needs the rule of its frame: where the canonical frame
 * address (CFA) is (rsp or rbp plus an offset), where the caller's rbp was saved, and that the
 * return address is at CFA-8. The rule comes from the module's .eh_frame: its .eh_frame_hdr
 * binary-search table finds the FDE, whose call-frame program (after its CIE's) is run up to the
 * address. That costs a few hundred ns; rules are therefore kept in a direct-mapped cache of
 * 2^16 one-word entries keyed by address (512 KiB, mapped once, mostly in the CPU's L2), so
 * that a walk costs one cache probe and one or two stack reads per frame. An entry (tag and
 * rule) is one atomic word: threads and signal handlers never see half of one.
 *
 * A walk stops, never inventing a frame, at an address outside every module it knows, at a
 * frame whose rule it does not handle (CFA expressions: PLT stubs and signal trampolines; the
 * outermost frames, whose return address is undefined), or when a read would leave the thread's
 * stack. Modules are registered when the agent describes them (stacks.c: at start and when a
 * stack reaches a new one after dlopen). */
#include "agent.h"

#include <link.h>
#include <string.h>
#include <sys/mman.h>

#define MAX_CFI_MODULES 8192
#define CACHE_BITS 16
#define CACHE_SIZE (1u << CACHE_BITS)
#define MAX_REMEMBER 8

enum { REG_RBP = 6, REG_RSP = 7, REG_RA = 16 };

struct cfi_module {
    uintptr_t lo, hi;     /* the PT_LOAD segments' range (bounds of .eh_frame reads) */
    uintptr_t xlo, xhi;   /* the executable (PF_X) segments' range: where a return address is */
    const uint8_t *table; /* .eh_frame_hdr's search table: (initial pc, FDE) pairs */
    uintptr_t hdr;        /* .eh_frame_hdr's address: the table's values are relative */
    uint32_t count;       /* entries */
};

static struct cfi_module cmods[MAX_CFI_MODULES];
static unsigned ncmods; /* published with release: entries below it are complete */
/* A sequence count around changes of cmods (odd while one is made; writers hold stacks.c's
 * module lock): a reader copies the entry it needs and tries again when the count moved, so a
 * library closed meanwhile (its entry removed, the array compacted) is never read half. */
static unsigned cmods_seq;
/* Bumped whenever the modules change: the threads' own rule caches (memo, local) start over. */
static unsigned rules_gen = 1;

/* A frame's rule, packed into 64 bits for the cache. */
enum {
    CFA_RSP = 1,
    CFA_RBP = 2,
    CFA_STOP = 3,   /* a real frame, but nothing above it that this unwinder can read */
    CFA_SIGNAL = 4, /* the kernel's signal trampoline: the interrupted frame is in the ucontext */
};
struct rule {
    int32_t cfa_off;
    uint8_t cfa; /* CFA_* */
    uint8_t rbp_saved;
    int16_t rbp_off; /* the caller's rbp at CFA + rbp_off when rbp_saved */
};

/* A cache entry is one 64-bit word, read and written atomically: the top bits of the address's
 * hash (the tag; the slot index is the bits above them) and the frame's rule packed into 28
 * bits. Rules that do not fit (a CFA offset that is not a multiple of 8 or past 512 KiB) are
 * not cached. Two addresses of one slot share a tag with probability 2^-36. */
#define TAG_BITS 36
static uint64_t *cache;
static int cache_used; /* an entry was written since the last unwind_forget() */

/* The rules a thread's walks used lately, by pc (direct-mapped, 64 KiB): a thread's frames
 * vary among a few call paths, whose rules stay here in the CPU's nearest caches, where the
 * shared cache misses on programs with deep stacks. Per thread, in its own mapping (not TLS:
 * the agent can be loaded with dlopen), never used by a signal handler's walk. An entry is
 * the pc and its packed rule; pc 0 is empty. */
#define LOCAL_BITS 12

/* A thread's last walk, frame by frame, for the next walk to take its outer frames from:
 * consecutive allocations mostly share their callers (GCC's cc1: 17 of 20 frames on average),
 * whose rules the walk would otherwise look up again, each lookup waiting for the stack read
 * before it. A walk is a function of the state it starts from (pc, rsp, and rbp where a rule
 * reads it) and of the words it reads; so when the new walk reaches a state of the last walk
 * (same pc, rsp and, where it matters, rbp) and every word the last walk read from there on
 * still holds what it read, the rest of the walk is the last walk's: those reads are checked
 * (independent loads, no rule lookups) and its frames copied. Walks through a signal frame are
 * not kept. */
#define WALK_MAX 256 /* memscope run's default depth (src/cli/run.h): deeper walks keep nothing */
enum {
    WF_USES_BP = 1,    /* the frame's step computes the CFA from rbp (or the walk stopped there
                          at max, and a later walk may go on from it) */
    WF_LOADS_BP = 2,   /* the step reads the caller's rbp, at bp_at */
    WF_BP_MATTERS = 4, /* the frame's rbp decides the rest of the walk */
};
enum { END_STOP, END_READ, END_MAX }; /* the state alone, the word at end_at, max frames */
struct walk {
    unsigned n, end;
    int unknown;               /* ended at a pc in no known module */
    uintptr_t end_at, end_val; /* END_READ: the word at end_at was end_val */
    struct walk_frame {
        uintptr_t pc, sp, bp; /* the walk's state at pcs[i] */
        uintptr_t bp_at;
        unsigned flags;
    } f[WALK_MAX];
};

struct unwind_memo {
    struct local_rule {
        uintptr_t pc;
        uint64_t rule;
    } local[1u << LOCAL_BITS];
    struct unwind_ids ids; /* stacks.c's per-thread stack ids */
    unsigned gen;          /* rules_gen its rules were taken under */
    int unknown;           /* the last walk ended at a pc in no known module */
    uintptr_t checked;     /* the last such pc a module scan was made for */
    struct walk walks[2];  /* the last walk and the one being made, alternately */
    unsigned last;         /* walks[last] is the last */
};

/* t->memo of a thread whose exit hook released it: allocations made by later destructors of
 * that thread walk without a memo instead of mapping one that nothing would release. */
#define MEMO_GONE ((struct unwind_memo *)1)

int unwind_should_rescan(struct unwind_memo *m, uintptr_t last_pc)
{
    if (!m || !m->unknown || m->checked == last_pc)
        return 0;
    m->checked = last_pc; /* once per such pc: code outside every module (JIT) stays so */
    return 1;
}

struct unwind_memo *unwind_memo(struct tstate *t)
{
    if (t->memo == MEMO_GONE)
        return NULL;
    if (!t->memo) {
        void *m = sys_mmap(NULL, sizeof(struct unwind_memo), PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            return NULL;
        t->memo = m;
    }
    return t->memo;
}

struct unwind_ids *unwind_ids(struct tstate *t)
{
    struct unwind_memo *m = unwind_memo(t);
    return m ? &m->ids : NULL;
}

void unwind_memo_free(struct tstate *t)
{
    struct unwind_memo *m = t->memo;
    t->memo = MEMO_GONE;
    if (m && m != MEMO_GONE)
        sys_munmap(m, sizeof *m);
}

int unwind_init(void)
{
    void *m = sys_mmap(NULL, (size_t)CACHE_SIZE * sizeof *cache, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return -1;
    cache = m;
    return 0;
}

/* Drops every cached rule (modules changed). A reader racing with it may miss once. */
void unwind_forget(void)
{
    __atomic_add_fetch(&rules_gen, 1, __ATOMIC_RELEASE);
    if (cache && __atomic_exchange_n(&cache_used, 0, __ATOMIC_ACQ_REL))
        memset(cache, 0, (size_t)CACHE_SIZE * sizeof *cache);
}

void unwind_remove_module(uintptr_t lo, uintptr_t hi)
{
    unsigned n = __atomic_load_n(&ncmods, __ATOMIC_ACQUIRE), j = 0;
    __atomic_add_fetch(&cmods_seq, 1, __ATOMIC_ACQ_REL); /* odd: readers wait or retry */
    for (unsigned i = 0; i < n; i++)
        if (!(cmods[i].lo == lo && cmods[i].hi == hi))
            cmods[j++] = cmods[i];
    __atomic_store_n(&ncmods, j, __ATOMIC_RELEASE);
    __atomic_add_fetch(&cmods_seq, 1, __ATOMIC_ACQ_REL);
    if (j != n)
        unwind_forget(); /* rules of its addresses are another library's from now on */
}

void unwind_add_module(const struct dl_phdr_info *info, uintptr_t lo, uintptr_t hi)
{
    unsigned n = __atomic_load_n(&ncmods, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < n; i++) /* described again after fork: once is enough */
        if (cmods[i].lo == lo && cmods[i].hi == hi)
            return;
    if (n >= MAX_CFI_MODULES)
        return;
    uintptr_t xlo = UINTPTR_MAX, xhi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
            continue;
        uintptr_t a = info->dlpi_addr + ph->p_vaddr;
        xlo = a < xlo ? a : xlo;
        xhi = a + ph->p_memsz > xhi ? a + ph->p_memsz : xhi;
    }
    if (xhi <= xlo)
        return; /* no code */
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_GNU_EH_FRAME)
            continue;
        const uint8_t *h = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
        /* version 1; the table's encoding as every toolchain writes it: datarel sdata4 pairs,
         * the count as udata4 */
        if (ph->p_memsz < 12 || h[0] != 1 || h[2] != 0x03 || h[3] != 0x3b)
            return;
        uint32_t count;
        memcpy(&count, h + 8, 4);
        if (count == 0 || (uint64_t)count * 8 + 12 > ph->p_memsz)
            return;
        __atomic_add_fetch(&cmods_seq, 1, __ATOMIC_ACQ_REL);
        cmods[n].lo = lo;
        cmods[n].hi = hi;
        cmods[n].xlo = xlo;
        cmods[n].xhi = xhi;
        cmods[n].hdr = (uintptr_t)h;
        cmods[n].table = h + 12;
        cmods[n].count = count;
        __atomic_store_n(&ncmods, n + 1, __ATOMIC_RELEASE);
        __atomic_add_fetch(&cmods_seq, 1, __ATOMIC_ACQ_REL);
        unwind_forget(); /* addresses remembered as in no module may be in this one */
        return;
    }
}

/* ---- reading .eh_frame --------------------------------------------------------------------- */

static uint64_t uleb(const uint8_t **p, const uint8_t *end)
{
    uint64_t v = 0;
    unsigned shift = 0;
    while (*p < end) {
        uint8_t b = *(*p)++;
        if (shift < 64)
            v |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
        if (!(b & 0x80))
            break;
    }
    return v;
}

static int64_t sleb(const uint8_t **p, const uint8_t *end)
{
    int64_t v = 0;
    unsigned shift = 0;
    uint8_t b = 0;
    while (*p < end) {
        b = *(*p)++;
        if (shift < 64)
            v |= (int64_t)((uint64_t)(b & 0x7f) << shift);
        shift += 7;
        if (!(b & 0x80))
            break;
    }
    if (shift < 64 && (b & 0x40))
        v |= -(int64_t)((uint64_t)1 << shift);
    return v;
}

/* A pointer of encoding enc at *p (DW_EH_PE_*: pcrel and absolute, 2/4/8-byte and LEB128
 * values). 0 when the encoding is not one of those. */
static int read_ptr(const uint8_t **p, const uint8_t *end, uint8_t enc, uintptr_t *out)
{
    const uint8_t *at = *p;
    uint64_t v;
    if (enc == 0xff) { /* omit */
        *out = 0;
        return 1;
    }
    switch (enc & 0x0f) {
    case 0x00:
        if (end - at < 8)
            return 0;
        memcpy(&v, at, 8);
        *p += 8;
        break;
    case 0x01: v = uleb(p, end); break;
    case 0x02: {
        uint16_t x;
        if (end - at < 2)
            return 0;
        memcpy(&x, at, 2);
        v = x;
        *p += 2;
        break;
    }
    case 0x03: {
        uint32_t x;
        if (end - at < 4)
            return 0;
        memcpy(&x, at, 4);
        v = x;
        *p += 4;
        break;
    }
    case 0x04:
        if (end - at < 8)
            return 0;
        memcpy(&v, at, 8);
        *p += 8;
        break;
    case 0x09: v = (uint64_t)sleb(p, end); break;
    case 0x0a: {
        int16_t x;
        if (end - at < 2)
            return 0;
        memcpy(&x, at, 2);
        v = (uint64_t)(int64_t)x;
        *p += 2;
        break;
    }
    case 0x0b: {
        int32_t x;
        if (end - at < 4)
            return 0;
        memcpy(&x, at, 4);
        v = (uint64_t)(int64_t)x;
        *p += 4;
        break;
    }
    case 0x0c:
        if (end - at < 8)
            return 0;
        memcpy(&v, at, 8);
        *p += 8;
        break;
    default: return 0;
    }
    switch (enc & 0x70) {
    case 0x00: break;
    case 0x10: v += (uintptr_t)at; break; /* pcrel */
    default: return 0;
    }
    *out = (uintptr_t)v;
    return 1;
}

struct cie {
    uint64_t code_align;
    int64_t data_align;
    uint64_t ra_reg;
    uint8_t fde_enc;
    int signal_frame, has_aug_len;
    const uint8_t *insns, *end;
};

/* One entry's length and body: [*body, *end), which must lie in the module's mapped range
 * [lo, hi) (a damaged table never sends a read elsewhere). 0 when malformed or 64-bit (not
 * produced by toolchains). */
static int entry_at(const uint8_t *p, uintptr_t lo, uintptr_t hi, const uint8_t **body,
                    const uint8_t **end)
{
    uint32_t len;
    if ((uintptr_t)p < lo || (uintptr_t)p > hi - 4)
        return 0;
    memcpy(&len, p, 4);
    if (len == 0 || len >= 0xfffffff0u || len > hi - (uintptr_t)p - 4)
        return 0;
    *body = p + 4;
    *end = p + 4 + len;
    return 1;
}

static int parse_cie(const uint8_t *p, uintptr_t lo, uintptr_t hi, struct cie *c)
{
    const uint8_t *q, *end;
    if (!entry_at(p, lo, hi, &q, &end) || end - q < 5)
        return 0;
    uint32_t id;
    memcpy(&id, q, 4);
    if (id != 0)
        return 0;
    q += 4;
    uint8_t version = *q++;
    if (version != 1 && version != 3)
        return 0;
    const char *aug = (const char *)q;
    size_t alen = strnlen(aug, (size_t)(end - q));
    q += alen + 1;
    if (q > end || (alen && aug[0] != 'z') || memchr(aug, 'h', alen)) /* "eh": not in .eh_frame */
        return 0;
    memset(c, 0, sizeof *c);
    c->code_align = uleb(&q, end);
    c->data_align = sleb(&q, end);
    c->ra_reg = version == 1 ? (q < end ? *q++ : 0) : uleb(&q, end);
    c->fde_enc = 0; /* absptr */
    if (alen) {
        c->has_aug_len = 1;
        uint64_t n = uleb(&q, end);
        const uint8_t *aend = q + n;
        if (aend > end)
            return 0;
        for (size_t i = 1; i < alen; i++) {
            switch (aug[i]) {
            case 'R':
                if (q >= aend)
                    return 0;
                c->fde_enc = *q++;
                break;
            case 'L':
                if (q >= aend)
                    return 0;
                q++;
                break;
            case 'P': {
                if (q >= aend)
                    return 0;
                uint8_t enc = *q++;
                uintptr_t dummy;
                if (!read_ptr(&q, aend, enc & 0x7f, &dummy))
                    return 0;
                break;
            }
            case 'S': c->signal_frame = 1; break;
            case 'B': break;
            default: return 0; /* unknown: its data cannot be skipped safely */
            }
        }
        q = aend;
    }
    c->insns = q;
    c->end = end;
    return 1;
}

/* The rule state while the call-frame program runs. */
struct state {
    int cfa_reg; /* DWARF register, -1: an expression */
    int64_t cfa_off;
    int rbp_how; /* 0 same value, 1 saved at CFA+rbp_off, 2 anything else */
    int64_t rbp_off;
    int ra_how; /* 1 at CFA+ra_off, 2 anything else (undefined, a register, an expression) */
    int64_t ra_off;
};

static void set_reg(struct state *s, uint64_t reg, int how, int64_t off)
{
    if (reg == REG_RBP) {
        s->rbp_how = how;
        s->rbp_off = off;
    } else if (reg == REG_RA) {
        s->ra_how = how;
        s->ra_off = off;
    }
}

/* Runs the program [p, end) from loc until loc passes pc. init is the state after the CIE's
 * program (DW_CFA_restore's target); 0 when the program uses what this unwinder does not read
 * correctly. */
static int run_cfa(const uint8_t *p, const uint8_t *end, const struct cie *c, uintptr_t loc,
                   uintptr_t pc, struct state *s, const struct state *init)
{
    struct state stack[MAX_REMEMBER];
    int depth = 0;
    while (p < end) {
        uint8_t op = *p++;
        uint64_t reg, delta;
        switch (op >> 6) {
        case 1: /* advance_loc */
            loc += (op & 0x3f) * c->code_align;
            if (loc > pc)
                return 1;
            continue;
        case 2: /* offset */
            set_reg(s, op & 0x3f, 1, (int64_t)uleb(&p, end) * c->data_align);
            continue;
        case 3: /* restore */
            reg = op & 0x3f;
            if (reg == REG_RBP)
                s->rbp_how = init->rbp_how, s->rbp_off = init->rbp_off;
            else if (reg == REG_RA)
                s->ra_how = init->ra_how, s->ra_off = init->ra_off;
            continue;
        }
        switch (op) {
        case 0x00: break; /* nop */
        case 0x01: {      /* set_loc */
            uintptr_t a;
            if (!read_ptr(&p, end, c->fde_enc, &a))
                return 0;
            loc = a;
            if (loc > pc)
                return 1;
            break;
        }
        case 0x02:
            if (p + 1 > end)
                return 0;
            delta = p[0];
            p += 1;
            goto advance;
        case 0x03: {
            uint16_t x;
            if (p + 2 > end)
                return 0;
            memcpy(&x, p, 2);
            p += 2;
            delta = x;
            goto advance;
        }
        case 0x04: {
            uint32_t x;
            if (p + 4 > end)
                return 0;
            memcpy(&x, p, 4);
            p += 4;
            delta = x;
            goto advance;
        }
        advance:
            loc += delta * c->code_align;
            if (loc > pc)
                return 1;
            break;
        case 0x05: /* offset_extended */
            reg = uleb(&p, end);
            set_reg(s, reg, 1, (int64_t)uleb(&p, end) * c->data_align);
            break;
        case 0x06: /* restore_extended */
            reg = uleb(&p, end);
            if (reg == REG_RBP)
                s->rbp_how = init->rbp_how, s->rbp_off = init->rbp_off;
            else if (reg == REG_RA)
                s->ra_how = init->ra_how, s->ra_off = init->ra_off;
            break;
        case 0x07: set_reg(s, uleb(&p, end), 2, 0); break; /* undefined */
        case 0x08:                                         /* same_value */
            reg = uleb(&p, end);
            if (reg == REG_RBP)
                s->rbp_how = 0;
            else
                set_reg(s, reg, 2, 0);
            break;
        case 0x09:
            reg = uleb(&p, end);
            uleb(&p, end);
            set_reg(s, reg, 2, 0);
            break; /* register */
        case 0x0a: /* remember_state */
            if (depth == MAX_REMEMBER)
                return 0;
            stack[depth++] = *s;
            break;
        case 0x0b: /* restore_state */
            if (depth == 0)
                return 0;
            *s = stack[--depth];
            break;
        case 0x0c:
            s->cfa_reg = (int)uleb(&p, end);
            s->cfa_off = (int64_t)uleb(&p, end);
            break;
        case 0x0d: s->cfa_reg = (int)uleb(&p, end); break;
        case 0x0e: s->cfa_off = (int64_t)uleb(&p, end); break;
        case 0x0f: /* def_cfa_expression */
            delta = uleb(&p, end);
            if (delta > (uint64_t)(end - p))
                return 0;
            p += delta;
            s->cfa_reg = -1;
            break;
        case 0x10:
        case 0x16: /* expression, val_expression */
            reg = uleb(&p, end);
            delta = uleb(&p, end);
            if (delta > (uint64_t)(end - p))
                return 0;
            p += delta;
            set_reg(s, reg, 2, 0);
            break;
        case 0x11:
            reg = uleb(&p, end);
            set_reg(s, reg, 1, sleb(&p, end) * c->data_align);
            break;
        case 0x12: /* def_cfa_sf */
            s->cfa_reg = (int)uleb(&p, end);
            s->cfa_off = sleb(&p, end) * c->data_align;
            break;
        case 0x13: s->cfa_off = sleb(&p, end) * c->data_align; break;
        case 0x14: /* val_offset */
            reg = uleb(&p, end);
            uleb(&p, end);
            set_reg(s, reg, 2, 0);
            break;
        case 0x15:
            reg = uleb(&p, end);
            sleb(&p, end);
            set_reg(s, reg, 2, 0);
            break;
        case 0x2e: uleb(&p, end); break; /* GNU_args_size */
        case 0x2f:                       /* GNU_negative_offset_extended */
            reg = uleb(&p, end);
            set_reg(s, reg, 1, -(int64_t)uleb(&p, end) * c->data_align);
            break;
        default: return 0;
        }
    }
    return 1;
}

/* Copies the module holding pc into *out; 0 when there is none. A bounded number of tries
 * while cmods changes: the change may be this very thread's, interrupted by a signal handler
 * that allocates (the walk then ends at that frame). */
static int module_of(uintptr_t pc, struct cfi_module *out)
{
    for (int tries = 0; tries < 1000; tries++) {
        unsigned seq = __atomic_load_n(&cmods_seq, __ATOMIC_ACQUIRE);
        if (seq & 1) {
            __builtin_ia32_pause();
            continue;
        }
        unsigned n = __atomic_load_n(&ncmods, __ATOMIC_ACQUIRE);
        int found = 0;
        for (unsigned i = 0; i < n && !found; i++)
            if (pc >= cmods[i].xlo && pc < cmods[i].xhi) {
                *out = cmods[i];
                found = 1;
            }
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&cmods_seq, __ATOMIC_RELAXED) == seq)
            return found;
    }
    return 0;
}

/* The rule of the frame whose code is at pc (a return address minus one). 0: pc is in no
 * module known (not a frame at all). */
static int find_rule(uintptr_t pc, struct rule *r)
{
    struct cfi_module mod = {0};
    if (!module_of(pc, &mod))
        return 0;
    const struct cfi_module *m = &mod;
    r->cfa = CFA_STOP;
    r->cfa_off = 0;
    r->rbp_saved = 0;
    r->rbp_off = 0;
    /* the last table entry whose initial pc <= pc */
    int64_t rel = (int64_t)(pc - m->hdr);
    uint32_t lo = 0, hi = m->count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        int32_t v;
        memcpy(&v, m->table + (size_t)mid * 8, 4);
        if ((int64_t)v <= rel)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return 1;
    int32_t fde_rel;
    memcpy(&fde_rel, m->table + (size_t)(lo - 1) * 8 + 4, 4);
    const uint8_t *fde = (const uint8_t *)(m->hdr + (intptr_t)fde_rel), *q, *end;
    if (!entry_at(fde, m->lo, m->hi, &q, &end) || end - q < 8)
        return 1;
    uint32_t cie_off;
    memcpy(&cie_off, q, 4);
    struct cie c;
    if (cie_off == 0 || cie_off > (uintptr_t)q - m->lo ||
        !parse_cie(q - cie_off, m->lo, m->hi, &c) || c.ra_reg != REG_RA)
        return 1;
    if (c.signal_frame) {
        r->cfa = CFA_SIGNAL;
        return 1;
    }
    q += 4;
    uintptr_t begin, range;
    if (!read_ptr(&q, end, c.fde_enc, &begin) || !read_ptr(&q, end, c.fde_enc & 0x0f, &range))
        return 1;
    if (pc < begin || pc - begin >= range)
        return 1; /* a gap between functions */
    if (c.has_aug_len) {
        uint64_t n = uleb(&q, end);
        if (n > (uint64_t)(end - q))
            return 1;
        q += n;
    }
    struct state s = {.cfa_reg = REG_RSP, .cfa_off = 8, .ra_how = 2};
    if (!run_cfa(c.insns, c.end, &c, begin, pc, &s, &s))
        return 1;
    struct state init = s;
    if (!run_cfa(q, end, &c, begin, pc, &s, &init))
        return 1;
    if ((s.cfa_reg != REG_RSP && s.cfa_reg != REG_RBP) || s.ra_how != 1 || s.ra_off != -8 ||
        s.rbp_how == 2 || s.cfa_off < INT32_MIN || s.cfa_off > INT32_MAX ||
        (s.rbp_how == 1 && (s.rbp_off < INT16_MIN || s.rbp_off > INT16_MAX)))
        return 1;
    r->cfa = s.cfa_reg == REG_RSP ? CFA_RSP : CFA_RBP;
    r->cfa_off = (int32_t)s.cfa_off;
    r->rbp_saved = s.rbp_how == 1;
    r->rbp_off = (int16_t)s.rbp_off;
    return 1;
}

/* A rule packed into 28 bits, as the caches and the walk keep it: cfa kind (3 bits: 0 "not a
 * frame", CFA_*), cfa_off / 8 (16 bits, unsigned), rbp saved (1), -rbp_off / 8 (8). A rule that
 * does not fit (a CFA offset that is negative, not a multiple of 8 or past 512 KiB; an rbp slot
 * not below the CFA within 2 KiB) becomes CFA_STOP: the walk ends there. */
#define R_KIND(v) ((unsigned)((v)&7))
#define R_CFA_OFF(v) ((intptr_t)(((v) >> 3) & 0xffff) * 8)
#define R_RBP_SAVED(v) (((v) >> 19) & 1)
#define R_RBP_OFF(v) (-(intptr_t)(((v) >> 20) & 0xff) * 8)

static inline uint64_t pack(const struct rule *r)
{
    if (r->cfa == CFA_RSP || r->cfa == CFA_RBP) {
        if (r->cfa_off < 0 || (r->cfa_off & 7) || r->cfa_off >= (8 << 16) ||
            (r->rbp_saved && (r->rbp_off > 0 || (-r->rbp_off & 7) || -r->rbp_off >= (8 << 8))))
            return CFA_STOP;
        return (uint64_t)r->cfa | (uint64_t)(r->cfa_off / 8) << 3 | (uint64_t)r->rbp_saved << 19 |
               (uint64_t)(r->rbp_saved ? -r->rbp_off / 8 : 0) << 20;
    }
    return r->cfa;
}

/* The packed rule of pc from the shared cache (find_rule() on a miss); kind 0 when pc is in no
 * known module. */
static inline uint64_t rule_of(uintptr_t pc)
{
    uint64_t h = pc * 0x9e3779b97f4a7c15ull;
    uint64_t *e = &cache[h >> (64 - CACHE_BITS)];
    uint64_t tag = (h >> (64 - CACHE_BITS - TAG_BITS)) & ((1ull << TAG_BITS) - 1);
    uint64_t v = __atomic_load_n(e, __ATOMIC_RELAXED);
    if (v && v >> 28 == tag)
        return v & ((1u << 28) - 1);
    struct rule r;
    if (!find_rule(pc, &r))
        r.cfa = 0; /* remembered too: "not a frame" */
    uint64_t packed = pack(&r);
    if (!__atomic_load_n(&cache_used, __ATOMIC_RELAXED))
        __atomic_store_n(&cache_used, 1, __ATOMIC_RELAXED);
    __atomic_store_n(e, tag << 28 | packed, __ATOMIC_RELAXED);
    return packed;
}

/* The walk's per-frame lookup: the thread's recent rules (local, NULL in a signal handler's
 * walk), else the shared cache's. */
static inline uint64_t frame_rule(struct local_rule *local, uintptr_t pc)
{
    if (!local)
        return rule_of(pc);
    struct local_rule *e = &local[(pc * 0x9e3779b97f4a7c15ull) >> (64 - LOCAL_BITS)];
    if (e->pc == pc)
        return e->rule;
    uint64_t v = rule_of(pc);
    e->pc = pc;
    e->rule = v;
    return v;
}

int unwind_is_code(struct unwind_memo *memo, uintptr_t ra)
{
    if (!cache || ra < 4096)
        return 0;
    unsigned gen = __atomic_load_n(&rules_gen, __ATOMIC_ACQUIRE);
    if (memo && memo->gen != gen) { /* as in unwind_cfi(): modules changed */
        memo->gen = gen;
        memset(memo->local, 0, sizeof memo->local);
        memo->walks[0].n = memo->walks[1].n = 0;
    }
    int in = R_KIND(frame_rule(memo ? memo->local : NULL, ra - 1)) != 0;
    if (memo)
        memo->unknown = !in;
    return in;
}

/* The packed rule of a frame pointer's frame (push rbp; mov rbp, rsp): CFA = rbp + 16, the
 * caller's rbp saved at CFA - 16. Most frames of code built with frame pointers: the walk's
 * fast case. */
#define RULE_FP ((uint64_t)CFA_RBP | (16 / 8) << 3 | 1u << 19 | (16 / 8) << 20)

/* The registers of the interrupted code in the kernel's signal frame (x86-64 rt_sigframe: the
 * handler returns into the trampoline with rsp at its ucontext; uc_mcontext.gregs start at
 * byte 40, rbp is gregs[10], rsp gregs[15], rip gregs[16]). */
#define UC_GREGS 40
#define GREG_RBP 10
#define GREG_RSP 15
#define GREG_RIP 16

/* Whether the words last read from frame j on still hold what they held (their addresses lie
 * above the current rsp, which equals frame j's, and below the stack's top: readable). */
static int walk_holds(const struct walk *w, unsigned j)
{
    unsigned ok = 1;
    for (unsigned i = j; i + 1 < w->n; i++) {
        const struct walk_frame *a = &w->f[i], *b = a + 1;
        ok &= ((const uintptr_t *)b->sp)[-1] == b->pc;
        if ((a->flags & WF_LOADS_BP) && (b->flags & WF_BP_MATTERS))
            ok &= *(const uintptr_t *)a->bp_at == b->bp;
    }
    if (w->end == END_READ)
        ok &= *(const uintptr_t *)w->end_at == w->end_val;
    return ok;
}

/* Marks the frames whose rbp decides the rest of the walk: a frame's step reads it, or keeps it
 * for a later step that does. */
static void walk_mark(struct walk *w)
{
    unsigned matters = 0;
    for (unsigned i = w->n; i-- > 0;) {
        unsigned fl = w->f[i].flags & ~WF_BP_MATTERS;
        matters = (fl & WF_USES_BP) || (!(fl & WF_LOADS_BP) && matters);
        w->f[i].flags = fl | (matters ? WF_BP_MATTERS : 0);
    }
}

unsigned unwind_cfi(void *fp0, uintptr_t lo, uintptr_t hi, uint64_t *pcs, unsigned max,
                    struct unwind_memo *memo, uint64_t *hash)
{
    /* fp0 is the interposer's own frame (built with a frame pointer): the caller's pc, its
     * stack pointer (just above the return address) and its rbp are known. */
    uintptr_t *f = fp0;
    uintptr_t pc = f[1], rsp = (uintptr_t)fp0 + 16, rbp = f[0];
    unsigned n = 0, nh = 1, j = 0, end = END_STOP, unknown = 0; /* nh: frames in h */
    int exact = 0; /* the interrupted pc of a signal frame is not a return address */
    uintptr_t end_at = 0, end_val = 0;
    uint64_t v;
    struct local_rule *local = NULL;
    struct walk *prev = NULL, *cur = NULL;
    if (memo) {
        unsigned gen = __atomic_load_n(&rules_gen, __ATOMIC_ACQUIRE);
        if (memo->gen != gen) { /* modules changed: what it remembers may be a closed library's */
            memo->gen = gen;
            memset(memo->local, 0, sizeof memo->local);
            memo->walks[0].n = memo->walks[1].n = 0;
        }
        local = memo->local;
        if (max <= WALK_MAX) {
            prev = &memo->walks[memo->last];
            cur = &memo->walks[memo->last ^ 1];
            cur->n = 0;
            memo->last ^= 1;
        }
    }
    pcs[n++] = pc;
    /* hash_stack(), computed on the way: a frame enters it once its rule says it is one */
    uint64_t h = hash_step(HASH_SEED, pc);
    if (!cache || rsp < lo || rsp >= hi) {
        cur = NULL;
        goto out;
    }
    for (;;) { /* the state of pcs[n - 1]: pc, rsp, rbp */
        if (prev && !exact) {
            while (j < prev->n && prev->f[j].sp < rsp)
                j++;
            const struct walk_frame *p = &prev->f[j];
            if (j < prev->n && p->sp == rsp && p->pc == pc &&
                (!(p->flags & WF_BP_MATTERS) || p->bp == rbp) && walk_holds(prev, j)) {
                unsigned take = prev->n - 1 - j;
                if (take > max - n)
                    take = max - n;
                if (cur)
                    memcpy(&cur->f[n - 1], p, (take + 1) * sizeof *p);
                for (unsigned i = 1; i <= take; i++)
                    pcs[n++] = p[i].pc;
                for (; nh < n; nh++) /* frames of the last walk: their rules said so */
                    h = hash_step(h, pcs[nh]);
                if (j + 1 + take < prev->n || (prev->end == END_MAX && n == max)) {
                    end = END_MAX;
                    if (cur)
                        cur->f[n - 1].flags |= WF_USES_BP;
                } else if (prev->end == END_MAX) { /* the last walk stopped at max: go on */
                    pc = p[take].pc;
                    rsp = p[take].sp;
                    rbp = p[take].bp;
                    prev = NULL;
                    continue;
                } else {
                    end = prev->end;
                    end_at = prev->end_at;
                    end_val = prev->end_val;
                    unknown = (unsigned)prev->unknown;
                }
                break;
            }
        }
        /* a return address: its call instruction, one byte before, is in the caller's frame */
        if (!R_KIND(v = frame_rule(local, exact ? pc : pc - 1))) {
            unknown = 1;  /* code of a library loaded since the last module scan? */
            if (n == 1) { /* the caller itself */
                cur = NULL;
                break;
            }
            n--; /* never a made-up frame: the walk ends below it */
            end = END_READ;
            end_at = rsp - 8;
            end_val = pc;
            if (exact)
                cur = NULL;
            break;
        }
        if (nh < n) /* the frame is one */
            h = hash_step(h, pcs[nh++]);
        struct walk_frame *w = cur ? &cur->f[n - 1] : NULL;
        if (w) {
            w->pc = pc;
            w->sp = rsp;
            w->bp = rbp;
            w->flags = 0;
        }
        if (n >= max) {
            end = END_MAX;
            if (w)
                w->flags = WF_USES_BP;
            break;
        }
        uintptr_t ra;
        exact = 0;
        if (v == RULE_FP) { /* the frame's two words at rbp: the caller's rbp, the return address */
            uintptr_t cfa = rbp + 16;
            if (w)
                w->flags = WF_USES_BP | WF_LOADS_BP, w->bp_at = cfa - 16;
            if (cfa < rsp + 16 || cfa > hi || (cfa & 7))
                break;
            ra = ((uintptr_t *)cfa)[-1];
            rbp = ((uintptr_t *)cfa)[-2];
            rsp = cfa;
        } else {
            unsigned kind = R_KIND(v);
            if (kind == CFA_RSP || kind == CFA_RBP) {
                uintptr_t cfa = (kind == CFA_RSP ? rsp : rbp) + R_CFA_OFF(v);
                if (w && kind == CFA_RBP)
                    w->flags = WF_USES_BP;
                /* the frame lies above the last one (the walk ends) and inside the stack */
                if (cfa <= rsp || cfa > hi || (cfa & 7))
                    break;
                ra = ((uintptr_t *)cfa)[-1];
                if (R_RBP_SAVED(v)) {
                    uintptr_t at = cfa + R_RBP_OFF(v);
                    if (at < rsp || at + 8 > hi)
                        break;
                    rbp = *(uintptr_t *)at;
                    if (w)
                        w->flags |= WF_LOADS_BP, w->bp_at = at;
                }
                rsp = cfa;
            } else if (kind == CFA_SIGNAL) {
                uintptr_t uc = rsp;
                cur = NULL; /* not kept: its reads are the kernel's frame's */
                w = NULL;
                if (uc < lo || uc + UC_GREGS + 8 * (GREG_RIP + 1) > hi || (uc & 7))
                    break;
                const uintptr_t *g = (const uintptr_t *)(uc + UC_GREGS);
                ra = g[GREG_RIP];
                uintptr_t sp2 = g[GREG_RSP];
                if (sp2 <= rsp || sp2 >= hi)
                    break;
                rbp = g[GREG_RBP];
                rsp = sp2;
                exact = 1;
            } else {
                break;
            }
        }
        /* a return address into code of a known module, or the end: never a made-up frame */
        if (ra < 4096) {
            end = END_READ;
            end_at = rsp - 8;
            end_val = ra;
            break;
        }
        pc = ra;
        pcs[n++] = pc;
    }
    if (cur) {
        cur->n = n;
        cur->end = end;
        cur->unknown = (int)unknown;
        cur->end_at = end_at;
        cur->end_val = end_val;
        walk_mark(cur);
    }
out:
    if (memo)
        memo->unknown = (int)unknown;
    *hash = hash_end(h, n);
    return n;
}

/* unwind.c: the agent's DWARF unwinder: full native stacks through code built without frame
 * pointers (most distributions' libraries, any -O2 program), read from each module's
 * .eh_frame, without locks, allocation or system calls on the hook's path.
 *
 * For a return address the unwinder needs the rule of its frame: where the canonical frame
 * address (CFA) is (rsp or rbp plus an offset), where the caller's rbp was saved, and that the
 * return address is at CFA-8. The rule comes from the module's .eh_frame: its .eh_frame_hdr
 * binary-search table finds the FDE, whose call-frame program (after its CIE's) is run up to the
 * address (cfi.c reads them; this file keeps the modules, the caches and the walk). That
 * costs a few hundred ns; rules are therefore kept in a direct-mapped cache of 2^16 one-word
 * entries keyed by address (512 KiB, mapped once, mostly in the CPU's L2), so that a walk costs
 * one cache probe and one or two stack reads per frame. An entry (tag and rule) is one atomic
 * word: threads and signal handlers never see half of one.
 *
 * A walk stops, never inventing a frame, at an address outside every module it knows, at a
 * frame whose rule it does not handle (CFA expressions: PLT stubs and signal trampolines; the
 * outermost frames, whose return address is undefined), or when a read would leave the thread's
 * stack. Modules are registered when the agent describes them (stacks.c: at start and when a
 * stack reaches a new one after dlopen). */
#include "agent.h"
#include "cfi.h"

#include <link.h>
#include <string.h>
#include <sys/mman.h>

#define MAX_CFI_MODULES 8192
#define CACHE_BITS 16
#define CACHE_SIZE (1u << CACHE_BITS)

static struct cfi_module cmods[MAX_CFI_MODULES];
static unsigned ncmods; /* published with release: entries below it are complete */
/* A sequence count around changes of cmods (odd while one is made; writers hold stacks.c's
 * module lock): a reader copies the entry it needs and tries again when the count moved, so a
 * library closed meanwhile (its entry removed, the array compacted) is never read half. */
static unsigned cmods_seq;
/* Bumped whenever the modules change: the threads' own rule caches (memo, local) start over. */
static unsigned rules_gen = 1;

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
    cfi_rule(&mod, pc, r);
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

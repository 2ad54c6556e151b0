/* cfi.c: the DWARF call-frame information reader of the unwinder (cfi.h): for an address, the
 * FDE found by binary search in .eh_frame_hdr's table, its CIE parsed, and both call-frame
 * programs run up to the address, giving the frame's rule (where the CFA is, where the caller's
 * rbp was saved, the return address at CFA-8). The walk and its caches are unwind.c's. Reads
 * never leave the module's mapped range, whatever the tables say. */
#include "cfi.h"

#include <string.h>

#define MAX_REMEMBER 8

enum { REG_RBP = 6, REG_RSP = 7, REG_RA = 16 };

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

/* The rule of the frame whose code is at pc (a return address minus one) in module m. */
void cfi_rule(const struct cfi_module *m, uintptr_t pc, struct rule *r)
{
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
        return;
    int32_t fde_rel;
    memcpy(&fde_rel, m->table + (size_t)(lo - 1) * 8 + 4, 4);
    const uint8_t *fde = (const uint8_t *)(m->hdr + (intptr_t)fde_rel), *q, *end;
    if (!entry_at(fde, m->lo, m->hi, &q, &end) || end - q < 8)
        return;
    uint32_t cie_off;
    memcpy(&cie_off, q, 4);
    struct cie c;
    if (cie_off == 0 || cie_off > (uintptr_t)q - m->lo ||
        !parse_cie(q - cie_off, m->lo, m->hi, &c) || c.ra_reg != REG_RA)
        return;
    if (c.signal_frame) {
        r->cfa = CFA_SIGNAL;
        return;
    }
    q += 4;
    uintptr_t begin, range;
    if (!read_ptr(&q, end, c.fde_enc, &begin) || !read_ptr(&q, end, c.fde_enc & 0x0f, &range))
        return;
    if (pc < begin || pc - begin >= range)
        return; /* a gap between functions */
    if (c.has_aug_len) {
        uint64_t n = uleb(&q, end);
        if (n > (uint64_t)(end - q))
            return;
        q += n;
    }
    struct state s = {.cfa_reg = REG_RSP, .cfa_off = 8, .ra_how = 2};
    if (!run_cfa(c.insns, c.end, &c, begin, pc, &s, &s))
        return;
    struct state init = s;
    if (!run_cfa(q, end, &c, begin, pc, &s, &init))
        return;
    if ((s.cfa_reg != REG_RSP && s.cfa_reg != REG_RBP) || s.ra_how != 1 || s.ra_off != -8 ||
        s.rbp_how == 2 || s.cfa_off < INT32_MIN || s.cfa_off > INT32_MAX ||
        (s.rbp_how == 1 && (s.rbp_off < INT16_MIN || s.rbp_off > INT16_MAX)))
        return;
    r->cfa = s.cfa_reg == REG_RSP ? CFA_RSP : CFA_RBP;
    r->cfa_off = (int32_t)s.cfa_off;
    r->rbp_saved = s.rbp_how == 1;
    r->rbp_off = (int16_t)s.rbp_off;
}

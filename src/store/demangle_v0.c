/* demangle_v0.c: Rust's v0 mangling made readable for demangle.c (RFC 2603,
 * https://doc.rust-lang.org/rustc/symbol-mangling/v0.html): "_R" + a path grammar with
 * back-references to earlier positions, generic arguments, types and constants, printed as
 * rustc-demangle's alternate form ("{:#}") prints it. The parser mirrors rustc-demangle's
 * (v0.rs): recursive descent that prints as it parses, skipping what it does not print. Input
 * is hostile: every read is bounded by the name's length, recursion by MAX_DEPTH, the work by
 * MAX_STEPS parse steps (back-references can make a short name print exponentially much);
 * back-references must point strictly backwards and are not followed while skipping. */
#include "demangle_internal.h"

#define MAX_DEPTH 500
#define MAX_STEPS 100000

struct v0 {
    const char *s; /* the symbol after "_R" (back-references count from here) */
    size_t len, pos;
    struct out *o; /* NULL while skipping */
    uint64_t bound_lifetimes;
    unsigned depth;
    unsigned long steps;
};

#define TRY(x)         \
    do {               \
        if ((x) < 0)   \
            return -1; \
    } while (0)

static int peek(const struct v0 *p)
{
    return p->pos < p->len ? (unsigned char)p->s[p->pos] : -1;
}

static int eat(struct v0 *p, int c)
{
    if (peek(p) != c)
        return 0;
    p->pos++;
    return 1;
}

static int next(struct v0 *p)
{
    return p->pos < p->len ? (unsigned char)p->s[p->pos++] : -1;
}

/* Each recursive step: bounded depth and total work. */
static int enter(struct v0 *p)
{
    if (++p->depth > MAX_DEPTH || ++p->steps > MAX_STEPS || (p->o && p->o->full))
        return -1;
    return 0;
}

/* base-62-number: "_" is 0, digits then "_" are their value + 1. */
static int base62(struct v0 *p, uint64_t *v)
{
    if (eat(p, '_')) {
        *v = 0;
        return 0;
    }
    uint64_t x = 0;
    for (;;) {
        int c = next(p), d;
        if (c == '_')
            break;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'z')
            d = 10 + c - 'a';
        else if (c >= 'A' && c <= 'Z')
            d = 36 + c - 'A';
        else
            return -1;
        if (x > (UINT64_MAX - (uint64_t)d) / 62)
            return -1;
        x = x * 62 + (uint64_t)d;
    }
    if (x == UINT64_MAX)
        return -1;
    *v = x + 1;
    return 0;
}

/* [tag base-62-number]: 0 when the tag is absent, else the number + 1. */
static int opt62(struct v0 *p, int tag, uint64_t *v)
{
    *v = 0;
    if (!eat(p, tag))
        return 0;
    TRY(base62(p, v));
    if (*v == UINT64_MAX)
        return -1;
    (*v)++;
    return 0;
}

struct ident {
    const char *ascii, *puny;
    size_t alen, plen;
};

/* [u] decimal-number [_] bytes */
static int ident(struct v0 *p, struct ident *id)
{
    int puny = eat(p, 'u');
    int c = peek(p);
    if (c < '0' || c > '9')
        return -1;
    size_t n = 0;
    if (c == '0')
        p->pos++;
    else
        while ((c = peek(p)) >= '0' && c <= '9') {
            n = n * 10 + (size_t)(c - '0');
            if (n > p->len)
                return -1;
            p->pos++;
        }
    eat(p, '_');
    if (n > p->len - p->pos)
        return -1;
    const char *b = p->s + p->pos;
    p->pos += n;
    memset(id, 0, sizeof *id);
    if (!puny) {
        id->ascii = b;
        id->alen = n;
        return 0;
    }
    size_t us = n;
    while (us > 0 && b[us - 1] != '_')
        us--;
    if (us) { /* ascii "_" punycode */
        id->ascii = b;
        id->alen = us - 1;
        id->puny = b + us;
        id->plen = n - us;
    } else {
        id->puny = b;
        id->plen = n;
    }
    return id->plen ? 0 : -1;
}

/* RFC 3492's decoder on the identifier's two parts, into at most 128 code points (as
 * rustc-demangle); -1 when it does not decode or does not fit. */
static int punycode(const struct ident *id, uint32_t *cp, size_t *ncp)
{
    enum { CAP = 128, BASE = 36, TMIN = 1, TMAX = 26, SKEW = 38 };
    size_t len = 0;
    for (size_t i = 0; i < id->alen; i++) {
        if (len == CAP)
            return -1;
        cp[len++] = (unsigned char)id->ascii[i];
    }
    uint32_t bias = 72, i = 0, n = 0x80, damp = 700;
    size_t k = 0;
    while (k < id->plen) {
        uint32_t delta = 0, w = 1;
        for (uint32_t kk = BASE;; kk += BASE) {
            uint32_t t = kk <= bias ? TMIN : kk - bias;
            if (t < TMIN)
                t = TMIN;
            if (t > TMAX)
                t = TMAX;
            if (k >= id->plen)
                return -1;
            int c = (unsigned char)id->puny[k++];
            uint32_t d;
            if (c >= 'a' && c <= 'z')
                d = (uint32_t)(c - 'a');
            else if (c >= '0' && c <= '9')
                d = 26 + (uint32_t)(c - '0');
            else
                return -1;
            if (w && d > (UINT32_MAX - delta) / w)
                return -1;
            delta += d * w;
            if (d < t)
                break;
            if (w > UINT32_MAX / (BASE - t))
                return -1;
            w *= BASE - t;
        }
        if (len == CAP)
            return -1;
        len++;
        if (delta > UINT32_MAX - i)
            return -1;
        i += delta;
        if (i / len > UINT32_MAX - n)
            return -1;
        n += i / (uint32_t)len;
        i %= (uint32_t)len;
        if (n > 0x10ffff || (n >= 0xd800 && n <= 0xdfff))
            return -1;
        memmove(cp + i + 1, cp + i, (len - 1 - i) * sizeof *cp);
        cp[i++] = n;
        if (k >= id->plen)
            break;
        delta /= damp;
        damp = 2;
        delta += delta / (uint32_t)len;
        uint32_t kb = 0;
        while (delta > ((BASE - TMIN) * TMAX) / 2) {
            delta /= BASE - TMIN;
            kb += BASE;
        }
        bias = kb + ((BASE - TMIN + 1) * delta) / (delta + SKEW);
    }
    *ncp = len;
    return 0;
}

static void put_ident(struct out *o, const struct ident *id)
{
    if (!o)
        return;
    if (!id->puny) {
        put_n(o, id->ascii, id->alen);
        return;
    }
    uint32_t cp[128];
    size_t n;
    if (punycode(id, cp, &n) == 0) {
        for (size_t i = 0; i < n; i++)
            put_cp(o, cp[i]);
        return;
    }
    put(o, "punycode{"); /* as rustc-demangle shows one it cannot decode */
    if (id->alen) {
        put_n(o, id->ascii, id->alen);
        put(o, "-");
    }
    put_n(o, id->puny, id->plen);
    put(o, "}");
}

static int v0_path(struct v0 *p, int in_value);
static int v0_type(struct v0 *p);
static int v0_const(struct v0 *p);

enum ref_kind { REF_PATH, REF_TYPE, REF_CONST, REF_OPEN };

static int v0_path_open(struct v0 *p, int *open);

/* "B" base-62-number, the B already read at start: what it points to, printed (skipped: not
 * followed). */
static int backref(struct v0 *p, size_t start, enum ref_kind kind, int in_value, int *open)
{
    uint64_t i;
    TRY(base62(p, &i));
    if (i >= start)
        return -1;
    if (!p->o)
        return 0;
    size_t save = p->pos;
    p->pos = (size_t)i;
    int rc = kind == REF_PATH    ? v0_path(p, in_value)
             : kind == REF_TYPE  ? v0_type(p)
             : kind == REF_CONST ? v0_const(p)
                                 : v0_path_open(p, open);
    p->pos = save;
    return rc;
}

static void put_lifetime(struct v0 *p, uint64_t lt)
{
    if (!p->o)
        return;
    put(p->o, "'");
    if (lt == 0) {
        put(p->o, "_");
        return;
    }
    if (lt > p->bound_lifetimes) {
        p->o->full = 1; /* a lifetime no binder bound: damaged */
        return;
    }
    uint64_t depth = p->bound_lifetimes - lt;
    if (depth < 26) {
        char c[2] = {(char)('a' + depth), 0};
        put(p->o, c);
    } else {
        put(p->o, "_");
        put_u64(p->o, depth);
    }
}

/* [G base-62-number]: "for<'a, 'b> " and the lifetimes bound while f runs. */
static int binder_open(struct v0 *p, uint64_t *bound)
{
    TRY(opt62(p, 'G', bound));
    if (!p->o || !*bound)
        return 0;
    if (*bound > 1000)
        return -1;
    put(p->o, "for<");
    for (uint64_t i = 0; i < *bound; i++) {
        if (i)
            put(p->o, ", ");
        p->bound_lifetimes++;
        put_lifetime(p, 1);
    }
    put(p->o, "> ");
    return 0;
}

static void binder_close(struct v0 *p, uint64_t bound)
{
    if (p->o)
        p->bound_lifetimes -= bound;
}

/* lifetime | type | "K" const */
static int generic_arg(struct v0 *p)
{
    if (eat(p, 'L')) {
        uint64_t lt;
        TRY(base62(p, &lt));
        put_lifetime(p, lt);
        return 0;
    }
    if (eat(p, 'K'))
        return v0_const(p);
    return v0_type(p);
}

/* {generic-arg} "E", separated by ", ". */
static int generic_args(struct v0 *p)
{
    for (int i = 0; !eat(p, 'E'); i++) {
        if (i)
            put(p->o, ", ");
        TRY(generic_arg(p));
    }
    return 0;
}

static int v0_path(struct v0 *p, int in_value)
{
    TRY(enter(p));
    size_t start = p->pos;
    int tag = next(p);
    uint64_t dis;
    struct ident id;
    switch (tag) {
    case 'C': /* crate root */
        TRY(opt62(p, 's', &dis));
        TRY(ident(p, &id));
        put_ident(p->o, &id);
        break;
    case 'N': { /* nested: namespace path identifier */
        int ns = next(p);
        if (!((ns >= 'a' && ns <= 'z') || (ns >= 'A' && ns <= 'Z')))
            return -1;
        TRY(v0_path(p, in_value));
        TRY(opt62(p, 's', &dis));
        TRY(ident(p, &id));
        int named = id.alen || id.plen;
        if (ns >= 'A' && ns <= 'Z') {
            put(p->o, "::{");
            put(p->o, ns == 'C' ? "closure" : ns == 'S' ? "shim" : (char[2]){(char)ns, 0});
            if (named) {
                put(p->o, ":");
                put_ident(p->o, &id);
            }
            put(p->o, "#");
            if (p->o)
                put_u64(p->o, dis);
            put(p->o, "}");
        } else if (named) {
            put(p->o, "::");
            put_ident(p->o, &id);
        }
        break;
    }
    case 'M':
    case 'X':
    case 'Y': /* <T>, <T as Trait> (impl-path skipped, as rustc-demangle), <T as Trait> */
        if (tag != 'Y') {
            TRY(opt62(p, 's', &dis));
            struct out *o = p->o;
            p->o = NULL;
            int rc = v0_path(p, 0);
            p->o = o;
            TRY(rc);
        }
        put(p->o, "<");
        TRY(v0_type(p));
        if (tag != 'M') {
            put(p->o, " as ");
            TRY(v0_path(p, 0));
        }
        put(p->o, ">");
        break;
    case 'I': /* generic arguments */
        TRY(v0_path(p, in_value));
        if (in_value)
            put(p->o, "::");
        put(p->o, "<");
        TRY(generic_args(p));
        put(p->o, ">");
        break;
    case 'B': TRY(backref(p, start, REF_PATH, in_value, NULL)); break;
    default: return -1;
    }
    p->depth--;
    return 0;
}

/* A path whose generic arguments stay open (a dyn trait's associated types follow): *open
 * says whether "<" was printed. */
static int v0_path_open(struct v0 *p, int *open)
{
    TRY(enter(p));
    size_t start = p->pos;
    *open = 0;
    if (eat(p, 'B')) {
        TRY(backref(p, start, REF_OPEN, 0, open));
    } else if (eat(p, 'I')) {
        TRY(v0_path(p, 0));
        put(p->o, "<");
        TRY(generic_args(p));
        *open = 1;
    } else {
        TRY(v0_path(p, 0));
    }
    p->depth--;
    return 0;
}

static const char *basic_type(int tag)
{
    switch (tag) {
    case 'a': return "i8";
    case 'b': return "bool";
    case 'c': return "char";
    case 'd': return "f64";
    case 'e': return "str";
    case 'f': return "f32";
    case 'h': return "u8";
    case 'i': return "isize";
    case 'j': return "usize";
    case 'l': return "i32";
    case 'm': return "u32";
    case 'n': return "i128";
    case 'o': return "u128";
    case 's': return "i16";
    case 't': return "u16";
    case 'u': return "()";
    case 'v': return "...";
    case 'x': return "i64";
    case 'y': return "u64";
    case 'z': return "!";
    case 'p': return "_";
    default: return NULL;
    }
}

/* {type} "E", separated by ", "; the count in *n. */
static int type_list(struct v0 *p, size_t *n)
{
    *n = 0;
    while (!eat(p, 'E')) {
        if (*n)
            put(p->o, ", ");
        TRY(v0_type(p));
        (*n)++;
    }
    return 0;
}

/* fn-sig: [binder] ["U"] ["K" abi] {type} "E" type */
static int fn_sig(struct v0 *p)
{
    uint64_t bound;
    TRY(binder_open(p, &bound));
    int is_unsafe = eat(p, 'U');
    struct ident abi = {0};
    int has_abi = 0, abi_c = 0;
    if (eat(p, 'K')) {
        has_abi = 1;
        if (eat(p, 'C'))
            abi_c = 1;
        else {
            TRY(ident(p, &abi));
            if (!abi.alen || abi.puny)
                return -1;
        }
    }
    if (is_unsafe)
        put(p->o, "unsafe ");
    if (has_abi) {
        put(p->o, "extern \"");
        if (abi_c)
            put(p->o, "C");
        else
            for (size_t i = 0; i < abi.alen; i++) /* the ABI's '-' is mangled as '_' */
                put_n(p->o, abi.ascii[i] == '_' ? "-" : abi.ascii + i, 1);
        put(p->o, "\" ");
    }
    put(p->o, "fn(");
    size_t n;
    TRY(type_list(p, &n));
    put(p->o, ")");
    if (!eat(p, 'u')) {
        put(p->o, " -> ");
        TRY(v0_type(p));
    }
    binder_close(p, bound);
    return 0;
}

/* dyn-bounds lifetime: "dyn A + B<Item = T> + 'a" */
static int dyn_bounds(struct v0 *p)
{
    put(p->o, "dyn ");
    uint64_t bound;
    TRY(binder_open(p, &bound));
    for (int i = 0; !eat(p, 'E'); i++) {
        if (i)
            put(p->o, " + ");
        int open;
        TRY(v0_path_open(p, &open));
        while (eat(p, 'p')) {
            put(p->o, open ? ", " : "<");
            open = 1;
            struct ident id;
            TRY(ident(p, &id));
            put_ident(p->o, &id);
            put(p->o, " = ");
            TRY(v0_type(p));
        }
        if (open)
            put(p->o, ">");
    }
    binder_close(p, bound);
    if (!eat(p, 'L'))
        return -1;
    uint64_t lt;
    TRY(base62(p, &lt));
    if (lt) {
        put(p->o, " + ");
        put_lifetime(p, lt);
    }
    return 0;
}

static int v0_type(struct v0 *p)
{
    TRY(enter(p));
    size_t start = p->pos;
    int tag = next(p);
    const char *basic = basic_type(tag);
    size_t n;
    if (basic) {
        put(p->o, basic);
    } else {
        switch (tag) {
        case 'R':
        case 'Q':
            put(p->o, "&");
            if (eat(p, 'L')) {
                uint64_t lt;
                TRY(base62(p, &lt));
                if (lt) {
                    put_lifetime(p, lt);
                    put(p->o, " ");
                }
            }
            if (tag == 'Q')
                put(p->o, "mut ");
            TRY(v0_type(p));
            break;
        case 'P':
            put(p->o, "*const ");
            TRY(v0_type(p));
            break;
        case 'O':
            put(p->o, "*mut ");
            TRY(v0_type(p));
            break;
        case 'A':
            put(p->o, "[");
            TRY(v0_type(p));
            put(p->o, "; ");
            TRY(v0_const(p));
            put(p->o, "]");
            break;
        case 'S':
            put(p->o, "[");
            TRY(v0_type(p));
            put(p->o, "]");
            break;
        case 'T':
            put(p->o, "(");
            TRY(type_list(p, &n));
            if (n == 1)
                put(p->o, ",");
            put(p->o, ")");
            break;
        case 'F': TRY(fn_sig(p)); break;
        case 'D': TRY(dyn_bounds(p)); break;
        case 'B': TRY(backref(p, start, REF_TYPE, 0, NULL)); break;
        default:
            p->pos = start;
            p->depth--; /* v0_path counts itself */
            TRY(v0_path(p, 0));
            p->depth++;
        }
    }
    p->depth--;
    return 0;
}

/* {hex-digit} "_": the digits, in *hex and *nhex. */
static int hex_nibbles(struct v0 *p, const char **hex, size_t *nhex)
{
    size_t start = p->pos;
    int c;
    while ((c = next(p)) != '_')
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return -1;
    *hex = p->s + start;
    *nhex = p->pos - 1 - start;
    return 0;
}

/* The value of hex digits, -1 when it has more than 64 bits. */
static int hex_value(const char *hex, size_t n, uint64_t *v)
{
    while (n && *hex == '0') {
        hex++;
        n--;
    }
    if (n > 16)
        return -1;
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++)
        x = x << 4 | (uint64_t)(hex[i] <= '9' ? hex[i] - '0' : hex[i] - 'a' + 10);
    *v = x;
    return 0;
}

static int const_uint(struct v0 *p)
{
    const char *hex;
    size_t n;
    uint64_t v;
    TRY(hex_nibbles(p, &hex, &n));
    if (hex_value(hex, n, &v) == 0)
        put_u64(p->o, v);
    else {
        put(p->o, "0x");
        put_n(p->o, hex, n);
    }
    return 0;
}

/* const: the integer, bool and char constants of const generics, "_" and back-references;
 * others (str, references, arrays, tuples, ADTs) fail: the name stays mangled. */
static int v0_const(struct v0 *p)
{
    TRY(enter(p));
    size_t start = p->pos;
    int tag = next(p);
    const char *hex;
    size_t n;
    uint64_t v;
    switch (tag) {
    case 'p': put(p->o, "_"); break;
    case 'h':
    case 't':
    case 'm':
    case 'y':
    case 'o':
    case 'j': TRY(const_uint(p)); break;
    case 'a':
    case 's':
    case 'l':
    case 'x':
    case 'n':
    case 'i':
        if (eat(p, 'n'))
            put(p->o, "-");
        TRY(const_uint(p));
        break;
    case 'b':
        TRY(hex_nibbles(p, &hex, &n));
        if (hex_value(hex, n, &v) < 0 || v > 1)
            return -1;
        put(p->o, v ? "true" : "false");
        break;
    case 'c':
        TRY(hex_nibbles(p, &hex, &n));
        if (hex_value(hex, n, &v) < 0 || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
            return -1;
        put(p->o, "'");
        if (v == '\'' || v == '\\') {
            put(p->o, "\\");
            put_cp(p->o, (uint32_t)v);
        } else if (v >= 0x20 && v != 0x7f && !(v >= 0x80 && v < 0xa0)) {
            put_cp(p->o, (uint32_t)v);
        } else {
            char b[16];
            snprintf(b, sizeof b, "\\u{%llx}", (unsigned long long)v);
            put(p->o, b);
        }
        put(p->o, "'");
        break;
    case 'B': TRY(backref(p, start, REF_CONST, 0, NULL)); break;
    default: return -1;
    }
    p->depth--;
    return 0;
}

/* A suffix rustc-demangle keeps after the name: "." then ASCII letters, digits, punctuation. */
int ms__demangle_symbol_like(const char *s)
{
    if (s[0] != '.')
        return 0;
    for (; *s; s++)
        if (*s <= ' ' || *s > '~')
            return 0;
    return 1;
}

char *ms__demangle_v0(const char *name)
{
    const char *inner = name + 2;
    const char *dot = strchr(inner, '.');
    size_t len = dot ? (size_t)(dot - inner) : strlen(inner);
    if (!len || (inner[0] >= '0' && inner[0] <= '9')) /* an encoding version: none known */
        return NULL;
    for (size_t i = 0; i < len; i++) {
        char c = inner[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              c == '_'))
            return NULL;
    }
    if (dot && !ms__demangle_symbol_like(dot))
        return NULL;
    struct out o = {.p = malloc(MS_DEMANGLE_MAX_OUT + 1)};
    if (!o.p)
        return NULL;
    struct v0 p = {.s = inner, .len = len, .o = &o};
    int rc = v0_path(&p, 1);
    /* the instantiating crate (a path: it starts with a capital letter), not printed */
    if (rc == 0 && p.pos < len && inner[p.pos] >= 'A' && inner[p.pos] <= 'Z') {
        p.o = NULL;
        rc = v0_path(&p, 0);
    }
    if (rc < 0 || p.pos != len || o.full) {
        free(o.p);
        return NULL;
    }
    if (dot)
        put(&o, dot);
    if (o.full) {
        free(o.p);
        return NULL;
    }
    return out_finish(&o);
}

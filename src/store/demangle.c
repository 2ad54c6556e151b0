/* demangle.c: C++ and Rust symbol names made readable (see demangle.h), for the conversion's
 * frames (convert_symbols.c), once per distinct function name.
 *
 * C++ goes to libstdc++'s __cxa_demangle. Rust has two manglings:
 * - legacy: an Itanium-like nested name, "_ZN" {length bytes} "E", whose last element is the
 *   hash "h" + 16 hex digits and whose elements escape what C++ names cannot hold ("$LT$" <,
 *   "$u7b$" {, ".." ::). __cxa_demangle would read it, but keep the hash and the escapes.
 * - v0 (RFC 2603, https://doc.rust-lang.org/rustc/symbol-mangling/v0.html), "_R" + a path
 *   grammar with back-references to earlier positions, generic arguments, types and constants.
 * Both are printed as rustc-demangle's alternate form ("{:#}") prints them: no hash, no crate
 * disambiguator, no integer type suffix. The v0 parser (demangle_v0.c) mirrors
 * rustc-demangle's (v0.rs): recursive descent that prints as it parses, skipping what it does
 * not print.
 *
 * Input is hostile (any ELF may carry any symbol): every read is bounded by the name's length;
 * recursion by MAX_DEPTH; back-references must point strictly backwards and are not followed
 * while skipping; the output is capped at MS_DEMANGLE_MAX_OUT bytes and the work at MAX_STEPS
 * parse steps (back-references can make a short name print exponentially much). Any failure
 * leaves the name as it was (NULL). tests/fuzz/fuzz_demangle.c runs it on hostile inputs. */
#include "demangle_internal.h"

/* ---- legacy ---- */

/* Whether the element is Rust's hash: "h" and 16 hex digits. */
static int rust_hash(const char *s, size_t n)
{
    if (n != 17 || s[0] != 'h')
        return 0;
    for (size_t i = 1; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

/* One element with its escapes undone, as rustc-demangle's legacy.rs prints it. */
static void legacy_element(struct out *o, const char *s, size_t n)
{
    static const char *const esc[][2] = {{"SP", "@"}, {"BP", "*"}, {"RF", "&"}, {"LT", "<"},
                                         {"GT", ">"}, {"LP", "("}, {"RP", ")"}, {"C", ","}};
    if (n >= 2 && s[0] == '_' && s[1] == '$') {
        s++;
        n--;
    }
    size_t i = 0;
    while (i < n) {
        if (s[i] == '.') {
            if (i + 1 < n && s[i + 1] == '.') {
                put(o, "::");
                i += 2;
            } else {
                put(o, ".");
                i++;
            }
            continue;
        }
        if (s[i] == '$') {
            const char *end = memchr(s + i + 1, '$', n - i - 1);
            if (!end)
                break;
            size_t el = (size_t)(end - (s + i + 1));
            const char *e = s + i + 1;
            const char *rep = NULL;
            for (size_t k = 0; k < sizeof esc / sizeof esc[0]; k++)
                if (strlen(esc[k][0]) == el && !memcmp(e, esc[k][0], el))
                    rep = esc[k][1];
            if (rep) {
                put(o, rep);
            } else if (el >= 2 && el <= 9 && e[0] == 'u') {
                uint64_t v = 0;
                size_t k = 1;
                for (; k < el && ((e[k] >= '0' && e[k] <= '9') || (e[k] >= 'a' && e[k] <= 'f'));
                     k++)
                    v = v << 4 | (uint64_t)(e[k] <= '9' ? e[k] - '0' : e[k] - 'a' + 10);
                if (k < el || v < 0x20 || (v >= 0x7f && v < 0xa0) || v > 0x10ffff ||
                    (v >= 0xd800 && v <= 0xdfff))
                    break; /* not an escape: the rest as it is */
                put_cp(o, (uint32_t)v);
            } else {
                break;
            }
            i += el + 2;
            continue;
        }
        size_t j = i;
        while (j < n && s[j] != '$' && s[j] != '.')
            j++;
        put_n(o, s + i, j - i);
        i = j;
    }
    put_n(o, s + i, n - i);
}

static char *demangle_legacy(const char *name)
{
    const char *s = !strncmp(name, "_ZN", 3)    ? name + 3
                    : !strncmp(name, "__ZN", 4) ? name + 4
                    : !strncmp(name, "ZN", 2)   ? name + 2
                                                : NULL;
    if (!s)
        return NULL;
    size_t len = strlen(s);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] >= 0x80)
            return NULL;
    /* the elements: {decimal length, bytes} "E", the last one the hash */
    size_t pos = 0, nel = 0, last = 0, last_len = 0;
    while (pos < len && s[pos] != 'E') {
        if (s[pos] < '0' || s[pos] > '9')
            return NULL;
        size_t n = 0;
        while (pos < len && s[pos] >= '0' && s[pos] <= '9') {
            n = n * 10 + (size_t)(s[pos++] - '0');
            if (n > len)
                return NULL;
        }
        if (n > len - pos)
            return NULL;
        last = pos;
        last_len = n;
        pos += n;
        nel++;
    }
    if (pos >= len || nel < 2 || !rust_hash(s + last, last_len))
        return NULL;
    const char *suffix = s + pos + 1;
    if (*suffix && !ms__demangle_symbol_like(suffix))
        return NULL; /* C++ parameters follow: a C++ name */
    struct out o = {.p = malloc(MS_DEMANGLE_MAX_OUT + 1)};
    if (!o.p)
        return NULL;
    pos = 0;
    for (size_t k = 0; k + 1 < nel; k++) {
        size_t n = 0;
        while (s[pos] >= '0' && s[pos] <= '9')
            n = n * 10 + (size_t)(s[pos++] - '0');
        if (k)
            put(&o, "::");
        legacy_element(&o, s + pos, n);
        pos += n;
    }
    put(&o, suffix);
    if (o.full) {
        free(o.p);
        return NULL;
    }
    return out_finish(&o);
}

/* ---- entry points ---- */

/* The length of name without LLVM's ".llvm.<hex digits or @>" suffix. */
static size_t without_llvm_suffix(const char *name)
{
    const char *l = strstr(name, ".llvm.");
    if (!l)
        return strlen(name);
    for (const char *c = l + 6; *c; c++)
        if (!((*c >= '0' && *c <= '9') || (*c >= 'A' && *c <= 'F') || *c == '@'))
            return strlen(name);
    return (size_t)(l - name);
}

char *ms_demangle_rust(const char *name)
{
    if (!name || strlen(name) > MS_DEMANGLE_MAX_IN)
        return NULL;
    char buf[MS_DEMANGLE_MAX_IN + 1];
    size_t n = without_llvm_suffix(name);
    memcpy(buf, name, n);
    buf[n] = 0;
    if (buf[0] == '_' && buf[1] == 'R')
        return ms__demangle_v0(buf);
    return demangle_legacy(buf);
}

/* libstdc++'s demangler (a C function: <cxxabi.h> is C++ only). */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

char *ms_demangle(const char *name)
{
    if (!name || strlen(name) > MS_DEMANGLE_MAX_IN)
        return NULL;
    char *r = ms_demangle_rust(name);
    if (r || name[0] != '_' || name[1] != 'Z')
        return r;
    char buf[MS_DEMANGLE_MAX_IN + 1];
    size_t n = without_llvm_suffix(name);
    memcpy(buf, name, n);
    buf[n] = 0;
    int status = -1;
    char *d = __cxa_demangle(buf, NULL, NULL, &status);
    if (status != 0) {
        free(d);
        return NULL;
    }
    return d;
}

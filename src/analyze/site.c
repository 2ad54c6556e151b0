/* site.c: the call site of a stack, the one rule every report and the viewer use.
 *
 * A stack's call site is where the program asked for the memory. With a Python stack it is a
 * Python frame (its Python part's text, from src/store/stack_text.c); else it is the native
 * frame that the rule below picks from the stack's frames. The frames come from one helper,
 * ms_stack_frames_load(), over the stack tree's reader (src/store/stack_text.c); the rule (ms_site_pick) is a pure
 * function over the array it fills, which tests call with frames of their own.
 *
 * The rule: a frame is of class 2 when it is an allocator entry point or wrapper (operator
 * new/new[], malloc & co. linked into the program, a documented list of wrappers such as
 * xmalloc, zmalloc, g_malloc, PyMem_Malloc, and the user's --site-skip names), class 1 when it
 * is runtime library code (a frame in libc, the loader, libstdc++, libgcc, the agent, an
 * allocator library; a C++ or Rust standard library function, wherever it was instantiated;
 * memscope.h's inline wrappers), else class 0: the program's own code. The site is the first
 * frame (innermost first) of class 0; when there is none, the first of class 1; when there is
 * none either, the innermost frame. Line information does not change the choice: a binary
 * without debug information gets the same site, written `function (module)` (every call in
 * the function one site, as a line is one with debug information) instead of
 * `function (file:line)`. A frame without a symbol stands for the first named function of its
 * module among the frames of that module right above it (the library function that led to
 * its internals); without one it is the site itself, `?? (module+0xoffset)`.
 *
 * Workload: once per distinct stack of a report (callers cache the text by stack id). */
#include "analyze.h"
#include "common/term_text.h"

#include "common/grow.h"
#include "common/ms_error.h"

#include <stdlib.h>
#include <string.h>

struct ms_site_rule ms_site_rule;

/* ---- The frames of a stack ---- */

void ms_stack_frames_init(struct ms_stack_frames *s)
{
    memset(s, 0, sizeof *s);
}

void ms_stack_frames_release(struct ms_stack_frames *s)
{
    if (!s)
        return;
    free(s->f);
    memset(s, 0, sizeof *s);
}

int ms_stack_frames_load(struct ms_stack_text *t, int64_t stack_id, struct ms_stack_frames *s)
{
    s->n = 0;
    if (stack_id <= 0)
        return 0;
    const struct ms_stack_frame *fr;
    size_t n;
    int rc = ms_stack_text_frames(t, stack_id, &fr, &n);
    if (rc < 0)
        return rc;
    if (n && ms_grow((void **)&s->f, &s->fcap, n - 1, sizeof *s->f, 64, MS_STACK_MAX_FRAMES) < 0)
        return MS_ENOMEM;
    for (size_t i = 0; i < n; i++)
        s->f[i] = (struct ms_frame_info){fr[i].function, fr[i].linkage, fr[i].file,
                                         fr[i].line,     fr[i].module,  fr[i].offset};
    s->n = n;
    return 0;
}

/* ---- The rule ---- */

/* 1 when name is pattern's function: the same text, or followed by a parameter list "(", a
 * compiler's clone suffix (".cold", ".constprop.0", ".isra.0", ".part.0", ".llvm.N") or a
 * Rust legacy hash ("::h" and 16 hex digits). A pattern that ends in '*' matches every name
 * that starts with the text before it. */
static int name_matches(const char *name, const char *pat, size_t plen)
{
    if (plen && pat[plen - 1] == '*')
        return !strncmp(name, pat, plen - 1);
    if (strncmp(name, pat, plen))
        return 0;
    const char *r = name + plen;
    if (!*r || *r == '(' || *r == '.')
        return 1;
    if (strncmp(r, "::h", 3) || strlen(r + 3) != 16)
        return 0;
    for (r += 3; *r; r++)
        if (!((*r >= '0' && *r <= '9') || (*r >= 'a' && *r <= 'f')))
            return 0;
    return 1;
}

/* The allocator entry points and common wrappers (docs/analyses.md lists them): never a
 * site while the stack has another frame. */
static const char *const wrappers[] = {
    /* the C library's, when linked into the program (static binaries, allocators) */
    "malloc", "calloc", "realloc", "reallocarray", "free", "posix_memalign", "aligned_alloc",
    "memalign", "valloc", "pvalloc", "strdup", "strndup", "mmap", "mmap64", "mremap",
    "__libc_malloc", "__libc_calloc", "__libc_realloc", "__libc_memalign",
    /* GNU (gnulib, GCC, binutils), git */
    "xmalloc", "xcalloc", "xrealloc", "xzalloc", "xmallocz", "xstrdup", "xstrndup", "xmemdup",
    "xmemdupz", "xnmalloc", "xnrealloc", "x2realloc", "x2nrealloc", "xcharalloc", "xreallocarray",
    /* Redis */
    "zmalloc*", "zcalloc*", "zrealloc*", "ztrymalloc*", "ztrycalloc*", "ztryrealloc*", "zstrdup",
    /* GLib (g_new and g_new0 are macros around g_malloc_n and g_malloc0_n) */
    "g_malloc", "g_malloc0", "g_malloc_n", "g_malloc0_n", "g_realloc", "g_realloc_n",
    "g_try_malloc", "g_try_malloc0", "g_try_malloc_n", "g_try_malloc0_n", "g_try_realloc",
    "g_try_realloc_n", "g_slice_alloc", "g_slice_alloc0", "g_memdup", "g_memdup2", "g_strdup",
    "g_strndup",
    /* CPython */
    "PyMem_*", "_PyMem_*", "PyObject_Malloc", "PyObject_Calloc", "PyObject_Realloc",
    "_PyObject_Malloc", "_PyObject_Calloc", "_PyObject_Realloc", "pymalloc_*",
    /* Rust's global allocator */
    "__rust_alloc", "__rust_alloc_zeroed", "__rust_realloc", "__rdl_alloc", "__rdl_alloc_zeroed",
    "__rdl_realloc", "__rg_alloc", "__rg_alloc_zeroed", "__rg_realloc",
    /* CUDA's runtime (often linked into the program) and driver */
    "cudaMalloc*", "cudaHostAlloc", "cuMemAlloc*", "cuMemHostAlloc", "cuMemCreate",
    /* OpenSSL */
    "CRYPTO_malloc", "CRYPTO_zalloc", "CRYPTO_realloc", "CRYPTO_clear_realloc", "CRYPTO_strdup",
    "CRYPTO_strndup", "CRYPTO_memdup", "CRYPTO_secure_malloc", "CRYPTO_secure_zalloc",
    /* SQLite */
    "sqlite3_malloc", "sqlite3_malloc64", "sqlite3_realloc", "sqlite3_realloc64", "sqlite3Malloc",
    "sqlite3MallocZero", "sqlite3Realloc", "sqlite3DbMalloc*", "sqlite3DbRealloc",
    /* LLVM */
    "llvm::safe_malloc", "llvm::safe_calloc", "llvm::safe_realloc", "llvm::allocate_buffer"};

/* The runtime libraries, by the start of a module's file name. */
static const char *const runtime_modules[] = {
    "libc.so",        "ld-linux",     "ld-musl",        "libstdc++.so", "libgcc_s.so",
    "libc++.so",      "libc++abi.so", "libpthread.so",  "libdl.so",     "libmemscope.so",
    "libjemalloc.so", "libtcmalloc",  "libmimalloc.so", "libcudart.so", "libcuda.so"};

/* The standard libraries' code, wherever it was instantiated or inlined, by function name. */
static const char *const runtime_functions[] = {
    "std::",       "__gnu_cxx::", "__cxxabiv1::", "alloc::", "core::",
    "hashbrown::", "<std::",      "<alloc::",     "<core::", "<hashbrown::"};

/* 1 when p, a Rust mangled crate name ("<length><name>"), is the standard library's: alloc,
 * core, std, or hashbrown (std's HashMap). The length fixes where the name ends. */
static int rust_std_crate(const char *p)
{
    static const char *const crates[] = {"5alloc", "4core", "3std", "9hashbrown"};
    for (size_t i = 0; i < sizeof crates / sizeof crates[0]; i++)
        if (!strncmp(p, crates[i], strlen(crates[i])))
            return 1;
    return 0;
}

/* 1 for a Rust standard library function still mangled: legacy "_ZN5alloc...",
 * "_ZN60_$LT$alloc..string..String$u20$as$u20$..." (an impl), and v0 "_R...", whose first
 * crate root "C[s<base62>_]<length><name>" names the path's crate ("NC" is a closure). */
static int rust_std_mangled(const char *fn)
{
    if (!strncmp(fn, "_ZN", 3)) {
        const char *p = fn + 3;
        if (rust_std_crate(p))
            return 1;
        while (*p >= '0' && *p <= '9')
            p++;
        return !strncmp(p, "_$LT$alloc..", 12) || !strncmp(p, "_$LT$core..", 11) ||
               !strncmp(p, "_$LT$std..", 10) || !strncmp(p, "_$LT$hashbrown..", 16);
    }
    if (strncmp(fn, "_R", 2))
        return 0;
    for (const char *p = fn + 2; *p; p++) {
        if (*p != 'C' || p[-1] == 'N')
            continue;
        const char *q = p + 1;
        if (*q == 's') { /* a disambiguator: base-62 digits and '_' */
            for (q++;
                 (*q >= '0' && *q <= '9') || (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z');
                 q++)
                ;
            if (*q++ != '_')
                continue;
        }
        if (*q >= '1' && *q <= '9')
            return rust_std_crate(q);
    }
    return 0;
}

/* 1 for operator new or new[] (any overload, a class's own too), demangled or mangled. */
static int operator_new(const char *fn)
{
    if (!strncmp(fn, "_Znw", 4) || !strncmp(fn, "_Zna", 4))
        return 1;
    for (const char *p = strstr(fn, "operator new"); p; p = strstr(p + 1, "operator new")) {
        if (p != fn && !(p - fn >= 2 && p[-1] == ':' && p[-2] == ':'))
            continue;
        const char *q = p + 12;
        if (!strncmp(q, "[]", 2))
            q += 2;
        if (!*q || *q == '(')
            return 1;
    }
    return 0;
}

static int wrapper(const struct ms_site_rule *r, const char *fn)
{
    if (operator_new(fn))
        return 1;
    for (size_t i = 0; i < sizeof wrappers / sizeof wrappers[0]; i++)
        if (name_matches(fn, wrappers[i], strlen(wrappers[i])))
            return 1;
    for (size_t i = 0; r && i < r->nskip; i++)
        if (name_matches(fn, r->skip[i], strlen(r->skip[i])))
            return 1;
    return 0;
}

int ms_site_frame_class(const struct ms_site_rule *r, const struct ms_frame_info *f)
{
    if ((f->function && wrapper(r, f->function)) || (f->linkage && wrapper(r, f->linkage)))
        return 2;
    const char *base = f->module ? strrchr(f->module, '/') : NULL;
    base = base ? base + 1 : f->module;
    for (size_t i = 0; base && i < sizeof runtime_modules / sizeof runtime_modules[0]; i++)
        if (!strncmp(base, runtime_modules[i], strlen(runtime_modules[i])))
            return 1;
    for (size_t i = 0; f->function && i < sizeof runtime_functions / sizeof runtime_functions[0];
         i++)
        if (!strncmp(f->function, runtime_functions[i], strlen(runtime_functions[i])))
            return 1;
    if (f->function && rust_std_mangled(f->function))
        return 1;
    if (f->file) { /* memscope.h; the C++ library's headers and Rust's standard library for a
                    * frame without a name (a named function is judged by its name: the line
                    * of a program's function may be code inlined from the library) */
        size_t fl = strlen(f->file);
        if ((fl >= 11 && !strcmp(f->file + fl - 11, "/memscope.h")) ||
            (!f->function &&
             (strstr(f->file, "/include/c++/") || !strncmp(f->file, "/rustc/", 7) ||
              !strncmp(f->file, "library/alloc/", 14) || !strncmp(f->file, "library/core/", 13) ||
              !strncmp(f->file, "library/std/", 12))))
            return 1;
    }
    return 0;
}

/* 1 when a and b are frames of the same module. */
static int same_module(const struct ms_frame_info *a, const struct ms_frame_info *b)
{
    return a->module && b->module && !strcmp(a->module, b->module);
}

long ms_site_pick(const struct ms_site_rule *r, const struct ms_frame_info *f, size_t n)
{
    long first1 = -1;
    for (size_t i = 0; i < n; i++) {
        int c = ms_site_frame_class(r, &f[i]);
        if (c == 0) {
            /* A frame without a symbol (a library's internal function, stripped) stands for
             * the first named function of its module that led to it, among the frames of
             * that module right above it; only without one is the address the site. */
            for (size_t j = i + 1; !f[i].function && j < n && same_module(&f[i], &f[j]); j++)
                if (f[j].function)
                    return ms_site_frame_class(r, &f[j]) == 0 ? (long)j : (long)i;
            return (long)i;
        }
        if (c == 1 && first1 < 0)
            first1 = (long)i;
    }
    return first1 >= 0 ? first1 : n ? 0 : -1;
}

void ms_site_frame_format(const struct ms_frame_info *f, char *out, size_t len)
{
    const char *base = f->module ? strrchr(f->module, '/') : NULL;
    base = base ? base + 1 : f->module;
    if (f->file)
        snprintf(out, len, "%s (%s:%d)", f->function ? f->function : "??", f->file, f->line);
    else if (f->function && base) /* a function: every call in it is the same site */
        snprintf(out, len, "%s (%s)", f->function, base);
    else if (f->function)
        snprintf(out, len, "%s", f->function);
    else if (base) /* no name: the return address is all there is */
        snprintf(out, len, "?? (%s+0x%llx)", base, (unsigned long long)f->offset);
    else
        snprintf(out, len, "?? (0x%llx)", (unsigned long long)f->offset);
}

int ms_site_rule_add(struct ms_site_rule *r, const char *list, char *err, size_t errlen)
{
    for (const char *p = list; p;) {
        const char *comma = strchr(p, ',');
        size_t l = comma ? (size_t)(comma - p) : strlen(p);
        if (!l || l > 512 || memchr(p, ' ', l) == p || (l == 1 && *p == '*')) {
            return ms_errf(err, errlen, MS_EINVAL,
                           "bad function name '%.*s' in '%s' (a comma list of names; "
                           "NAME* for every name that starts with NAME)",
                           (int)(l > 64 ? 64 : l), p, list);
        }
        if (r->nskip == r->askip &&
            ms_grow((void **)&r->skip, &r->askip, r->nskip, sizeof *r->skip, 8, 4096) < 0)
            goto oom;
        if (!(r->skip[r->nskip] = strndup(p, l)))
            goto oom;
        r->nskip++;
        p = comma ? comma + 1 : NULL;
    }
    return 0;
oom:
    return ms_errf(err, errlen, MS_ENOMEM, "out of memory");
}

void ms_site_rule_release(struct ms_site_rule *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->nskip; i++)
        free(r->skip[i]);
    free(r->skip);
    memset(r, 0, sizeof *r);
}

/* ---- Python call sites ---- */

/* A Python frame's file as the site chooser sees it: 2 memscope's own (never a site), 1 a
 * library (the standard library, site-packages or dist-packages, frozen modules), 0 the
 * program's own code. */
int ms_py_file_kind(const char *f, size_t n)
{
    static const char *const own[] = {
        "/memscope/torch/",      "/memscope/__init__.py",        "/memscope/_config.py",
        "/memscope/describe.py", "/memscope/record_function.py", "/memscope/snapshot.py",
        "/memscope/tracer.py",   "/memscope/watcher.py",         "/sitecustomize.py",
        "/memscope/monitor.py",  "/memscope/__main__.py"};
    char buf[1024];
    if (n >= sizeof buf)
        n = sizeof buf - 1;
    memcpy(buf, f, n);
    buf[n] = 0;
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        if (strstr(buf, own[i]))
            return 2;
    if (buf[0] == '<' || strstr(buf, "/site-packages/") || strstr(buf, "/dist-packages/"))
        return 1;
    const char *lib = strstr(buf, "/lib/python"); /* /usr/lib/python3.11/json/... */
    if (lib && (lib[11] >= '0' && lib[11] <= '9'))
        return 1;
    return 0;
}

int ms_py_frame_own(const char *line, size_t len)
{
    const char *colon = NULL; /* the first "): ": the file ends at the '(' before it */
    for (size_t i = 0; !colon && i + 3 <= len; i++)
        if (!memcmp(line + i, "): ", 3))
            colon = line + i;
    const char *open = colon;
    while (open && open > line && *open != '(')
        open--;
    return open && open > line && *open == '(' && ms_py_file_kind(line, (size_t)(open - line)) == 2;
}

/* The Python call site of stack_id into out: 1 when its Python part has one, 0 when not,
 * MS_ENOMEM when its text cannot be read. */
static int python_site(struct ms_site_reader *r, int64_t stack_id, char *out, size_t len)
{
    /* A Python program's call site is its innermost Python frame with a file and a line
     * ("file(line): function" lines; C++ frames of snapshots read "??(0): ..."). */
    const char *py = ms_stack_text_py(&r->t, stack_id);
    if (!py)
        return MS_ENOMEM;
    /* The innermost frame of the program's own code wins; else the innermost of a library;
     * memscope's own frames never (--site=innermost: the innermost frame but memscope's). */
    int best = 3;
    for (const char *line = py; line && *line && best > 0;) {
        const char *nl = strchr(line, '\n');
        const char *end = nl ? nl : line + strlen(line);
        const char *colon = strstr(line, "): ");
        const char *open = colon ? colon : NULL;
        while (open && open > line && *open != '(')
            open--;
        if (colon && colon < end && open > line && *open == '(' &&
            !(open - line == 2 && !memcmp(line, "??", 2)) && strtol(open + 1, NULL, 10) > 0) {
            int kind = ms_py_file_kind(line, (size_t)(open - line));
            if (kind == 1 && ms_site_rule.py_innermost)
                kind = 0;
            if (kind < 2 && kind < best) {
                best = kind;
                snprintf(out, len, "%.*s (%.*s:%.*s)", (int)(end - colon - 3), colon + 3,
                         (int)(open - line), line, (int)(colon - open - 1), open + 1);
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    return best < 3;
}

void ms_site_reader_init(struct ms_site_reader *r, sqlite3 *db)
{
    memset(r, 0, sizeof *r);
    r->db = db;
    ms_stack_frames_init(&r->frames);
}

/* Starts r's stack reader on first use: 0, or MS_EDB when the database has no stacks. */
static int reader_start(struct ms_site_reader *r)
{
    if (!r->t_ok)
        r->t_ok = ms_stack_text_init(&r->t, r->db) == 0 ? 1 : -1;
    return r->t_ok > 0 ? 0 : MS_EDB;
}

void ms_site_reader_release(struct ms_site_reader *r)
{
    if (!r)
        return;
    if (r->t_ok > 0)
        ms_stack_text_release(&r->t);
    ms_stack_frames_release(&r->frames);
    memset(r, 0, sizeof *r);
}

int ms_site_reader_site(struct ms_site_reader *r, int64_t stack_id, char *out, size_t len)
{
    snprintf(out, len, "(no stack)");
    if (stack_id <= 0)
        return 0;
    int rc = reader_start(r);
    if (rc == 0)
        rc = python_site(r, stack_id, out, len);
    if (rc != 0)
        return rc < 0 ? rc : 0;
    /* a stack whose frames cannot be read (out of memory, a damaged database) is an error,
     * never a report that names another site */
    if ((rc = ms_stack_frames_load(&r->t, stack_id, &r->frames)) < 0)
        return rc;
    long i = ms_site_pick(&ms_site_rule, r->frames.f, r->frames.n);
    if (i >= 0)
        ms_site_frame_format(&r->frames.f[i], out, len);
    return 0;
}

void ms_stack_site(sqlite3 *db, int64_t stack_id, char *out, size_t len)
{
    struct ms_site_reader r;
    ms_site_reader_init(&r, db);
    if (ms_site_reader_site(&r, stack_id, out, len) == MS_ENOMEM)
        ms_oom_note(); /* the command fails at its end (ms_oom_seen) */
    ms_site_reader_release(&r);
}

/* ---- Call sites by stack id, interned ---- */

void ms__sites_init(struct ms_sites *s, sqlite3 *db)
{
    memset(s, 0, sizeof *s);
    s->db = db;
    ms_site_reader_init(&s->reader, db);
    ms_u64map_init(&s->by_stack, sizeof(char *), MS_U64MAP_MAX);
}

void ms__sites_release(struct ms_sites *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->ntexts; i++)
        free(s->texts[i]);
    free(s->texts);
    ms_u64map_release(&s->by_stack);
    ms_site_reader_release(&s->reader);
    memset(s, 0, sizeof *s);
}

const char *ms__sites_get(struct ms_sites *s, int64_t stack_id)
{
    if (stack_id < 0)
        stack_id = 0;
    char **slot = ms_u64map_get(&s->by_stack, stack_id);
    if (slot)
        return *slot;
    char raw[1024], buf[4096];
    if (ms_site_reader_site(&s->reader, stack_id, raw, sizeof raw) < 0)
        return NULL;
    if (s->term) /* a text report: escaped before it is interned (term_text.h) */
        ms_term_escape(buf, sizeof buf, raw);
    else
        memcpy(buf, raw, strlen(raw) + 1);
    /* Intern: a linear search would be quadratic over many stacks, so keep the texts in a
     * small open hash keyed by a string hash (collisions resolved by strcmp). */
    uint64_t h = 1469598103934665603ull;
    for (const char *p = buf; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    int64_t key = (int64_t)(h >> 2) | (1ll << 61); /* never collides with stack ids < 2^61 */
    char *text = NULL;
    for (;; key = (int64_t)(((uint64_t)key * 31 + 7) >> 2) | (1ll << 61)) {
        char **t = ms_u64map_get(&s->by_stack, key);
        if (!t)
            break;
        if (!strcmp(*t, buf)) {
            text = *t;
            break;
        }
    }
    if (!text) {
        if (s->ntexts == s->atexts && ms_grow((void **)&s->texts, &s->atexts, s->ntexts,
                                              sizeof *s->texts, 64, MS_GROW_MAX) < 0)
            return NULL;
        if (!(text = strdup(buf)))
            return NULL;
        s->texts[s->ntexts++] = text;
        int isnew;
        char **t = ms_u64map_put(&s->by_stack, key, &isnew);
        if (!t)
            return NULL;
        *t = text;
    }
    int isnew;
    slot = ms_u64map_put(&s->by_stack, stack_id, &isnew);
    if (!slot)
        return NULL;
    *slot = text;
    return text;
}

int ms_py_interpreter_frame(const char *s, size_t len)
{
    static const char *const pre[] = {"_Py",      "Py",          "cfunction_", "method_vectorcall",
                                      "slot_tp_", "vectorcall_", "_PyEval"};
    for (size_t i = 0; i < sizeof pre / sizeof *pre; i++)
        if (len >= strlen(pre[i]) && !strncmp(s, pre[i], strlen(pre[i])))
            return 1;
    return 0;
}

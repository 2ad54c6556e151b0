/* symbolize.h: code address -> function, file and line (with inlined frames), via libdw.
 *
 * Used by the store once per distinct pc of each traced process. One symbolizer per process:
 * it is built from the MODULE records of that process (ELF path, load bias, mapped range) and
 * reports them to a Dwfl session so libdw reads the ELF symbol tables and DWARF (including
 * separate debuginfo found by build id or .gnu_debuglink). Missing files are not an error:
 * addresses in them come back without a function name. */
#ifndef MS_STORE_SYMBOLIZE_H
#define MS_STORE_SYMBOLIZE_H

#include <stddef.h>
#include <stdint.h>

struct ms_sym_module {
    uint64_t bias, lo, hi; /* [lo, hi): mapped range; bias: load bias (pc - bias = ELF vaddr) */
    const char *path;      /* borrowed; must outlive the symbolizer */
    int64_t db_id;         /* modules.id */
};

/* One line of a symbolized pc. Strings are borrowed from libdw or the module table and stay
 * valid until ms_symbolizer_release(). */
struct ms_sym_frame {
    const char *func; /* NULL when unknown */
    const char *file; /* NULL when unknown */
    int line;         /* 0 when unknown */
};

#define MS_SYM_MAX_INLINE 32 /* frames per pc, the containing function included */

/* The ELF files of a whole conversion, each opened once with libdw (at load bias 0) with its
 * function symbols sorted by address: a run of 500 processes (a shell loop, a build) reads libc
 * once, not 500 times. Owned by the caller; ms_symcache_release() frees it. */
struct ms_symcache {
    struct ms_symfile *files;
    size_t nfiles, afiles;
};

void ms_symcache_init(struct ms_symcache *c);
void ms_symcache_release(struct ms_symcache *c);

/* One process's view: its modules (where each file is loaded) over the shared cache. */
struct ms_symbolizer {
    struct ms_sym_module *mods; /* sorted by lo, owned */
    size_t nmods;
    struct ms_symcache *cache; /* NULL when symbolization is off */
};

/* Builds a symbolizer over n modules (copied), reading files through cache (which must outlive
 * it). cache = NULL builds only the module table (frames then carry module offsets only).
 * Returns 0 or MS_ENOMEM. */
int ms_symbolizer_init(struct ms_symbolizer *s, struct ms_symcache *cache,
                       const struct ms_sym_module *mods, size_t n);

void ms_symbolizer_release(struct ms_symbolizer *s);

/* Returns the module holding pc, or NULL. */
const struct ms_sym_module *ms_symbolizer_module(const struct ms_symbolizer *s, uint64_t pc);

/* Symbolizes the return address pc (looking up pc - 1, the call instruction). Fills out[0..n)
 * innermost first (inlined functions before the function containing them) and returns n >= 1;
 * out[n-1] is the containing function. MS_ENOMEM when memory ran out on the way (never an
 * unnamed frame in its place). */
int ms_symbolizer_lookup(struct ms_symbolizer *s, uint64_t pc, struct ms_sym_frame *out);

#endif

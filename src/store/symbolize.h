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
    uint64_t bias, lo, hi;   /* [lo, hi): mapped range; bias: load bias (pc - bias = ELF vaddr) */
    const char *path;        /* borrowed; must outlive the symbolizer */
    int64_t db_id;           /* modules.id */
};

/* One line of a symbolized pc. Strings are borrowed from libdw or the module table and stay
 * valid until ms_symbolizer_release(). */
struct ms_sym_frame {
    const char *func;   /* NULL when unknown */
    const char *file;   /* NULL when unknown */
    int line;           /* 0 when unknown */
};

#define MS_SYM_MAX_INLINE 32 /* frames per pc, the containing function included */

struct ms_symbolizer {
    struct ms_sym_module *mods; /* sorted by lo, owned */
    size_t nmods;
    void *dwfl;                 /* Dwfl *, NULL when symbolization is off or failed */
    struct ms_sym_table *tables; /* per libdw module: its function symbols sorted by address */
    size_t ntables;
};

/* Builds a symbolizer over n modules (copied). use_debuginfo = 0 builds only the module table
 * (frames then carry module offsets only). Returns 0 or MS_ENOMEM. */
int ms_symbolizer_init(struct ms_symbolizer *s, const struct ms_sym_module *mods, size_t n,
                       int use_debuginfo);

void ms_symbolizer_release(struct ms_symbolizer *s);

/* Returns the module holding pc, or NULL. */
const struct ms_sym_module *ms_symbolizer_module(const struct ms_symbolizer *s, uint64_t pc);

/* Symbolizes the return address pc (looking up pc - 1, the call instruction). Fills out[0..n)
 * innermost first (inlined functions before the function containing them) and returns n >= 1;
 * out[n-1] is the containing function. */
int ms_symbolizer_lookup(struct ms_symbolizer *s, uint64_t pc, struct ms_sym_frame *out);

#endif

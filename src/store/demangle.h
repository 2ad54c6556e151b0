/* demangle.h: readable names of mangled C++ and Rust symbols, for the frames of the database
 * (convert_symbols.c). */
#ifndef MS_STORE_DEMANGLE_H
#define MS_STORE_DEMANGLE_H

#include <stddef.h>

/* The longest name demangled (longer ones are kept as they are), and the longest result. */
#define MS_DEMANGLE_MAX_IN 4096
#define MS_DEMANGLE_MAX_OUT 8192

/* The readable name of a mangled symbol, malloc'd (caller frees), or NULL when name is not a
 * mangled name this knows, is damaged, is longer than MS_DEMANGLE_MAX_IN, would demangle to
 * more than MS_DEMANGLE_MAX_OUT bytes, or memory ran out. Knows:
 * - C++ (Itanium ABI, "_Z...": libstdc++'s __cxa_demangle), "foo::bar(int)";
 * - Rust's legacy mangling ("_ZN...17h<16 hex digits>E"), without the hash, as rustc-demangle
 *   prints it in its alternate form: "std::rt::lang_start_internal";
 * - Rust's v0 mangling ("_R..."), likewise without crate disambiguators and integer constants'
 *   type suffixes: "std::rt::lang_start::<()>::{closure#0}".
 * A ".llvm.<hex>" suffix (LLVM's ThinLTO renaming) is dropped first; other suffixes ("[clone
 * .cold]" for C++, ".cold" kept after a Rust name) are kept. Bounded in time and memory by the
 * caps above, whatever the input (tests/fuzz/fuzz_demangle.c). */
char *ms_demangle(const char *name);

/* The same for a Rust symbol only (legacy or v0): NULL for anything else. Exposed for tests. */
char *ms_demangle_rust(const char *name);

#endif

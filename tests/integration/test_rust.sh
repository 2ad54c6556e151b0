#!/bin/bash
# test_rust.sh: a Rust program (tests/progs/rust_alloc.rs) under memscope (issue 47): its
# leaks exact, and every Rust name readable as rustc-demangle's alternate form prints it: no
# legacy hash (::h + 16 hex digits), no v0 name left mangled (_R...), no .llvm. suffix; built
# with the legacy mangling (rustc's default for a program's own functions; its std is v0) and
# with v0 throughout. Skipped where there is no rustc (CI); tests/unit/test_demangle.c checks
# the demangler on names taken from such programs everywhere.
. "$(dirname "$0")/lib.sh"

RUSTC=$(command -v rustc || echo "$HOME/.cargo/bin/rustc")
[ -x "$RUSTC" ] || skip "no rustc on this machine"
SRC=$(dirname "$0")/../progs/rust_alloc.rs
"$RUSTC" -g -C opt-level=1 -o "$TMP/ra_legacy" "$SRC" 2>"$TMP/rustc.err" ||
    skip "rustc cannot build here: $(head -1 "$TMP/rustc.err")"
"$RUSTC" -g -C opt-level=1 -C symbol-mangling-version=v0 -o "$TMP/ra_v0" "$SRC" 2>"$TMP/rustc.err" ||
    skip "rustc cannot build v0 names here: $(head -1 "$TMP/rustc.err")"

for kind in legacy v0; do
    ms "run_$kind" run -q -o "$TMP/$kind.db" -- "$TMP/ra_$kind"
    assert_eq "$kind: exit status" 0 "$RC"
    assert_eq "$kind: output unchanged" "rust_alloc ok 40013 40031 10" "$(cat "$TMP/run_$kind.out")"
    require_db "$kind" "$TMP/$kind.db"
    "$MEMSCOPE" analyze leaks "$TMP/$kind.db" >"$TMP/$kind.leaks"
    "$MEMSCOPE" export "$TMP/$kind.db" --format=csv -o "$TMP/$kind.csv"
    assert_eq "$kind: the trait method's leak, named" 1 \
        "$(grep -cE '^ +40031 +1  <rust_alloc::Holder as rust_alloc::Keep>::keep \(' "$TMP/$kind.leaks")"
    assert_eq "$kind: no legacy hash left in any stack" 0 \
        "$(grep -cE '::h[0-9a-f]{16}' "$TMP/$kind.csv")"
    assert_eq "$kind: no mangled name left in any stack" 0 \
        "$(grep -cE '(^|[^A-Za-z0-9_])(_R[A-Z]|_ZN[0-9])|\.llvm\.' "$TMP/$kind.csv")"
    assert_ge "$kind: std's v0 names demangled (std::rt::lang_start_internal in stacks)" 1 \
        "$(grep -c 'std::rt::lang_start_internal (' "$TMP/$kind.csv")"
done
# the generic function: legacy names carry no generic arguments, v0 names do; std's closure
# instantiated in the program is {{closure}} in legacy, {closure#0} in v0
assert_eq "legacy: the generic function's leak" 1 \
    "$(grep -cE '^ +40013 +1  rust_alloc::leak_in \(' "$TMP/legacy.leaks")"
assert_eq "v0: the generic function's leak, with its argument" 1 \
    "$(grep -cE '^ +40013 +1  rust_alloc::leak_in::<u64> \(' "$TMP/v0.leaks")"
assert_ge "legacy: a closure in the stacks" 1 \
    "$(grep -c 'std::rt::lang_start::{{closure}} (' "$TMP/legacy.csv")"
assert_ge "v0: a closure and a fn type in the stacks" 1 \
    "$(grep -c 'std::rt::lang_start::<()>::{closure#0} (' "$TMP/v0.csv")"
assert_ge "v0: a fn type in the stacks" 1 \
    "$(grep -cF 'std::sys::backtrace::__rust_begin_short_backtrace::<fn(), ()> (' "$TMP/v0.csv")"
done_testing

// rust_alloc.rs: a Rust program with known allocations, for test_rust.sh (issue 47: Rust names
// demangled without their hash, legacy and v0 manglings). Built by the test itself with rustc
// when the machine has one (CI has none: the test is then skipped; the demangler's own test,
// tests/unit/test_demangle.c, holds names taken from programs like this one).
//
// Leaks exactly: one block of 40013 bytes from leak_in::<u64> called in a closure, and one of
// 40031 bytes from <Holder as Keep>::keep; everything else is freed before main returns.
use std::hint::black_box;

#[inline(never)]
fn leak_in<T: Default + Clone>(n: usize) -> &'static mut [u8] {
    let _probe: Vec<T> = vec![T::default(); 1];
    Box::leak(vec![7u8; n].into_boxed_slice())
}

trait Keep {
    fn keep(&self, n: usize) -> usize;
}

struct Holder;

impl Keep for Holder {
    #[inline(never)]
    fn keep(&self, n: usize) -> usize {
        let v: Vec<u8> = black_box(vec![3u8; n]);
        let len = v.len();
        std::mem::forget(v);
        len
    }
}

fn main() {
    let f = |n: usize| leak_in::<u64>(n).len();
    let a = black_box(f)(black_box(40013));
    let h: Box<dyn Keep> = Box::new(Holder);
    let b = h.keep(black_box(40031));
    let freed: Vec<String> = (0..10).map(|i| format!("{}", i)).collect();
    println!("rust_alloc ok {} {} {}", a, b, freed.len());
}

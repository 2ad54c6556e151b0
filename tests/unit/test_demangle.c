/* test_demangle.c: the demangler (src/store/demangle.c) on known names and hostile ones.
 *
 * Known answers: symbols taken with nm from Rust programs built here by rustc 1.95 (its std is
 * mangled with v0; a program's own functions with the legacy scheme unless built with
 * -C symbol-mangling-version=v0: tests/progs/rust_alloc.rs), each with the text rustc-demangle
 * prints in its alternate form ({:#}, what Rust's own short backtraces show), which is GNU
 * c++filt's (binutils 2.40) without the crate hashes and constants' types. Hostile: every prefix
 * of each known name, and names built to recurse deeply, to point back-references forwards or
 * at themselves, to overflow numbers, or to print exponentially much; each must return NULL or
 * a string of at most MS_DEMANGLE_MAX_OUT bytes (with ASan in the sanitizer build). */
#include "store/demangle.h"
#include "test.h"

#include <stdint.h>

static const char *const known[][2] = {
    /* Rust legacy: the hash and the .llvm. suffix dropped, escapes undone */
    {"_ZN1t4main17hc89f1824c9b61e1dE", "t::main"},
    {"_ZN3std2rt10lang_start28_$u7b$$u7b$closure$u7d$$u7d$17ha4cd5f503635a93eE",
     "std::rt::lang_start::{{closure}}"},
    {"_ZN4core3ops8function6FnOnce40call_once$u7b$$u7b$vtable.shim$u7d$$u7d$"
     "17he6b467707158b87dE",
     "core::ops::function::FnOnce::call_once{{vtable.shim}}"},
    {"_ZN71_$LT$core..hash..sip..Hasher$LT$S$GT$$u20$as$u20$core..hash..Hasher$GT$5write"
     "17h8c26d7f4dd59ef11E",
     "<core::hash::sip::Hasher<S> as core::hash::Hasher>::write"},
    {"_ZN4core3ptr181drop_in_place$LT$hashbrown..scopeguard..ScopeGuard$LT$$RF$mut$u20$"
     "hashbrown..raw..RawTableInner$C$hashbrown..raw..RawTableInner..rehash_in_place..$u7b$"
     "$u7b$closure$u7d$$u7d$$GT$$GT$17he48e0d9adc4d199cE",
     "core::ptr::drop_in_place<hashbrown::scopeguard::ScopeGuard<&mut "
     "hashbrown::raw::RawTableInner,hashbrown::raw::RawTableInner::rehash_in_place::{{closure}}>>"},
    {"_ZN9hashbrown3raw21RawTable$LT$T$C$A$GT$14reserve_rehash17hda8e3e039c59505dE.llvm."
     "1951237472339400034",
     "hashbrown::raw::RawTable<T,A>::reserve_rehash"},
    /* Rust v0 */
    {"_RINvNtCsjrHSEGnQ3l9_3std2rt10lang_startuECsjMaewn57Afh_1t", "std::rt::lang_start::<()>"},
    {"_RNCINvNtCsjrHSEGnQ3l9_3std2rt10lang_startuE0Cs6GmmlP4bgsG_1r",
     "std::rt::lang_start::<()>::{closure#0}"},
    {"_RINvCs6GmmlP4bgsG_1r11generic_negKxn2a_EB2_", "r::generic_neg::<-42>"},
    {"_RINvCs6GmmlP4bgsG_1r12generic_charKc27_EB2_", "r::generic_char::<'\\''>"},
    {"_RINvCs6GmmlP4bgsG_1r12generic_charKc3bb_EB2_", "r::generic_char::<'\xce\xbb'>"},
    {"_RNvCs6GmmlP4bgsG_1ru13ncd_dma1a7bzb", "r::\xc3\xbc"
                                             "n\xc3\xaf"
                                             "c\xc3\xb6"
                                             "d\xc3\xa9"},
    {"_RINvCs6GmmlP4bgsG_1r10unit_tupleThEEB2_", "r::unit_tuple::<(u8,)>"},
    {"_RINvMs2_NtCsgEmfK2I1SDS_4core3fmtNtB6_9Arguments3newKj7_Kj1_ECsjMaewn57Afh_1t",
     "<core::fmt::Arguments>::new::<7, 1>"},
    {"_RINvMsi_NtCsgvbsrvnw3yD_9hashbrown3rawINtB6_12RawIterRangeTNtNtCslNYArtu3iFV_5alloc6"
     "string6StringINtNtBZ_3vec3VechEEE9next_implKb0_ECsjMaewn57Afh_1t",
     "<hashbrown::raw::RawIterRange<(alloc::string::String, alloc::vec::Vec<u8>)>>::next_impl::"
     "<false>"},
    {"_RINvNtCsgEmfK2I1SDS_4core3ptr13drop_in_placeINtNtCslNYArtu3iFV_5alloc5boxed3BoxDG0_INtNtN"
     "tB4_3ops8function2FnTRL1_INtNtCsjrHSEGnQ3l9_3std5panic13PanicHookInfoL0_EEEp6OutputuNtNtB4_"
     "6marker4SyncNtB2N_4SendEL_EEB1T_",
     "core::ptr::drop_in_place::<alloc::boxed::Box<dyn for<'a, 'b> "
     "core::ops::function::Fn<(&'a std::panic::PanicHookInfo<'b>,), Output = ()> + "
     "core::marker::Sync + core::marker::Send>>"},
    {"_RNvMs3_NtCslNYArtu3iFV_5alloc7raw_vecINtB5_6RawVecTOhFUKCBN_EuENtNtCsjrHSEGnQ3l9_3std5all"
     "oc6SystemE8grow_oneB13_",
     "<alloc::raw_vec::RawVec<(*mut u8, unsafe extern \"C\" fn(*mut u8)), "
     "std::alloc::System>>::grow_one"},
    {"_RNvXs1j_NtCsgEmfK2I1SDS_4core3fmtQDNtNtB8_5panic12PanicPayloadEL_NtB6_7Display3fmtCsjrHSE"
     "GnQ3l9_3std",
     "<&mut dyn core::panic::PanicPayload as core::fmt::Display>::fmt"},
    {"_RNvMs3_NtCslNYArtu3iFV_5alloc7raw_vecINtB5_6RawVecPaE8grow_oneCsjrHSEGnQ3l9_3std",
     "<alloc::raw_vec::RawVec<*const i8>>::grow_one"},
    {"_RINvXs_NvMNtCslNYArtu3iFV_5alloc5sliceSp9to_vec_inhNtB5_10ConvertVec6to_vecNtNtBa_5alloc6"
     "GlobalECsjrHSEGnQ3l9_3std",
     "<u8 as <[_]>::to_vec_in::ConvertVec>::to_vec::<alloc::alloc::Global>"},
    {"_RINvMNtCsgEmfK2I1SDS_4core6optionINtB3_6OptionReE11map_or_elseNtNtCslNYArtu3iFV_5alloc6st"
     "ring6StringNCNvNtB12_3fmt6format0NvYeNtNtB12_6borrow7ToOwned8to_ownedECsjMaewn57Afh_1t",
     "<core::option::Option<&str>>::map_or_else::<alloc::string::String, "
     "alloc::fmt::format::{closure#0}, <str as alloc::borrow::ToOwned>::to_owned>"},
    {"_RNvNtNtNtNtNtCsjrHSEGnQ3l9_3std3sys3pal4unix14stack_overflow11thread_info11THREAD_INFO.0",
     "std::sys::pal::unix::stack_overflow::thread_info::THREAD_INFO.0"},
    {"_RINvMs0_NtNtNtNtCsjrHSEGnQ3l9_3std3sys12thread_local6native4lazyINtB6_7StorageINtNtCsgEmfK"
     "2I1SDS_4core4cell4CellTyyEEzE11get_or_initNvNvNvMNtNtBe_4hash6randomNtB2d_11RandomState3new"
     "4KEYS27___rust_std_internal_init_fnECsjMaewn57Afh_1t",
     "<std::sys::thread_local::native::lazy::Storage<core::cell::Cell<(u64, u64)>, "
     "!>>::get_or_init::<<std::hash::random::RandomState>::new::KEYS::__rust_std_internal_init_fn>"},
    /* rustc-demangle's own tests */
    {"_RNvC6_123foo3bar", "123foo::bar"},
    {"_RNCNCNgCs6DXkGYLi8lr_2cc5spawn00B5_", "cc::spawn::{closure#0}::{closure#0}"},
    {"_RINbNbCskIICzLVDPPb_5alloc5alloc8box_freeDINbNiB4_5boxed5FnBoxuEp6OutputuEL_ECs1iopQbuBiw"
     "2_3std",
     "alloc::alloc::box_free::<dyn alloc::boxed::FnBox<(), Output = ()>>"},
    /* C++: as before, and LLVM's suffix dropped */
    {"_ZN3foo3barEi", "foo::bar(int)"},
    {"_ZNSt6vectorIiSaIiEE9push_backERKi", "std::vector<int, std::allocator<int> >::push_back(int "
                                           "const&)"},
    {"_Z3bazv.llvm.8412345", "baz()"},
    {"_Z3bazv.cold", "baz() [clone .cold]"},
    /* C++ names shaped like Rust's legacy ones: parameters follow, or the hash is short */
    {"_ZN1a17h0123456789abcdefEv", "a::h0123456789abcdef()"},
    {"_ZN1a16h0123456789abcdeE", "a::h0123456789abcde"},
};

/* Names that are not mangled, or damaged: kept as they are (NULL). */
static const char *const not_mangled[] = {
    "main",
    "malloc",
    "_start",
    "",
    "_R",
    "_ZN",
    "_RNvC1a",
    "_RNvB_3foo",
    "_RNvC1a3fooX",
    "_R0NvC1a3foo",
    "_RNvC1a3foo.x y",
    "_RC99999999999999999999999999a",
    "_RINvC1a1fKc110000_EB2_",
    "_RINvC1a1fKcd800_EB2_",
    "_RINvC1a1fKb2_EB2_",
    "_RNvCu5zzzzz1a1f",
    "_RMC0FGZZZ_Eu",
    "_RIC0Kp_E",
};

/* A base-62 back-reference to position v. */
static size_t put_backref(char *b, uint64_t v)
{
    static const char d[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    size_t n = 0;
    b[n++] = 'B';
    if (v) {
        char t[16];
        size_t k = 0;
        for (uint64_t x = v - 1; k == 0 || x; x /= 62)
            t[k++] = d[x % 62];
        while (k)
            b[n++] = t[--k];
    }
    b[n++] = '_';
    return n;
}

static void check_bounded(const char *name)
{
    char *d = ms_demangle(name);
    if (d) {
        CHECK(strlen(d) <= MS_DEMANGLE_MAX_OUT);
        free(d);
    }
}

int main(void)
{
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        char *d = ms_demangle(known[i][0]);
        CHECK_STREQ(d, known[i][1]);
        free(d);
    }
    for (size_t i = 0; i < sizeof not_mangled / sizeof not_mangled[0]; i++) {
        char *d = ms_demangle(not_mangled[i]);
        if (d)
            fprintf(stderr, "%s -> %s\n", not_mangled[i], d);
        CHECK(d == NULL);
    }
    CHECK(ms_demangle(NULL) == NULL);
    /* ms_demangle_rust: Rust only */
    CHECK(ms_demangle_rust("_ZN3foo3barEi") == NULL);

    /* every prefix of every known name */
    static char buf[MS_DEMANGLE_MAX_IN + 64];
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        for (size_t n = 0; n < strlen(known[i][0]); n++) {
            memcpy(buf, known[i][0], n);
            buf[n] = 0;
            check_bounded(buf);
        }

    /* deep recursion: N v N v ... (a path nested 1000 deep, within MS_DEMANGLE_MAX_IN) */
    size_t n = 0;
    n += (size_t)sprintf(buf, "_R");
    for (int i = 0; i < 1000; i++)
        n += (size_t)sprintf(buf + n, "Nv");
    n += (size_t)sprintf(buf + n, "C1a");
    for (int i = 0; i < 1000; i++)
        n += (size_t)sprintf(buf + n, "1b");
    CHECK(n <= MS_DEMANGLE_MAX_IN);
    CHECK(ms_demangle(buf) == NULL);

    /* exponential output: 60 generic arguments, each a tuple of two back-references to the one
     * before it (2^60 bytes if printed): capped, NULL */
    n = (size_t)sprintf(buf, "_RINvC1a1f");
    size_t prev = n - 2;
    n += (size_t)sprintf(buf + n, "TuE");
    for (int i = 0; i < 60; i++) {
        size_t here = n - 2;
        buf[n++] = 'T';
        n += put_backref(buf + n, prev);
        n += put_backref(buf + n, prev);
        buf[n++] = 'E';
        prev = here;
    }
    buf[n++] = 'E';
    buf[n] = 0;
    CHECK(ms_demangle(buf) == NULL);
    /* the same with 3 levels: printed */
    n = (size_t)sprintf(buf, "_RINvC1a1f");
    prev = n - 2;
    n += (size_t)sprintf(buf + n, "TuE");
    for (int i = 0; i < 2; i++) {
        size_t here = n - 2;
        buf[n++] = 'T';
        n += put_backref(buf + n, prev);
        n += put_backref(buf + n, prev);
        buf[n++] = 'E';
        prev = here;
    }
    buf[n++] = 'E';
    buf[n] = 0;
    char *d = ms_demangle(buf);
    CHECK_STREQ(d, "a::f::<((),), (((),), ((),)), ((((),), ((),)), (((),), ((),)))>");
    free(d);

    /* a back-reference to itself, and forwards */
    CHECK(ms_demangle("_RINvC1a1fB9_E") == NULL);
    CHECK(ms_demangle("_RINvC1a1fBz_E") == NULL);
    /* a name longer than the cap is kept */
    memset(buf, 'a', sizeof buf);
    memcpy(buf, "_RNvC1a", 7);
    buf[MS_DEMANGLE_MAX_IN + 10] = 0;
    CHECK(ms_demangle(buf) == NULL);
    /* random bytes after "_R" and "_ZN": bounded, no crash */
    uint64_t x = 88172645463325252ull;
    for (int round = 0; round < 20000; round++) {
        size_t len = 2 + (size_t)(round % 60);
        memcpy(buf, round & 1 ? "_R" : "_ZN", round & 1 ? 2 : 3);
        for (size_t i = round & 1 ? 2 : 3; i < len; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            static const char alpha[] =
                "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_$.";
            buf[i] = alpha[x % (sizeof alpha - 1)];
        }
        buf[len] = 0;
        check_bounded(buf);
    }
    puts("test_demangle ok");
    return 0;
}

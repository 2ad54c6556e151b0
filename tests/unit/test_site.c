/* test_site.c: the call-site rule (src/analyze/site.c) as a pure function: the class of each
 * kind of frame (allocator entry points and wrappers, runtime library code, the program's own),
 * the site ms_site_pick chooses from known frame arrays (with and without line information, with
 * the user's --site-skip names), how a site frame is written, and the option's parser. */
#include "test.h"

#include "analyze/analyze.h"
#include "common/ms_error.h"

/* A frame: function, linkage, file, line, module. */
#define FR(fn, lk, file, line, mod)     \
    (struct ms_frame_info)              \
    {                                   \
        fn, lk, file, line, mod, 0x1234 \
    }

static int cls(const struct ms_site_rule *r, const char *fn, const char *mod)
{
    struct ms_frame_info f = FR(fn, NULL, NULL, 0, mod);
    return ms_site_frame_class(r, &f);
}

static void test_classes(void)
{
    const char *prog = "/usr/bin/prog";
    /* operator new/new[]: every overload, demangled or mangled, a class's own */
    CHECK_EQ(cls(NULL, "operator new(unsigned long)", prog), 2);
    CHECK_EQ(cls(NULL, "operator new[](unsigned long)", prog), 2);
    CHECK_EQ(cls(NULL, "operator new(unsigned long, std::nothrow_t const&)", prog), 2);
    CHECK_EQ(cls(NULL, "operator new[](unsigned long, std::align_val_t)", prog), 2);
    CHECK_EQ(cls(NULL, "Arena::operator new(unsigned long)", prog), 2);
    CHECK_EQ(cls(NULL, "_Znwm", prog), 2);
    CHECK_EQ(cls(NULL, "_ZnamRKSt9nothrow_t", prog), 2);
    struct ms_frame_info lk = FR(NULL, "_ZnwmSt11align_val_t", NULL, 0, prog);
    CHECK_EQ(ms_site_frame_class(NULL, &lk), 2); /* by the linkage name alone */
    CHECK_EQ(cls(NULL, "operator newline(int)", prog), 0);
    CHECK_EQ(cls(NULL, "my_operator new(int)", prog), 0);
    CHECK_EQ(cls(NULL, "operator delete(void*)", prog), 0);
    /* the documented wrappers: exact names, parameter lists, clone suffixes, prefixes */
    CHECK_EQ(cls(NULL, "xmalloc", prog), 2);
    CHECK_EQ(cls(NULL, "xmalloc.cold", prog), 2);
    CHECK_EQ(cls(NULL, "xmalloc(unsigned long)", prog), 2);
    CHECK_EQ(cls(NULL, "xmallocator", prog), 0);
    CHECK_EQ(cls(NULL, "zmalloc", prog), 2);
    CHECK_EQ(cls(NULL, "ztrymalloc_usable_internal", prog), 2);
    CHECK_EQ(cls(NULL, "g_malloc0", prog), 2);
    CHECK_EQ(cls(NULL, "g_hash_table_new", prog), 0);
    CHECK_EQ(cls(NULL, "PyMem_RawMalloc", prog), 2);
    CHECK_EQ(cls(NULL, "__rust_alloc", prog), 2);
    CHECK_EQ(cls(NULL, "CRYPTO_zalloc", "/usr/lib/libcrypto.so.3"), 2);
    CHECK_EQ(cls(NULL, "sqlite3DbMallocRawNN", prog), 2);
    CHECK_EQ(cls(NULL, "malloc", prog), 2); /* a static program's own allocator */
    /* runtime library code: by module, by function (wherever compiled), by file */
    CHECK_EQ(cls(NULL, "fopen", "/lib/x86_64-linux-gnu/libc.so.6"), 1);
    CHECK_EQ(cls(NULL, NULL, "/lib64/ld-linux-x86-64.so.2"), 1);
    CHECK_EQ(cls(NULL, "foo", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"), 1);
    CHECK_EQ(cls(NULL, "foo", "/usr/lib/libjemalloc.so.2"), 1);
    CHECK_EQ(cls(NULL, "foo", "/usr/lib/libcairo.so.2"), 0);
    CHECK_EQ(cls(NULL, "std::vector<int, std::allocator<int> >::_M_realloc_insert(int&&)", prog),
             1);
    CHECK_EQ(cls(NULL, "alloc::raw_vec::finish_grow::h0123456789abcdef", prog), 1);
    CHECK_EQ(cls(NULL, "<alloc::string::String as core::clone::Clone>::clone", prog), 1);
    /* Rust's standard library still mangled: legacy, a legacy impl, v0 */
    CHECK_EQ(cls(NULL,
                 "_ZN9hashbrown3raw21RawTable$LT$T$C$A$GT$14reserve_rehash17h627cd3fab43f3f5bE",
                 prog),
             1);
    CHECK_EQ(
        cls(NULL,
            "_ZN60_$LT$alloc..string..String$u20$as$u20$core..clone..Clone$GT$5clone17h0123456789abcdefE",
            prog),
        1);
    CHECK_EQ(cls(NULL, "_RNvNvNtCslNYArtu3iFV_5alloc3fmt6format12format_inner", prog), 1);
    CHECK_EQ(cls(NULL, "_RNvCs1234_7mycrate9build_map", prog), 0);
    CHECK_EQ(cls(NULL, "_RNCNvCs1234_7mycrate4main0", prog), 0); /* a closure of the program's */
    CHECK_EQ(cls(NULL, "_ZN7mycrate9build_map17h097360a400d51a7eE", prog), 0);
    /* a frame in the libraries' sources without a name is theirs; a named one is judged by its
     * name (a program's function whose line is library code inlined into it stays the site) */
    struct ms_frame_info rs = FR(NULL, NULL, "library/alloc/src/raw_vec.rs", 10, prog);
    CHECK_EQ(ms_site_frame_class(NULL, &rs), 1);
    struct ms_frame_info rs_named =
        FR("<mycrate::Holder as mycrate::Keep>::keep", NULL,
           "/rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library/alloc/src/raw_vec/mod.rs", 433,
           prog);
    CHECK_EQ(ms_site_frame_class(NULL, &rs_named), 0);
    struct ms_frame_info hdr = FR(NULL, NULL, "/usr/include/c++/12/bits/stl_vector.h", 1287, prog);
    CHECK_EQ(ms_site_frame_class(NULL, &hdr), 1);
    struct ms_frame_info hdr_std = FR("std::vector<int, std::allocator<int> >::push_back(int&&)",
                                      NULL, "/usr/include/c++/12/bits/stl_vector.h", 1287, prog);
    CHECK_EQ(ms_site_frame_class(NULL, &hdr_std), 1);
    struct ms_frame_info ms = FR("memscope_tag", NULL, "/opt/include/memscope.h", 40, prog);
    CHECK_EQ(ms_site_frame_class(NULL, &ms), 1);
    /* the user's names */
    struct ms_site_rule r = {0};
    char err[256];
    CHECK_EQ(ms_site_rule_add(&r, "my_alloc,pool_*", err, sizeof err), 0);
    CHECK_EQ(r.nskip, 2);
    CHECK_EQ(cls(&r, "my_alloc(unsigned long)", prog), 2);
    CHECK_EQ(cls(&r, "my_alloc.constprop.0", prog), 2);
    CHECK_EQ(cls(&r, "my_allocator", prog), 0);
    CHECK_EQ(cls(&r, "pool_get", prog), 2);
    CHECK_EQ(cls(NULL, "my_alloc(unsigned long)", prog), 0);
    ms_site_rule_release(&r);
    CHECK_EQ(r.nskip, 0);
}

static void test_pick(void)
{
    char out[256];
    /* a C++ program without debug information: operator new in libstdc++, then the caller */
    struct ms_frame_info nodebug[] = {
        FR("operator new(unsigned long)", "_Znwm", NULL, 0, "/lib/libstdc++.so.6"),
        FR("make_tree()", "_Z9make_treev", NULL, 0, "/usr/bin/prog"),
        FR("main", NULL, NULL, 0, "/usr/bin/prog"),
        FR("__libc_start_main", NULL, NULL, 0, "/lib/libc.so.6"),
    };
    CHECK_EQ(ms_site_pick(NULL, nodebug, 4), 1);
    ms_site_frame_format(&nodebug[1], out, sizeof out);
    CHECK_STREQ(out, "make_tree() (prog)");
    /* the same with debug information: the same frame, with its line */
    struct ms_frame_info debug[] = {
        FR("operator new(unsigned long)", "_Znwm", NULL, 0, "/lib/libstdc++.so.6"),
        FR("std::__new_allocator<int>::allocate(unsigned long, void const*)", NULL,
           "/usr/include/c++/12/bits/new_allocator.h", 147, "/usr/bin/prog"),
        FR("make_tree()", "_Z9make_treev", "/src/tree.cc", 12, "/usr/bin/prog"),
        FR("main", NULL, "/src/main.cc", 3, "/usr/bin/prog"),
    };
    CHECK_EQ(ms_site_pick(NULL, debug, 4), 2);
    ms_site_frame_format(&debug[2], out, sizeof out);
    CHECK_STREQ(out, "make_tree() (/src/tree.cc:12)");
    /* a wrapper of the program's own: its caller only when named */
    struct ms_frame_info wrapped[] = {
        FR("my_alloc(unsigned long)", NULL, NULL, 0, "/usr/bin/prog"),
        FR("load()", NULL, NULL, 0, "/usr/bin/prog"),
    };
    CHECK_EQ(ms_site_pick(NULL, wrapped, 2), 0);
    struct ms_site_rule r = {0};
    char err[256];
    CHECK_EQ(ms_site_rule_add(&r, "my_alloc", err, sizeof err), 0);
    CHECK_EQ(ms_site_pick(&r, wrapped, 2), 1);
    ms_site_rule_release(&r);
    /* a frame without a symbol is the program's code */
    struct ms_frame_info nosym[] = {
        FR("xmalloc", NULL, NULL, 0, "/usr/bin/prog"),
        FR(NULL, NULL, NULL, 0, "/usr/lib/libfoo.so.1"),
    };
    CHECK_EQ(ms_site_pick(NULL, nosym, 2), 1);
    ms_site_frame_format(&nosym[1], out, sizeof out);
    CHECK_STREQ(out, "?? (libfoo.so.1+0x1234)");
    /* a library without its internal symbols: the named function of the library that led to
     * the unnamed frames stands for them, not a function of another module */
    struct ms_frame_info stripped[] = {
        FR("operator new(unsigned long)", NULL, NULL, 0, "/lib/libstdc++.so.6"),
        FR(NULL, NULL, NULL, 0, "/usr/lib/libclang.so"),
        FR(NULL, NULL, NULL, 0, "/usr/lib/libclang.so"),
        FR("clang::Sema::Parse()", NULL, NULL, 0, "/usr/lib/libclang.so"),
        FR("main", NULL, NULL, 0, "/usr/bin/clang"),
    };
    CHECK_EQ(ms_site_pick(NULL, stripped, 5), 3);
    stripped[3].module = "/usr/lib/libother.so"; /* the run of libclang's frames ends unnamed */
    CHECK_EQ(ms_site_pick(NULL, stripped, 5), 1);
    stripped[3].module = "/usr/lib/libclang.so";
    stripped[3].function = "xmalloc"; /* a named wrapper above: the unnamed frame */
    CHECK_EQ(ms_site_pick(NULL, stripped, 5), 1);
    /* only runtime library frames: the first of them, not the allocator entry point */
    struct ms_frame_info startup[] = {
        FR("operator new(unsigned long)", NULL, NULL, 0, "/lib/libstdc++.so.6"),
        FR("pool_ctor", NULL, NULL, 0, "/lib/libstdc++.so.6"),
        FR("_dl_init", NULL, NULL, 0, "/lib64/ld-linux-x86-64.so.2"),
    };
    CHECK_EQ(ms_site_pick(NULL, startup, 3), 1);
    /* only wrappers: the innermost; no frames: none */
    CHECK_EQ(ms_site_pick(NULL, startup, 1), 0);
    CHECK_EQ(ms_site_pick(NULL, startup, 0), -1);
    /* in no module */
    struct ms_frame_info jit = FR(NULL, NULL, NULL, 0, NULL);
    ms_site_frame_format(&jit, out, sizeof out);
    CHECK_STREQ(out, "?? (0x1234)");
}

static void test_option(void)
{
    struct ms_site_rule r = {0};
    char err[256];
    CHECK_EQ(ms_site_rule_add(&r, "", err, sizeof err), MS_EINVAL);
    CHECK(strstr(err, "bad function name"));
    CHECK_EQ(ms_site_rule_add(&r, "a,,b", err, sizeof err), MS_EINVAL);
    CHECK_EQ(ms_site_rule_add(&r, "*", err, sizeof err), MS_EINVAL);
    CHECK_EQ(ms_site_rule_add(&r, "a,", err, sizeof err), MS_EINVAL);
    ms_site_rule_release(&r);
    CHECK_EQ(ms_site_rule_add(&r, "a,b*", err, sizeof err), 0);
    CHECK_EQ(r.nskip, 2);
    CHECK_STREQ(r.skip[1], "b*");
    ms_site_rule_release(&r);
}

int main(void)
{
    test_classes();
    test_pick();
    test_option();
    puts("test_site ok");
    return 0;
}

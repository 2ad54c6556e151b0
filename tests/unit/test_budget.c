/* test_budget.c: the size rule (common/size.c), the budgets' values and layer names, the gates'
 * thresholds and LeakSanitizer's pattern match and file format (src/analyze/budget.c,
 * suppress.c): known answers, and the bad input each must refuse. */
#include "test.h"

#include "analyze/budget.h"
#include "common/ms_error.h"
#include "common/size.h"

#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

static uint64_t size_of(const char *s)
{
    uint64_t v = 0;
    CHECK_EQ(ms_size_parse(s, &v), 0);
    return v;
}

static void test_size(void)
{
    CHECK_EQ(size_of("0"), 0);
    CHECK_EQ(size_of("4096"), 4096);
    CHECK_EQ(size_of("24 MB"), 24ull << 20);
    CHECK_EQ(size_of("100 KB"), 102400);
    CHECK_EQ(size_of("100kb"), 102400);
    CHECK_EQ(size_of("1.5GiB"), 3ull << 29);
    CHECK_EQ(size_of(" +2 MiB "), 2ull << 20);
    CHECK_EQ(size_of("3 k"), 3072);
    CHECK_EQ(size_of("7B"), 7);
    CHECK_EQ(size_of(".5 KB"), 512);
    CHECK_EQ(size_of("1 TB"), 1ull << 40);
    const char *bad[] = {"",        " ",   "MB",     "12 parsecs", "-5",   "1e3",
                         "0x10",    "inf", "5 MB x", "1 MiBs",     "8 EB", "9999999999 PB",
                         "1..5 MB", NULL};
    for (size_t i = 0; bad[i]; i++) {
        uint64_t v = 42;
        if (ms_size_parse(bad[i], &v) != MS_EINVAL) {
            fprintf(stderr, "accepted '%s'\n", bad[i]);
            CHECK(0);
        }
        CHECK_EQ(v, 42);
    }
    CHECK_EQ(ms_size_parse(NULL, NULL), MS_EINVAL);
}

static void test_budget_values(void)
{
    struct ms_budget b;
    char err[400];
    CHECK_EQ(ms_budget_parse(&b, "1MiB", err, sizeof err), 0);
    CHECK_EQ(b.limit, 1 << 20);
    CHECK_STREQ(b.layer, "");
    CHECK_EQ(ms_budget_parse(&b, "2 GB:cuda", err, sizeof err), 0);
    CHECK_EQ(b.limit, 2ull << 30);
    CHECK_STREQ(b.layer, "cuda");
    CHECK_EQ(ms_budget_parse(&b, "0:cuda:3", err, sizeof err), 0);
    CHECK_STREQ(b.layer, "cuda:3");
    CHECK_EQ(ms_budget_parse(&b, "1K:pool:arena", err, sizeof err), 0);
    CHECK_STREQ(b.layer, "pool:arena");
    CHECK_EQ(ms_budget_parse(&b, "12 parsecs", err, sizeof err), MS_EINVAL);
    CHECK(strstr(err, "'12 parsecs' is not a size"));
    CHECK_EQ(ms_budget_parse(&b, "1MiB:gpu", err, sizeof err), MS_EINVAL);
    CHECK(strstr(err, "unknown layer 'gpu'"));
    const char *known[] = {"heap",        "HEAP", "mmap",          "cuda", "cuda:0", "cuda:63",
                           "cuda_pool:1", "pta",  "pta_segment:0", "pool", "pool:x", "cuda_pinned",
                           "HAL",         NULL};
    for (size_t i = 0; known[i]; i++)
        CHECK(ms_budget_layer_known(known[i]));
    const char *unknown[] = {"",      "gpu",    "cuda:", "cuda:x", "cuda:123",
                             "pool:", "heap:0", "cudax", NULL};
    for (size_t i = 0; unknown[i]; i++)
        CHECK(!ms_budget_layer_known(unknown[i]));
    struct ms_gate g;
    CHECK_EQ(ms_gate_parse(&g, 1, "10%", err, sizeof err), 0);
    CHECK(g.pct && g.threshold == 10.0 && g.is_peak);
    CHECK_EQ(ms_gate_parse(&g, 0, "1 MiB", err, sizeof err), 0);
    CHECK(!g.pct && g.threshold == 1048576.0 && !g.is_peak);
    CHECK_EQ(ms_gate_parse(&g, 0, "-3%", err, sizeof err), MS_EINVAL);
    CHECK_EQ(ms_gate_parse(&g, 0, "%", err, sizeof err), MS_EINVAL);
    CHECK_EQ(ms_gate_parse(&g, 0, "lots", err, sizeof err), MS_EINVAL);
}

static void test_match(void)
{
    CHECK(ms_suppression_match("third_party", "my_third_party_cache"));
    CHECK(ms_suppression_match("^third_party", "third_party_cache"));
    CHECK(!ms_suppression_match("^third_party", "my_third_party_cache"));
    CHECK(ms_suppression_match("cache$", "third_party_cache"));
    CHECK(!ms_suppression_match("cache$", "cache_fill"));
    CHECK(ms_suppression_match("^libfoo*.so$", "libfoo.so"));
    CHECK(ms_suppression_match("^libfoo*.so$", "libfoo-1.2.so"));
    CHECK(!ms_suppression_match("^libfoo*.so$", "/usr/lib/libfoo.so"));
    CHECK(ms_suppression_match("lib*/foo.c", "/src/lib/x/foo.c"));
    CHECK(ms_suppression_match("*", "anything"));
    CHECK(!ms_suppression_match("x", NULL));
    CHECK(!ms_suppression_match("a*a*a*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"));
}

static void test_file(void)
{
    char path[] = "/tmp/ms_test_supp_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs("# LeakSanitizer's format\n\n  leak:third_party_*  \nleak:^libfoo.so$\n", f);
    fclose(f);
    struct ms_suppressions s = {0};
    char err[600];
    CHECK_EQ(ms_suppressions_load(&s, path, err, sizeof err), 0);
    CHECK_EQ(s.n, 2);
    CHECK_STREQ(s.v[0].pattern, "third_party_*");
    CHECK_EQ(s.v[0].line, 3);
    CHECK_STREQ(s.v[1].pattern, "^libfoo.so$");
    ms_suppressions_release(&s);
    const char *bad[] = {"leak:ok\nrace:x\n", "leak:\n", "just a pattern\n", NULL};
    const char *why[] = {":2: unknown suppression kind 'race'", ":1: empty pattern",
                         ":1: expected KIND:PATTERN"};
    for (size_t i = 0; bad[i]; i++) {
        f = fopen(path, "w");
        fputs(bad[i], f);
        fclose(f);
        CHECK_EQ(ms_suppressions_load(&s, path, err, sizeof err), MS_EINVAL);
        CHECK(strstr(err, why[i]));
        ms_suppressions_release(&s);
    }
    unlink(path);
    CHECK_EQ(ms_suppressions_load(&s, path, err, sizeof err), MS_ENOTFOUND);
    CHECK(strstr(err, "cannot read suppressions file"));
}

int main(void)
{
    test_size();
    test_budget_values();
    test_match();
    test_file();
    puts("test_budget ok");
    return 0;
}

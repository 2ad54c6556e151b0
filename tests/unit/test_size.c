/* test_size.c: src/common/size.c, the one rule sizes written by people are read by: the units
 * (powers of 1024, any case, KB as KiB), fractions rounded down to whole bytes, blanks and a
 * leading '+', and what is refused (no number, a sign '-', an unknown unit, text after the unit,
 * 2^63 bytes or more). */
#include "test.h"

#include "common/ms_error.h"
#include "common/size.h"

#include <stdint.h>

static uint64_t ok(const char *s)
{
    uint64_t v = 12345;
    int rc = ms_size_parse(s, &v);
    if (rc != 0)
        fprintf(stderr, "ms_size_parse(\"%s\") = %d\n", s, rc);
    CHECK_EQ(rc, 0);
    return v;
}

static void refused(const char *s)
{
    uint64_t v = 12345;
    int rc = ms_size_parse(s, &v);
    if (rc != MS_EINVAL)
        fprintf(stderr, "ms_size_parse(\"%s\") = %d, %llu\n", s ? s : "(null)", rc,
                (unsigned long long)v);
    CHECK_EQ(rc, MS_EINVAL);
    CHECK_EQ(v, 12345); /* left alone */
}

int main(void)
{
    CHECK_EQ(ok("4096"), 4096);
    CHECK_EQ(ok("0"), 0);
    CHECK_EQ(ok("1."), 1);
    CHECK_EQ(ok("12B"), 12);
    CHECK_EQ(ok("24 MB"), 24ull << 20);
    CHECK_EQ(ok("24 mb"), 24ull << 20);
    CHECK_EQ(ok("24MiB"), 24ull << 20);
    CHECK_EQ(ok("24M"), 24ull << 20);
    CHECK_EQ(ok("1.5GiB"), 1610612736ull);
    CHECK_EQ(ok(" +2k "), 2048);
    CHECK_EQ(ok("\t3\tKB\t"), 3072);
    CHECK_EQ(ok(".5k"), 512);
    CHECK_EQ(ok("1.25kb"), 1280);
    CHECK_EQ(ok("0.5 B"), 0);            /* rounded down */
    CHECK_EQ(ok("1.0009765625k"), 1025); /* 1 KiB + 1/1024 KiB */
    CHECK_EQ(ok("2 TiB"), 2ull << 40);
    CHECK_EQ(ok("7 P"), 7ull << 50);
    CHECK_EQ(ok("8191 PiB"), 8191ull << 50); /* the largest whole PiB under 2^63 */
    CHECK_EQ(ok("9223372036854775807"), INT64_MAX);

    refused(NULL);
    refused("");
    refused("   ");
    refused("MB");
    refused("-1");
    refused("+-1");
    refused("1e3");
    refused("0x10");
    refused("inf");
    refused("12 XB");
    refused("8 EiB");
    refused("1 MB x");
    refused("1 2");
    refused("8192 P");              /* 2^63 */
    refused("9223372036854775808"); /* 2^63 */
    refused("99999999999999999999");
    return 0;
}

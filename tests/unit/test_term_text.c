/* test_term_text.c: common/term_text.c, the escape of program-made text for a terminal (issue
 * 37 item 10): known answers for each class of byte, the cut of a long text, and the ring of
 * buffers ms_term_text hands out. */
#include "common/term_text.h"
#include "test.h"

static void test_escape(void)
{
    char out[256];
    /* plain text, UTF-8 letters and a backslash pass as they are */
    ms_term_escape(out, sizeof out, "alloc (a.c:3) caf\xc3\xa9 \xe2\x82\xac \\x");
    CHECK_STREQ(out, "alloc (a.c:3) caf\xc3\xa9 \xe2\x82\xac \\x");
    /* C0 controls, DEL */
    ms_term_escape(out, sizeof out, "a\x1b[2Jb\x07\r\n\t\x7f\x01");
    CHECK_STREQ(out, "a\\x1b[2Jb\\x07\\r\\n\\t\\x7f\\x01");
    /* C1 controls written in UTF-8 (CSI U+009B, OSC U+009D), U+00A0 is not one */
    ms_term_escape(out, sizeof out,
                   "\xc2\x9b"
                   "31m\xc2\x9d\xc2\xa0");
    CHECK_STREQ(out, "\\u009b31m\\u009d\xc2\xa0");
    /* bytes that are not UTF-8: a lone 8-bit CSI, a cut sequence, an overlong '/', a surrogate */
    ms_term_escape(out, sizeof out,
                   "\x9b"
                   "2J\xe2\x82 \xc0\xaf \xed\xa0\x80");
    CHECK_STREQ(out, "\\x9b2J\\xe2\\x82 \\xc0\\xaf \\xed\\xa0\\x80");
    /* cut short: never a half escape, ends in "..." */
    char small[12];
    CHECK_EQ(ms_term_escape(small, sizeof small, "abcd\x1b\x1b\x1b"), 11);
    CHECK_STREQ(small, "abcd\\x1b...");
    CHECK_EQ(ms_term_escape(small, sizeof small, "abcdefg"), 7);
    CHECK_STREQ(small, "abcdefg");
}

static void test_ring(void)
{
    const char *plain = "no escape";
    CHECK(ms_term_text(plain) == plain); /* nothing to escape: the same string */
    CHECK(ms_term_text(NULL) == NULL);
    const char *v[8];
    char in[8][8];
    for (int i = 0; i < 8; i++) {
        snprintf(in[i], sizeof in[i], "%d\n", i);
        v[i] = ms_term_text(in[i]);
    }
    for (int i = 0; i < 8; i++) { /* eight at once stay valid (one printf's arguments) */
        char want[8];
        snprintf(want, sizeof want, "%d\\n", i);
        CHECK_STREQ(v[i], want);
    }
    char big[10000];
    memset(big, '\n', sizeof big - 1);
    big[sizeof big - 1] = 0;
    const char *b = ms_term_text(big);
    CHECK(strlen(b) < 4096 && !strcmp(b + strlen(b) - 3, "..."));
}

int main(void)
{
    test_escape();
    test_ring();
    puts("test_term_text ok");
    return 0;
}

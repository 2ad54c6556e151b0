/* test.h: the unit tests' assertion macros. A failed check prints file:line and what it saw,
 * and exits non-zero, so ctest reports the test as failed. */
#ifndef MS_TEST_H
#define MS_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                                          \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);         \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

#define CHECK_EQ(a, b)                                                                       \
    do {                                                                                     \
        long long check_a_ = (long long)(a), check_b_ = (long long)(b);                      \
        if (check_a_ != check_b_) {                                                          \
            fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %s (%lld != %lld)\n", __FILE__,   \
                    __LINE__, #a, #b, check_a_, check_b_);                                   \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

#define CHECK_STREQ(a, b)                                                                    \
    do {                                                                                     \
        const char *check_a_ = (a), *check_b_ = (b);                                         \
        if (!check_a_ || !check_b_ || strcmp(check_a_, check_b_) != 0) {                     \
            fprintf(stderr, "%s:%d: CHECK_STREQ failed: %s == %s\n--- got:\n%s\n--- want:\n%s\n", \
                    __FILE__, __LINE__, #a, #b, check_a_ ? check_a_ : "(null)",              \
                    check_b_ ? check_b_ : "(null)");                                         \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

#endif

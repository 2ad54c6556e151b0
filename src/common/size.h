/* size.h: sizes written by people ("24 MB", "1.5GiB", "4096"), the one rule every command
 * and option of memscope reads them by (docs/ci.md, "Sizes"). */
#ifndef MS_SIZE_H
#define MS_SIZE_H

#include <stdint.h>

/* Parses s: a decimal number (digits, optionally a fraction), optional blanks, and an optional
 * unit, any case: B; K, KB, KiB; M, MB, MiB; G, GB, GiB; T, TB, TiB; P, PB, PiB. Every unit is
 * a power of 1024, KB as KiB: pytest-memray's convention, which its users' marker strings
 * follow. Leading and trailing blanks and a leading '+' are allowed. The result is rounded down
 * to whole bytes. Returns 0 with *out set, or MS_EINVAL (no number, a sign '-', an unknown unit,
 * anything after the unit, 2^63 bytes or more). */
int ms_size_parse(const char *s, uint64_t *out);

#endif

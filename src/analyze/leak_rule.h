/* leak_rule.h: the growth rule's verdict on one call site (docs/analyses.md, leaks part 0), as
 * pure functions over the caller's array, shared by `memscope analyze leaks` (leaks.c) and the
 * in-process MemoryLeakDetector (live.c, through memscope._store): one rule in one place. */
#ifndef MS_LEAK_RULE_H
#define MS_LEAK_RULE_H

#include <stddef.h>
#include <stdint.h>

/* The growth rule's test of persistence on held[first..last]: the bytes a site still holds at
 * the end (of the last step, or at a peak), by the step end (or tenth) they were allocated by,
 * a running total. The intervals first+1..last are split in two halves (the first half the
 * smaller); the site leaks when held rose in at least a third of the intervals of each half.
 * Blocks freed before the end, however late, are not held: a bounded queue, a cache that is
 * trimmed, garbage that a collector frees later hold only blocks of the last few steps, so
 * held rises at the end only; a leak holds blocks from all along, even one that leaks every
 * second or third step. *rises: the intervals in which held rose. */
static inline int ms_leak_steady_growth(const int64_t *held, size_t first, size_t last,
                                        size_t *rises)
{
    size_t m = last - first, h1 = m / 2, r1 = 0, r2 = 0;
    for (size_t k = first + 1; k <= last; k++) {
        if (held[k] > held[k - 1])
            *(k - first <= h1 ? &r1 : &r2) += 1;
    }
    *rises = r1 + r2;
    return h1 >= 2 && 3 * r1 >= h1 && 3 * r2 >= m - h1;
}

/* The growth rule on one site (or owner) over the step ends after the warm-up, when there are
 * at least MS_LEAK_MIN_JUDGED intervals between them: a bounded queue of d steps rises in the last d
 * intervals only, which ms_leak_steady_growth tells from a leak when d is at most half of them (a
 * DataLoader with 2 workers holds 4 batches). */
#define MS_LEAK_MIN_JUDGED 8
/* A site that grows steadily by less than this percent of its (process, layer) peak over the
 * judged steps is not called a leak: in a short run a cache that fills until its bound (as
 * torch.multiprocessing's shared_cache of DataLoader batches, 128 entries) cannot be told from
 * a leak, and a growth too small to move the peak is not what the user looks for. */
#define MS_LEAK_MIN_GROWTH_PCT 1

/* Clears the verdict of a steady growth of grown bytes that is too small against peak. */
static inline void ms_leak_too_small(int *leak, int *small, int64_t grown, int64_t peak)
{
    if (*leak && grown * 100 < peak * MS_LEAK_MIN_GROWTH_PCT) {
        *leak = 0;
        *small = 1;
    }
}
#endif

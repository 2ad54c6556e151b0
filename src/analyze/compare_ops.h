/* compare_ops.h: the op-sequence part of `memscope analyze compare` (compare_ops.c), private
 * to src/analyze: compare.c reads two sequences, diffs them and reports. */
#ifndef MS_ANALYZE_COMPARE_OPS_H
#define MS_ANALYZE_COMPARE_OPS_H

#include "analyze.h"

#include <stddef.h>
#include <stdint.h>

struct op {
    char *name;
    long long bytes; /* bytes allocated between its RANGE_START and RANGE_END (inclusive of
                        nested ops), on its thread, in the analysed layers */
    int64_t end_id;  /* its RANGE_END event; 0 while open */
};

struct opseq {
    struct op *v;
    size_t n, cap;
};

/* One line of the op diff: a in base (or -1), b in compare (or -1). */
struct edit {
    long a, b;
};

struct ops_summary {
    size_t matched, only_a, only_b;
    size_t *differ; /* positions in the edit script: unmatched, or matched with a diff */
    size_t ndiffer;
};

void opseq_release(struct opseq *s);
/* 1 when db has ranges (ops marked with memscope_range_push/pop). */
int has_ranges(sqlite3 *db);
/* The ops of db (of step `step` when > 0: those whose RANGE_END falls in it), in end order, with
 * the bytes allocated in each; 0 or a negative code with err set. */
int load_ops(sqlite3 *db, const struct ms_analyze_opts *o, int step, struct opseq *out, char *err,
             size_t errlen);
/* The edit script from A to B in *out (n *nout); 0 or MS_ENOMEM. */
int op_diff(const struct opseq *A, const struct opseq *B, struct edit **out, size_t *nout);
/* msMemScope's memory_compare CSV at path; 0 or a negative code with err set. */
int write_csv(const char *path, const struct opseq *A, const struct opseq *B, const struct edit *ed,
              size_t ne, char *err, size_t errlen);
/* B's bytes - A's bytes of an edit (an op missing on one side counts 0 there), of the
 * sequences given to the last summarize_ops(). */
long long edit_diff(const struct edit *e);
/* Counts of matched and one-sided ops, and the differing edits ordered for the report. */
int summarize_ops(const struct opseq *A, const struct opseq *B, const struct edit *ed, size_t ne,
                  struct ops_summary *sm);

#endif

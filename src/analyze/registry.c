/* registry.c: the table of analyses, in the order `analyze all` runs them. Each analysis file
 * defines its run function; a missing one is simply not listed here yet. */
#include "analyze.h"

#include <stddef.h>

int ms_analyze_leaks(sqlite3 *, const struct ms_analyze_opts *, FILE *, char *, size_t);
int ms_analyze_peak(sqlite3 *, const struct ms_analyze_opts *, FILE *, char *, size_t);
int ms_analyze_compare(sqlite3 *, const struct ms_analyze_opts *, FILE *, char *, size_t);
int ms_analyze_inefficient(sqlite3 *, const struct ms_analyze_opts *, FILE *, char *, size_t);
int ms_analyze_decompose(sqlite3 *, const struct ms_analyze_opts *, FILE *, char *, size_t);
int ms_analyze_temporary(sqlite3 *, const struct ms_analyze_opts *, FILE *, char *, size_t);
int ms_analyze_trend(sqlite3 *, const struct ms_analyze_opts *, FILE *, char *, size_t);
int ms_analyze_fragmentation(sqlite3 *, const struct ms_analyze_opts *, FILE *, char *, size_t);

/* NEEDSWORK: entries are added as the analyses land. */
const struct ms_analysis ms_analyses[] = {
    {NULL, NULL, NULL},
};

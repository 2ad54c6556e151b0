/* registry.c: the table of analyses, in the order `analyze all` runs them. */
#include "analyze.h"

#include <stddef.h>

static int always(sqlite3 *db, const struct ms_analyze_opts *o)
{
    (void)db;
    (void)o;
    return 1;
}

/* compare reads site_stats, whose owners are those at allocation */
static int compare_compact(sqlite3 *db, const struct ms_analyze_opts *o)
{
    return (!o->step_a && !o->other_db) || !ms__retagged(db);
}

const struct ms_analysis ms_analyses[] = {
    {"leaks", "call sites whose live bytes keep growing; live at exit; growth per step",
     ms_analyze_leaks, always},
    {"peak", "the moment of peak live bytes per process and layer, and what was live then",
     ms_analyze_peak, always},
    {"compare", "two steps (--steps A,B) or two runs (--with other.db), by call site and owner",
     ms_analyze_compare, compare_compact},
    {"inefficient", "early allocation, late deallocation, temporary idleness; Insight thresholds",
     ms_analyze_inefficient, always},
    {"decompose", "the owner tree at a time, a step end or the peak; live bytes per owner",
     ms_analyze_decompose, always},
    {"temporary", "allocations freed with no other allocation in between, by call site",
     ms_analyze_temporary, always},
    {"trend", "live bytes over time and per step, growth rate, time to reach --limit",
     ms_analyze_trend, always},
    {"fragmentation", "pool layers: reserved vs used, largest free extent, fragmentation",
     ms_analyze_fragmentation, always},
    {"oom", "CUDA out-of-memory: what was live at each OOM, by layer, owner and call site",
     ms_analyze_oom, always},
    {"usage", "RSS, PSS, USS, stack, shared memory beside live bytes; allocator retention",
     ms_analyze_usage, always},
    {NULL, NULL, NULL, NULL},
};

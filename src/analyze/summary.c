/* summary.c: the summary `memscope run` prints after the database is written: events and
 * processes, each used layer's allocations, frees, peak and what is still live at exit, and the
 * call sites holding the most memory at exit (one line per site over all processes). An
 * analysis like the others (called by the CLI's cmd_run.c); reads the database with a few
 * aggregate queries. */

#include "analyze.h"
#include "common/db_ids.h"
#include "common/term_text.h"

#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

int ms_analyze_summary(const char *db_path, FILE *out)
{
    sqlite3 *db;
    if (sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        sqlite3_close(db);
        return -1;
    }
    sqlite3_stmt *st;
    char a[32], b[32];
    const char *q1 =
        "SELECT l.name, count(DISTINCT s.process_id), sum(s.allocs), sum(s.frees), "
        "sum(s.alloc_bytes), max(s.peak_bytes), sum(s.live_bytes), sum(s.live_blocks), "
        "sum(s.unmatched_frees) FROM process_stats s JOIN layers l ON l.id = s.layer "
        "GROUP BY s.layer ORDER BY s.layer";
    long long nproc = 0, nev = 0;
    if (sqlite3_prepare_v2(db,
                           "SELECT (SELECT count(*) FROM processes), COALESCE((SELECT value "
                           "FROM meta WHERE key = 'event_count'), (SELECT max(id) FROM "
                           "events))",
                           -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
        nproc = sqlite3_column_int64(st, 0);
        nev = sqlite3_column_int64(st, 1);
    }
    sqlite3_finalize(st);
    fprintf(out, "memscope: %lld event%s from %lld process%s\n", nev, nev == 1 ? "" : "s", nproc,
            nproc == 1 ? "" : "es");
    struct ms_sampling smp;
    ms_sampling_read(db, &smp);
    if (smp.bytes) { /* docs/production.md, "Sampling" */
        char note[128];
        ms_sampling_note(&smp, note, sizeof note);
        ms_human_bytes(a, sizeof a, (long long)smp.alloc_bytes);
        fprintf(out, "  %s\n  heap exactly: %llu allocations (%s), %llu frees\n", note,
                (unsigned long long)smp.allocs, a, (unsigned long long)smp.frees);
    }
    if (sqlite3_prepare_v2(db, q1, -1, &st, NULL) == SQLITE_OK) {
        while (sqlite3_step(st) == SQLITE_ROW) {
            if (sqlite3_column_int64(st, 2) == 0 && sqlite3_column_int64(st, 3) == 0)
                continue; /* a layer the program did not use */
            ms_human_bytes(a, sizeof a, sqlite3_column_int64(st, 4));
            ms_human_bytes(b, sizeof b, sqlite3_column_int64(st, 5));
            const char *lname = (const char *)sqlite3_column_text(st, 0);
            int est = smp.bytes && lname && !strcmp(lname, "heap");
            fprintf(out, "  %-5s %lld %sallocations (%s%s), %lld frees, peak %s%s live",
                    ms_term_text(lname), sqlite3_column_int64(st, 2), est ? "sampled " : "",
                    est ? "est. " : "", a, sqlite3_column_int64(st, 3), est ? "est. " : "", b);
            if (sqlite3_column_int64(st, 1) > 1)
                fputs(" (largest process)", out);
            fputc('\n', out);
            ms_human_bytes(a, sizeof a, sqlite3_column_int64(st, 6));
            fprintf(out, "        still live at exit: %s in %lld block%s\n", a,
                    sqlite3_column_int64(st, 7), sqlite3_column_int64(st, 7) == 1 ? "" : "s");
        }
    }
    sqlite3_finalize(st);
    /* Stacks are per process: the same call site in several processes (fork, exec) is one line,
     * naming the process when there is one, else how many. Reserved address space is no
     * memory (docs/database.md, "The mmap layer"). */
    const char *q2 =
        "SELECT sum(b.size), count(*), b.stack_id, p.pid FROM blocks b JOIN processes p "
        "ON p.id = b.process_id WHERE b.free_ns IS NULL AND b.layer != " MS_SQL_LAYER_MMAP_RESERVE
        " GROUP BY b.stack_id "
        "ORDER BY sum(b.size) DESC LIMIT 200";
    struct site_line {
        char site[160];
        long long bytes, blocks, pid[8];
        int procs;
    } lines[200];
    int nlines = 0, nprocs = 0;
    sqlite3_stmt *pc;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM processes", -1, &pc, NULL) == SQLITE_OK &&
        sqlite3_step(pc) == SQLITE_ROW)
        nprocs = sqlite3_column_int(pc, 0);
    sqlite3_finalize(pc);
    if (sqlite3_prepare_v2(db, q2, -1, &st, NULL) == SQLITE_OK) {
        while (sqlite3_step(st) == SQLITE_ROW) {
            char site[160];
            ms_stack_site(
                db, sqlite3_column_type(st, 2) != SQLITE_NULL ? sqlite3_column_int64(st, 2) : 0,
                site, sizeof site);
            int k = 0;
            while (k < nlines && strcmp(lines[k].site, site))
                k++;
            if (k == nlines) {
                if (nlines == 200)
                    continue;
                snprintf(lines[k].site, sizeof lines[k].site, "%s", site);
                lines[k].bytes = lines[k].blocks = 0;
                lines[k].procs = 0;
                nlines++;
            }
            lines[k].bytes += sqlite3_column_int64(st, 0);
            lines[k].blocks += sqlite3_column_int64(st, 1);
            long long pid = sqlite3_column_int64(st, 3);
            int seen = 0;
            for (int i = 0; i < lines[k].procs && i < 8 && !seen; i++)
                seen = lines[k].pid[i] == pid;
            if (!seen) { /* distinct processes (counted up to 8, then "8+") */
                if (lines[k].procs < 8)
                    lines[k].pid[lines[k].procs] = pid;
                if (lines[k].procs < 9)
                    lines[k].procs++;
            }
        }
    }
    sqlite3_finalize(st);
    for (int shown = 0; shown < 5 && nlines; shown++) {
        int best = 0;
        for (int k = 1; k < nlines; k++)
            if (lines[k].bytes > lines[best].bytes)
                best = k;
        if (lines[best].bytes < 0)
            break;
        if (shown == 0)
            fputs("  top call sites of memory still live at exit:\n", out);
        ms_human_bytes(a, sizeof a, lines[best].bytes);
        fprintf(out, "    %10s in %5lld block%s  %s", a, lines[best].blocks,
                lines[best].blocks == 1 ? " " : "s", ms_term_text(lines[best].site));
        if (nprocs > 1 && lines[best].procs == 1)
            fprintf(out, "  (pid %lld)", lines[best].pid[0]);
        else if (nprocs > 1)
            fprintf(out, "  (%s%d processes)", lines[best].procs > 8 ? "more than " : "",
                    lines[best].procs > 8 ? 8 : lines[best].procs);
        fputc('\n', out);
        lines[best].bytes = -1;
    }
    /* Programs the run started that wrote no trace (table untraced, docs/database.md): none of
     * their memory is in the database, which the reader must know. */
    if (sqlite3_prepare_v2(db,
                           "SELECT pid, path, reason, (SELECT count(*) FROM untraced) FROM "
                           "untraced ORDER BY id LIMIT 5",
                           -1, &st, NULL) == SQLITE_OK) {
        for (int k = 0; sqlite3_step(st) == SQLITE_ROW; k++) {
            long long total = sqlite3_column_int64(st, 3);
            if (k == 0)
                fprintf(out,
                        "memscope: %lld program%s started by the program ran untraced (not in "
                        "the database; table untraced):\n",
                        total, total == 1 ? "" : "s");
            fprintf(out, "  %s (pid %lld): %s\n",
                    ms_term_text((const char *)sqlite3_column_text(st, 1)),
                    sqlite3_column_int64(st, 0),
                    ms_term_text((const char *)sqlite3_column_text(st, 2)));
            if (k == 4 && total > 5)
                fprintf(out, "  ... %lld more\n", total - 5);
        }
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return 0;
}

/* run_list.c: runs a list of analyses on one database and writes one report. Used by
 * `memscope analyze <kind>|all` and by `memscope run --analysis=leaks,peak` at the end of a run.
 *
 * Text: one analysis writes its report as is; several write theirs one after the other, each
 * under a "=== memscope analyze <name> ===" line. JSON: one analysis writes its document; several
 * (or "all") write {"<name>": <its document>, ...}, each analysis rendered into memory first so
 * that a failing one becomes {"error": "..."} instead of a broken document. */
#include "analyze.h"

#include "common/ms_error.h"
#include "store/store.h"

#include <stdlib.h>
#include <string.h>

/* Runs analysis a on db with a context of its own. */
static int run_plain(const struct ms_analysis *a, sqlite3 *db, const struct ms_analyze_opts *o,
                     FILE *out, char *err, size_t errlen)
{
    struct ms_actx x;
    int rc = ms__actx_init(&x, a->name, db, o, out, err, errlen);
    if (rc == 0)
        rc = a->run(&x);
    ms__actx_release(&x);
    return rc;
}

/* run_plain(), and for a sampled run (docs/production.md, "Sampling") the report says so: a
 * "note: sampled at ..." line first, or in JSON a "sampling" member first in the analysis's
 * object ({"bytes": B, "estimates": true, and the exact heap counts}). The report is rendered
 * into memory first, so that a failure still writes nothing. */
static int run_one(const struct ms_analysis *a, sqlite3 *db, const struct ms_analyze_opts *o,
                   FILE *out, char *err, size_t errlen)
{
    struct ms_sampling smp;
    ms_sampling_read(db, &smp);
    if (!smp.bytes)
        return run_plain(a, db, o, out, err, errlen);
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (!mem) {
        return ms_errf(err, errlen, MS_ENOMEM, "out of memory");
    }
    int rc = run_plain(a, db, o, mem, err, errlen);
    if (fclose(mem) != 0 && rc == 0) {
        snprintf(err, errlen, "out of memory");
        rc = MS_ENOMEM;
    }
    if (rc == 0) {
        size_t i = 0;
        while (o->json && i < len && buf[i] != '{')
            i++;
        if (!o->json || i == len) { /* text (or a document that is not an object) */
            char note[128];
            ms_sampling_note(&smp, note, sizeof note);
            if (!o->json)
                fprintf(out, "note: %s\n", note);
            fwrite(buf, 1, len, out);
        } else {
            size_t j = i + 1;
            while (j < len && (buf[j] == ' ' || buf[j] == '\n'))
                j++;
            fwrite(buf, 1, i + 1, out);
            fprintf(out,
                    "\"sampling\":{\"bytes\":%llu,\"estimates\":true,\"heap_allocs_exact\":%llu,"
                    "\"heap_alloc_bytes_exact\":%llu,\"heap_frees_exact\":%llu}%s",
                    (unsigned long long)smp.bytes, (unsigned long long)smp.allocs,
                    (unsigned long long)smp.alloc_bytes, (unsigned long long)smp.frees,
                    j < len && buf[j] == '}' ? "" : ",");
            fwrite(buf + i + 1, 1, len - i - 1, out);
        }
    }
    free(buf);
    return rc;
}

#define MAX_LIST 32

/* The message without a leading "<name>: " (the report already names the analysis). */
static const char *bare(const char *msg, const char *name, int rc)
{
    size_t n = strlen(name);
    if (!msg[0])
        return ms_strerror(rc);
    if (!strncmp(msg, name, n) && msg[n] == ':' && msg[n + 1] == ' ')
        return msg + n + 2;
    return msg;
}

/* Parses names into list (entries of ms_analyses[]). Returns the count or MS_EINVAL. */
static int parse_names(const char *names, const struct ms_analysis **list, int *all, char *err,
                       size_t errlen)
{
    int n = 0;
    *all = 0;
    const char *p = names ? names : "";
    while (*p) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char name[64];
        if (len == 0 || len >= sizeof name) {
            return ms_errf(err, errlen, MS_EINVAL, "bad analysis list '%s'", names);
        }
        memcpy(name, p, len);
        name[len] = 0;
        if (!strcmp(name, "all")) {
            *all = 1;
            for (const struct ms_analysis *a = ms_analyses; a->name; a++)
                if (a->run && n < MAX_LIST)
                    list[n++] = a;
        } else {
            const struct ms_analysis *a = ms_analysis_find(name);
            if (!a) {
                int known = 0;
                for (const struct ms_analysis *b = ms_analyses; b->name; b++)
                    known |= !strcmp(b->name, name);
                if (known) {
                    snprintf(err, errlen, "analysis '%s' is not available in this build", name);
                } else {
                    size_t w = (size_t)snprintf(err, errlen, "unknown analysis '%s' (known:", name);
                    for (const struct ms_analysis *b = ms_analyses; b->name && w < errlen; b++)
                        if (b->run)
                            w += (size_t)snprintf(err + w, errlen - w, " %s", b->name);
                    if (w < errlen)
                        snprintf(err + w, errlen - w, ", all)");
                }
                return MS_EINVAL;
            }
            int dup = 0;
            for (int i = 0; i < n; i++)
                dup |= list[i] == a;
            if (!dup && n < MAX_LIST)
                list[n++] = a;
        }
        p += len;
        if (*p == ',')
            p++;
    }
    if (n == 0) {
        return ms_errf(err, errlen, MS_EINVAL, "no analysis named");
    }
    return n;
}

/* The databases the analyses of one list read: the one given, and for an analysis that cannot
 * read a compact database as it is with its options (compare of a database whose owners a tag
 * changed), its full database, expanded on first need into a private temporary directory. The
 * analyses that write (inefficient --write-back) read the compact database as it is. */
struct dbs {
    const char *path;
    sqlite3 *db;   /* the database given */
    int compact;   /* it is a compact database */
    sqlite3 *full; /* its expansion, NULL until needed */
    struct ms_store_full f;
};

static int run_all(struct dbs *d, const struct ms_analysis **list, int n, int all,
                   const struct ms_analyze_opts *o, FILE *out, char *err, size_t errlen);

/* The database analysis a reads; NULL with err set when the expansion failed. */
static sqlite3 *db_for(struct dbs *d, const struct ms_analysis *a, const struct ms_analyze_opts *o,
                       int *rc, char *err, size_t errlen)
{
    if (!d->compact || (a->compact && a->compact(d->db, o)))
        return d->db;
    if (!d->full && ((*rc = ms_store_full_open(&d->f, d->path, err, errlen)) < 0 ||
                     (*rc = ms_analyze_open(d->f.path, 0, &d->full, err, errlen)) < 0))
        return NULL;
    return d->full;
}

int ms_analyze_run_list(const char *db_path, const char *names, const struct ms_analyze_opts *o,
                        FILE *out, char *err, size_t errlen)
{
    const struct ms_analysis *list[MAX_LIST];
    int all;
    err[0] = 0;
    int n = parse_names(names, list, &all, err, errlen);
    if (n < 0)
        return n;
    struct dbs d = {.path = db_path, .f = {.dir = ""}};
    int rc = ms_analyze_open(db_path, o->write_back, &d.db, err, errlen);
    if (rc < 0)
        return rc;
    d.compact = ms_store_is_compact(d.db);
    rc = run_all(&d, list, n, all, o, out, err, errlen);
    sqlite3_close(d.db);
    sqlite3_close(d.full);
    ms_store_full_close(&d.f);
    return rc;
}

static int run_all(struct dbs *d, const struct ms_analysis **list, int n, int all,
                   const struct ms_analyze_opts *o, FILE *out, char *err, size_t errlen)
{
    int rc = 0;
    sqlite3 *db;
    if (n == 1 && !all)
        return (db = db_for(d, list[0], o, &rc, err, errlen))
                   ? run_one(list[0], db, o, out, err, errlen)
                   : rc;
    int first_rc = 0;
    char one_err[512];
    if (o->json)
        fputc('{', out);
    for (int i = 0; i < n; i++) {
        one_err[0] = 0;
        if (o->json) {
            char *buf = NULL;
            size_t len = 0;
            FILE *mem = open_memstream(&buf, &len);
            if (!mem) {
                return ms_errf(err, errlen, MS_ENOMEM, "out of memory");
            }
            rc = (db = db_for(d, list[i], o, &rc, one_err, sizeof one_err))
                     ? run_one(list[i], db, o, mem, one_err, sizeof one_err)
                     : rc;
            fclose(mem);
            /* Names are plain identifiers: no escaping needed for the key. */
            fprintf(out, "%s\"%s\":", i ? "," : "", list[i]->name);
            if (rc < 0) {
                struct ms_json j;
                ms_json_init(&j, out);
                ms_json_begin_object(&j, NULL);
                ms_json_str(&j, all && rc == MS_EINVAL ? "skipped" : "error",
                            bare(one_err, list[i]->name, rc));
                ms_json_end_object(&j);
            } else {
                /* The analysis's own document, without its final newline. */
                while (len && (buf[len - 1] == '\n' || buf[len - 1] == ' '))
                    len--;
                if (len)
                    fwrite(buf, 1, len, out);
                else
                    fputs("null", out);
            }
            free(buf);
        } else {
            fprintf(out, "%s=== memscope analyze %s ===\n", i ? "\n" : "", list[i]->name);
            fflush(out);
            rc = (db = db_for(d, list[i], o, &rc, one_err, sizeof one_err))
                     ? run_one(list[i], db, o, out, one_err, sizeof one_err)
                     : rc;
            if (rc < 0)
                fprintf(out, "%s: %s: %s\n", list[i]->name,
                        all && rc == MS_EINVAL ? "skipped" : "error",
                        bare(one_err, list[i]->name, rc));
        }
        /* `all` runs every analysis with the options given: one that needs an option it did
         * not get (compare without --steps or --with) is reported as skipped, not failed. */
        if (all && rc == MS_EINVAL)
            rc = 0;
        if (rc < 0 && !first_rc) {
            first_rc = rc;
            snprintf(err, errlen, "%s", one_err[0] ? one_err : ms_strerror(rc));
        }
    }
    if (o->json)
        fputs("}\n", out);
    return first_rc;
}

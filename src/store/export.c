/* export.c: the memscope database -> msMemScope's memscope_dump CSV (ms_store_export_csv).
 *
 * Called by `memscope export --format=csv`. Workload: one sequential scan of events (millions of
 * rows). The small tables (event kinds, layers, processes, threads, stacks) are loaded into
 * arrays indexed by id first, each stack's quoted C-stack field is built once, and rows are
 * formatted by hand into a 64 KiB buffer: the scan is the only per-row database work.
 * The columns are those of the memscope_dump view (docs/database.md); keep them in step. */
#include "store.h"

#include "common/ms_error.h"
#include "common/db_schema.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SMALL_ID (1 << 16) /* event kinds and layers */
#define MAX_ID (1 << 26)       /* processes, threads, stacks: ids past this are refused */

static const char csv_header[] = "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,"
                                 "Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)\n";

struct out {
    FILE *f;
    size_t len;
    int failed;
    char buf[1 << 16];
};

static void out_flush(struct out *o)
{
    if (o->len && fwrite(o->buf, 1, o->len, o->f) != o->len)
        o->failed = 1;
    o->len = 0;
}

static void out_add(struct out *o, const char *s, size_t n)
{
    if (o->len + n > sizeof o->buf) {
        out_flush(o);
        if (n > sizeof o->buf) {
            if (fwrite(s, 1, n, o->f) != n)
                o->failed = 1;
            return;
        }
    }
    memcpy(o->buf + o->len, s, n);
    o->len += n;
}

static void out_str(struct out *o, const char *s)
{
    out_add(o, s, strlen(s));
}

static void out_i64(struct out *o, int64_t v)
{
    char tmp[24], *p = tmp + sizeof tmp;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do
        *--p = (char)('0' + u % 10);
    while (u /= 10);
    if (v < 0)
        *--p = '-';
    out_add(o, p, (size_t)(tmp + sizeof tmp - p));
}

static void out_ptr(struct out *o, int64_t v)
{
    static const char hex[] = "0123456789abcdef";
    char tmp[18] = {'0', 'x'};
    uint64_t u = (uint64_t)v;
    for (int i = 17; i >= 2; i--, u >>= 4)
        tmp[i] = hex[u & 15];
    out_add(o, tmp, sizeof tmp);
}

/* Appends s as a CSV field body with quotes doubled (the caller writes the quotes). */
static void out_escaped(struct out *o, const char *s)
{
    for (const char *q; (q = strchr(s, '"'));) {
        out_add(o, s, (size_t)(q - s) + 1);
        out_add(o, "\"", 1);
        s = q + 1;
    }
    out_str(o, s);
}

/* Text the program chose (a name, a stack) that a spreadsheet would read as a formula: it
 * starts with =, +, -, @, a tab or a carriage return, after any number of single quotes. Such
 * a field is written with one more single quote in front (OWASP's advice for CSV injection;
 * docs/cli.md), which a spreadsheet shows as text; readers take one quote off again
 * (memscope.analyzer), and the quotes before the character keep that reversible. */
static int formula_like(const char *s)
{
    while (*s == '\'')
        s++;
    return *s && strchr("=+-@\t\r", *s) != NULL;
}

/* Appends s as a CSV field, quoted only when it needs to be (a formula_like s defused). */
static void out_field(struct out *o, const char *s)
{
    const char *defuse = formula_like(s) ? "'" : "";
    if (!strpbrk(s, ",\"\n\r")) {
        out_str(o, defuse);
        out_str(o, s);
        return;
    }
    out_add(o, "\"", 1);
    out_str(o, defuse);
    out_escaped(o, s);
    out_add(o, "\"", 1);
}

/* Appends s as a quoted CSV field (a formula_like s defused). */
static void out_quoted(struct out *o, const char *s)
{
    out_add(o, "\"", 1);
    out_str(o, formula_like(s) ? "'" : "");
    out_escaped(o, s);
    out_add(o, "\"", 1);
}

struct exp {
    sqlite3 *db;
    char *err;
    size_t errlen;
    char **kinds, **layers, **stacks, **pystacks; /* by id; stacks hold finished CSV fields */
    char **devices;                               /* by layer id: its Device Id */
    int64_t *pids, *tids;
    size_t nkinds, nlayers, nstacks, npystacks, npids, ntids, ndevices;
};

static int fail(struct exp *e, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(struct exp *e, int rc, const char *fmt, ...)
{
    if (e->err && e->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->err, e->errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

static int db_fail(struct exp *e, const char *what)
{
    return fail(e, MS_EDB, "%s: %s", what, sqlite3_errmsg(e->db));
}

/* Loads "SELECT id, value" rows into an array by id: strings (quote = 0: as is, 1: as a quoted
 * CSV field) when strs is non-NULL, else integers into ints. */
static int load(struct exp *e, const char *sql, size_t max_id, char ***strs, int quote,
                int64_t **ints, size_t *n)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(e->db, sql, -1, &st, NULL) != SQLITE_OK)
        return db_fail(e, "cannot read the database");
    int rc = 0, step;
    size_t cap = 0;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(st, 0);
        if (id < 0 || (uint64_t)id >= max_id) {
            rc = fail(e, MS_ELIMIT, "database id %lld is out of range", (long long)id);
            break;
        }
        if ((size_t)id >= cap) {
            size_t nc = cap ? cap : 64;
            while (nc <= (size_t)id)
                nc *= 2;
            void *p =
                strs ? realloc(*strs, nc * sizeof **strs) : realloc(*ints, nc * sizeof **ints);
            if (!p) {
                rc = fail(e, MS_ENOMEM, "out of memory");
                break;
            }
            if (strs) {
                *strs = p;
                memset(*strs + cap, 0, (nc - cap) * sizeof **strs);
            } else {
                *ints = p;
                for (size_t i = cap; i < nc; i++)
                    (*ints)[i] = -1;
            }
            cap = nc;
        }
        if (id >= (int64_t)*n)
            *n = (size_t)id + 1;
        if (!strs) {
            (*ints)[id] = sqlite3_column_int64(st, 1);
            continue;
        }
        const char *text = (const char *)sqlite3_column_text(st, 1);
        if (!text)
            text = "";
        char *v;
        if (!quote || !text[0]) {
            v = strdup(text);
        } else {
            size_t len = strlen(text), q = 0;
            for (const char *s = text; (s = strchr(s, '"')); s++)
                q++;
            v = malloc(len + q + 4);
            if (v) {
                char *p = v;
                *p++ = '"';
                if (formula_like(text))
                    *p++ = '\'';
                for (const char *s = text; *s; s++) {
                    *p++ = *s;
                    if (*s == '"')
                        *p++ = '"';
                }
                *p++ = '"';
                *p = 0;
            }
        }
        if (!v) {
            rc = fail(e, MS_ENOMEM, "out of memory");
            break;
        }
        free((*strs)[id]);
        (*strs)[id] = v;
    }
    if (rc == 0 && step != SQLITE_DONE)
        rc = db_fail(e, "cannot read the database");
    sqlite3_finalize(st);
    return rc;
}

int ms_store_check_version(sqlite3 *db, char *err, size_t errlen)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = 'format_version'", -1, &st,
                           NULL) != SQLITE_OK) {
        return ms_errf(err, errlen, MS_EFORMAT, "not a memscope database (%s)", sqlite3_errmsg(db));
    }
    int rc = 0;
    if (sqlite3_step(st) != SQLITE_ROW) {
        snprintf(err, errlen, "not a memscope database (no format_version)");
        rc = MS_EFORMAT;
    } else {
        long long v = sqlite3_column_int64(st, 0);
        if (v > MS_DB_FORMAT_VERSION) {
            snprintf(err, errlen,
                     "database format version %lld is newer than this memscope "
                     "reads (%d)",
                     v, MS_DB_FORMAT_VERSION);
            rc = MS_EVERSION;
        } else if (v < 1) {
            snprintf(err, errlen, "not a memscope database (format_version %lld)", v);
            rc = MS_EFORMAT;
        }
    }
    sqlite3_finalize(st);
    return rc;
}

static int has_column(sqlite3 *db, const char *table, const char *col);

int ms_store_check_sizes(sqlite3 *db, char *err, size_t errlen)
{
    static const char *const cols[][2] = {
        {"events", "size"},
        {"blocks", "size"},
        {"process_stats", "alloc_bytes"},
        {"process_stats", "peak_bytes"},
        {"process_stats", "live_bytes"},
        {"site_stats", "alloc_bytes"},
        {"site_stats", "temporary_bytes"},
        {"site_stats", "live_bytes"},
        {"live_samples", "live_bytes"},
        {"step_live", "live_bytes"},
        {"decompose_live", "live_bytes"},
        {"owner_peaks", "peak_bytes"},
        {"host_peaks", "peak_bytes"},
    };
    int rc = 0;
    for (size_t i = 0; i < sizeof cols / sizeof cols[0] && rc == 0; i++) {
        if (!has_column(db, cols[i][0], cols[i][1]))
            continue; /* an older memscope's database, or a table this run has not */
        char *sql = sqlite3_mprintf("SELECT \"%w\" FROM \"%w\" WHERE \"%w\" < 0 LIMIT 1",
                                    cols[i][1], cols[i][0], cols[i][1]);
        sqlite3_stmt *st;
        int prc = sql ? sqlite3_prepare_v2(db, sql, -1, &st, NULL) : SQLITE_NOMEM;
        sqlite3_free(sql);
        if (prc != SQLITE_OK)
            continue;
        if (sqlite3_step(st) == SQLITE_ROW) {
            snprintf(err, errlen, "damaged database: %s.%s holds a negative size (%lld)",
                     cols[i][0], cols[i][1], (long long)sqlite3_column_int64(st, 0));
            rc = MS_EFORMAT;
        }
        sqlite3_finalize(st);
    }
    return rc;
}

static int check_version(struct exp *e)
{
    int rc = ms_store_check_version(e->db, e->err, e->errlen);
    return rc ? rc : ms_store_check_sizes(e->db, e->err, e->errlen);
}

static const char *str_at(char **a, size_t n, int64_t id)
{
    return id >= 0 && (size_t)id < n && a[id] ? a[id] : NULL;
}

static int64_t int_at(const int64_t *a, size_t n, int64_t id)
{
    return id >= 0 && (size_t)id < n ? a[id] : -1;
}

/* Whether table has a column named col (a database of an older memscope may not). */
static int has_column(sqlite3 *db, const char *table, const char *col)
{
    sqlite3_stmt *st;
    int found = 0;
    if (sqlite3_prepare_v2(db, "SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2", -1, &st,
                           NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, col, -1, SQLITE_STATIC);
        found = sqlite3_step(st) == SQLITE_ROW;
    }
    sqlite3_finalize(st);
    return found;
}

static int write_rows(struct exp *e, FILE *f)
{
    struct out *o = malloc(sizeof *o);
    if (!o)
        return fail(e, MS_ENOMEM, "out of memory");
    o->f = f;
    o->len = 0;
    o->failed = 0;
    sqlite3_stmt *st;
    /* The rows of memscope_dump (common/db_schema.c): address-space and PyTorch-segment layers of a
     * device are left out there, and so here. A database written before events.attr and
     * layers.device existed has neither. */
    int new_db = has_column(e->db, "events", "attr") && has_column(e->db, "layers", "device");
    if (sqlite3_prepare_v2(e->db,
                           new_db
                               ? "SELECT e.id, e.kind, e.layer, e.ts_ns, e.process_id, "
                                 "e.thread_id, e.addr, e.size, e.func, e.stack_id, "
                                 "e.allocation_id, e.name, e.flags, o.label, "
                                 "(SELECT group_concat(key || ':' || value, ',') FROM "
                                 "json_each(e.attr)) FROM events e JOIN layers l ON l.id = "
                                 "e.layer LEFT JOIN blocks b ON e.kind = 1 AND b.allocation_id = "
                                 "e.allocation_id LEFT JOIN owners o ON o.id = b.owner_id WHERE "
                                 "NOT (l.device IS NOT NULL AND l.event_type IN ('VMM_RESERVE', "
                                 "'VMM_MAP', 'PTA_SEGMENT', 'MMAP_RESERVE')) ORDER BY e.id"
                               : "SELECT e.id, e.kind, e.layer, e.ts_ns, e.process_id, "
                                 "e.thread_id, e.addr, e.size, e.func, e.stack_id, "
                                 "e.allocation_id, e.name, e.flags, o.label, NULL FROM events e "
                                 "LEFT JOIN blocks b ON e.kind = 1 AND b.allocation_id = "
                                 "e.allocation_id LEFT JOIN owners o ON o.id = b.owner_id ORDER BY "
                                 "e.id",
                           -1, &st, NULL) != SQLITE_OK) {
        free(o);
        return db_fail(e, "cannot read events");
    }
    int rc = 0, step;
    out_str(o, csv_header);
    while ((step = sqlite3_step(st)) == SQLITE_ROW && !o->failed) {
        int64_t id = sqlite3_column_int64(st, 0);
        const char *kind = str_at(e->kinds, e->nkinds, sqlite3_column_int64(st, 1));
        const char *type = str_at(e->layers, e->nlayers, sqlite3_column_int64(st, 2));
        const char *layer_type = type; /* an ACCESS row's Attr type: the block's pool */
        int64_t pid = int_at(e->pids, e->npids, sqlite3_column_int64(st, 4));
        int64_t tid = int_at(e->tids, e->ntids, sqlite3_column_int64(st, 5));
        if (!kind || !type || pid < 0 || tid < 0) {
            rc = fail(e, MS_EFORMAT,
                      "event %lld refers to a missing kind, layer, process or "
                      "thread",
                      (long long)id);
            break;
        }
        int64_t addr = sqlite3_column_int64(st, 6);
        int64_t k = sqlite3_column_int64(st, 1);
        const char *name = (const char *)sqlite3_column_text(st, 11);
        if (k == MS_KIND_MARK && ms_own_mark(name))
            continue; /* memscope's own bookkeeping, as memscope_dump leaves it out */
        int annotation = k >= MS_KIND_STEP && k <= MS_KIND_RANGE_END;
        int device_event = k >= MS_KIND_OOM && k <= MS_KIND_DEVICE_USAGE;
        static const char *const ann_event[] = {"SYSTEM", "MSTX", "MSTX", "MSTX"};
        static const char *const ann_type[] = {"STEP", "Mark", "Range_start", "Range_end"};
        const char *device = str_at(e->devices, e->ndevices, sqlite3_column_int64(st, 2));
        const char *extra = (const char *)sqlite3_column_text(st, 14); /* k:v,k:v */
        if (k == MS_KIND_OOM || k == MS_KIND_OOM_RECENT || k == MS_KIND_OOM_TOP) {
            type = k == MS_KIND_OOM ? "OOM_TRIGGER" : kind; /* the kind's name */
            kind = "OOM_DETAIL";
        } else if (k == MS_KIND_KERNEL_LAUNCH) {
            type = "KERNEL_LAUNCH";
        } else if (k == MS_KIND_DEVICE_USAGE) {
            kind = "SYSTEM";
            type = "DEVICE_USAGE";
        } else if ((k == MS_KIND_RANGE_START || k == MS_KIND_RANGE_END) && ms_aten_range(name)) {
            kind = "OP_LAUNCH"; /* a PyTorch op, as msMemScope writes it (db_ids.h) */
            type = k == MS_KIND_RANGE_START ? "ATEN_START" : "ATEN_END";
        } else if (annotation) {
            kind = ann_event[k - MS_KIND_STEP];
            type = ann_type[k - MS_KIND_STEP];
        } else if (k == MS_KIND_ACCESS) {
            int flags = sqlite3_column_int(st, 12);
            type = flags & 2 ? "WRITE" : flags & 1 ? "READ" : "UNKNOWN";
        }
        out_i64(o, id);
        out_add(o, ",", 1);
        out_field(o, kind);
        out_add(o, ",", 1);
        out_field(o, type);
        out_add(o, ",", 1);
        if (!name)
            out_str(o, "N/A");
        else if (!strcmp(kind, "OP_LAUNCH")) {
            int quote = strpbrk(name, ",\"\n\r") != NULL;
            out_str(o, quote ? "\"torch._ops.aten." : "torch._ops.aten.");
            out_escaped(o, name + 6);
            out_str(o, strchr(name + 6, '.') ? "" : ".default");
            out_str(o, quote ? "\"" : "");
        } else if (k >= MS_KIND_MARK && k <= MS_KIND_RANGE_END)
            out_quoted(o, name); /* msMemScope quotes MSTX names */
        else
            out_field(o, name);
        out_add(o, ",", 1);
        out_i64(o, sqlite3_column_int64(st, 3));
        out_add(o, ",", 1);
        out_i64(o, pid);
        out_add(o, ",", 1);
        out_i64(o, tid);
        out_add(o, ",", 1);
        out_str(o, device ? device : "N/A");
        out_add(o, ",", 1);
        if (annotation) {
            out_str(o, "N/A,\"{}\",,\n");
            continue;
        }
        if (device_event) {
            out_str(o, "N/A,\"{");
            if (extra)
                out_escaped(o, extra);
            out_str(o, "}\",");
        } else {
            out_ptr(o, addr);
            /* Attr: msMemScope's unquoted-key form; NULL members are left out, as in the view. */
            out_add(o, ",\"{", 3);
            int sep = 0;
            if (sqlite3_column_type(st, 10) != SQLITE_NULL) {
                out_str(o, "allocation_id:");
                out_i64(o, sqlite3_column_int64(st, 10));
                sep = 1;
            }
            out_str(o, sep ? ",addr:" : "addr:");
            out_ptr(o, addr);
            if (sqlite3_column_type(st, 7) != SQLITE_NULL) {
                out_str(o, ",size:");
                out_i64(o, sqlite3_column_int64(st, 7));
            }
            if (k == MS_KIND_ACCESS) {
                out_str(o, ",type:");
                out_escaped(o, layer_type);
            }
            const char *func = (const char *)sqlite3_column_text(st, 8);
            if (func) {
                out_str(o, ",func:");
                out_escaped(o, func);
            }
            const char *owner = (const char *)sqlite3_column_text(st, 13);
            if (owner) {
                out_str(o, ",owner:");
                out_escaped(o, owner);
            }
            if (extra) {
                out_add(o, ",", 1);
                out_escaped(o, extra);
            }
            out_add(o, "}\",", 3);
        }
        if (sqlite3_column_type(st, 9) != SQLITE_NULL) {
            const char *py = str_at(e->pystacks, e->npystacks, sqlite3_column_int64(st, 9));
            if (py)
                out_str(o, py);
        }
        out_add(o, ",", 1);
        if (sqlite3_column_type(st, 9) != SQLITE_NULL) {
            const char *stack = str_at(e->stacks, e->nstacks, sqlite3_column_int64(st, 9));
            if (stack)
                out_str(o, stack);
        }
        out_add(o, "\n", 1);
    }
    if (rc == 0 && !o->failed && step != SQLITE_DONE)
        rc = db_fail(e, "cannot read events");
    if (rc == 0)
        out_flush(o);
    if (rc == 0 && (o->failed || fflush(f) != 0 || ferror(f)))
        rc = fail(e, -(errno ? errno : EIO), "cannot write the CSV: %s",
                  strerror(errno ? errno : EIO));
    sqlite3_finalize(st);
    free(o);
    return rc;
}

static int export_full(const char *db_path, FILE *out, char *err, size_t errlen);

int ms_store_export_csv(const char *db_path, FILE *out, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = 0;
    struct ms_store_full full; /* a compact database: its events from the traces it holds */
    int rc = ms_store_full_open(&full, db_path, err, errlen);
    if (rc == 0)
        rc = export_full(full.path, out, err, errlen);
    ms_store_full_close(&full);
    return rc;
}

static int export_full(const char *db_path, FILE *out, char *err, size_t errlen)
{
    struct exp e;
    memset(&e, 0, sizeof e);
    e.err = err;
    e.errlen = errlen;
    if (sqlite3_open_v2(db_path, &e.db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        int rc = fail(&e, MS_EIO, "cannot open database %s: %s", db_path,
                      e.db ? sqlite3_errmsg(e.db) : "out of memory");
        sqlite3_close(e.db);
        return rc;
    }
    int rc = check_version(&e);
    if (rc == 0)
        rc = load(&e, "SELECT id, name FROM event_kinds", MAX_SMALL_ID, &e.kinds, 0, NULL,
                  &e.nkinds);
    if (rc == 0)
        rc = load(&e, "SELECT id, event_type FROM layers", MAX_SMALL_ID, &e.layers, 0, NULL,
                  &e.nlayers);
    if (rc == 0) /* a database of an older memscope has no layers.device: its rows read N/A */
        rc = load(&e,
                  has_column(e.db, "layers", "device")
                      ? "SELECT id, COALESCE(device, 'N/A') FROM layers"
                      : "SELECT id, 'N/A' FROM layers",
                  MAX_SMALL_ID, &e.devices, 0, NULL, &e.ndevices);
    if (rc == 0)
        rc = load(&e, "SELECT id, pid FROM processes", MAX_ID, NULL, 0, &e.pids, &e.npids);
    if (rc == 0)
        rc = load(&e, "SELECT id, tid FROM threads", MAX_ID, NULL, 0, &e.tids, &e.ntids);
    if (rc == 0)
        rc = load(&e, "SELECT id, c_text FROM stacks", MAX_ID, &e.stacks, 1, NULL, &e.nstacks);
    if (rc == 0)
        rc = load(&e, "SELECT id, py_text FROM stacks", MAX_ID, &e.pystacks, 1, NULL, &e.npystacks);
    if (rc == 0)
        rc = write_rows(&e, out);
    char **arrays[] = {e.kinds, e.layers, e.stacks, e.pystacks, e.devices};
    size_t counts[] = {e.nkinds, e.nlayers, e.nstacks, e.npystacks, e.ndevices};
    for (size_t a = 0; a < sizeof arrays / sizeof arrays[0]; a++) {
        for (size_t i = 0; arrays[a] && i < counts[a]; i++)
            free(arrays[a][i]);
        free(arrays[a]);
    }
    free(e.pids);
    free(e.tids);
    sqlite3_close(e.db);
    return rc;
}

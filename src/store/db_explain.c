/* db_explain.c: tells a damaged or truncated database from a file that never was one (see
 * db_explain.h). Called after a database failed to open or to read its meta table, so it may
 * take its time: it reads the SQLite header (the page size and the page count the last writer
 * recorded, https://sqlite.org/fileformat.html, "The Database Header") against the file's
 * size, then asks SQLite, read-only, what it finds. */
#include "db_explain.h"

#include "common/ms_error.h"
#include "trace/format.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Whether b[0..n) reads as text: UTF-8 with no control byte but tab, newline, CR, FF. */
static int is_text(const unsigned char *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = b[i];
        if (c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f')
            return 0;
        if (c == 0x7f)
            return 0;
        if (c >= 0x80) { /* a UTF-8 sequence (one cut by the 512-byte window passes) */
            int k = (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : -1;
            if (k < 0)
                return 0;
            for (int j = 1; j <= k && i + j < n; j++)
                if ((b[i + j] & 0xc0) != 0x80)
                    return 0;
            i += (size_t)k;
        }
    }
    return 1;
}

const char *ms_file_kind(const char *path)
{
    struct stat st;
    if (stat(path, &st) < 0)
        return "unreadable";
    if (S_ISDIR(st.st_mode))
        return "a directory";
    if (!S_ISREG(st.st_mode))
        return "not a regular file";
    if (st.st_size == 0)
        return "an empty file";
    unsigned char b[512];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? pread(fd, b, sizeof b, 0) : -1;
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return "unreadable";
    size_t len = (size_t)n;
    if (len >= 16 && !memcmp(b, "SQLite format 3", 16))
        return "an SQLite database";
    if (len >= 8 && !memcmp(b, MS_TRACE_MAGIC, 8))
        return "a memscope trace file";
    if (b[0] == 0x80) /* PROTO: a pickle of protocol 2 or later (PyTorch's are) */
        return "a pickle";
    size_t i = 0;
    while (i < len && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t'))
        i++;
    if (i < len && (b[i] == '{' || b[i] == '['))
        return "a JSON file";
    if (is_text(b, len))
        return "a text file";
    return "binary data";
}

int ms_db_explain(const char *path, char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st) < 0) {
        return ms_errf(err, errlen, MS_ENOTFOUND, "cannot open '%s': %s", path, strerror(errno));
    }
    const char *kind = ms_file_kind(path);
    if (strcmp(kind, "an SQLite database") != 0) {
        return ms_errf(err, errlen, MS_EFORMAT, "'%s' is not a memscope database: it is %s", path,
                       kind);
    }
    /* The header: page size at 16 (1 means 65536), the page count at 28, valid when the
     * change counter at 24 equals the version-valid-for number at 92. */
    unsigned char h[100];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? pread(fd, h, sizeof h, 0) : -1;
    if (fd >= 0)
        close(fd);
    if (n < (ssize_t)sizeof h) {
        return ms_errf(
            err, errlen, MS_EFORMAT,
            "'%s' is damaged: truncated to %lld bytes, inside its header (a copy or write "
            "cut short)",
            path, (long long)st.st_size);
    }
    uint32_t page = (uint32_t)h[16] << 8 | h[17];
    if (page == 1)
        page = 65536;
    uint64_t pages = be32(h + 28), size = (uint64_t)st.st_size;
    int valid = pages && be32(h + 24) == be32(h + 92) && page >= 512 && !(page & (page - 1));
    if (valid && size < pages * page) {
        return ms_errf(err, errlen, MS_EFORMAT,
                       "'%s' is damaged: truncated to %llu of its %llu bytes (a copy or write cut "
                       "short)",
                       path, (unsigned long long)size, (unsigned long long)(pages * page));
    }
    if (page >= 512 && !(page & (page - 1)) && size % page) {
        return ms_errf(err, errlen, MS_EFORMAT,
                       "'%s' is damaged: truncated (%llu bytes, not a whole number of its %u-byte "
                       "pages)",
                       path, (unsigned long long)size, page);
    }
    /* The size is right: what SQLite finds. */
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = 'format_version'", -1, &q,
                                NULL);
    int step = rc == SQLITE_OK ? sqlite3_step(q) : rc;
    const char *msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    if (step == SQLITE_ROW || step == SQLITE_DONE)
        snprintf(err, errlen,
                 "'%s' is not a memscope database: it is an SQLite database whose meta table "
                 "has no format_version >= 1",
                 path);
    else if (rc == SQLITE_ERROR && strstr(msg, "no such table"))
        snprintf(err, errlen,
                 "'%s' is not a memscope database: it is an SQLite database without memscope's "
                 "meta table",
                 path);
    else
        snprintf(err, errlen, "'%s' is damaged (SQLite: %s)", path, msg);
    sqlite3_finalize(q);
    sqlite3_close(db);
    return MS_EFORMAT;
}

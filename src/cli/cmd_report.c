/* cmd_report.c: `memscope report RUN.db [-o RUN.html]`: the viewer's page as one self-contained
 * HTML file (src/view/report.h) to mail or attach, written to a temporary file renamed into
 * place (a failed write leaves nothing). */
#include "cli.h"

#include "common/files.h"
#include "common/ms_error.h"
#include "view/report.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char report_usage[] =
    "usage: memscope report RUN.db|TRACE_DIR|SNAPSHOT [-o FILE.html] [--site-skip=NAME,...]\n"
    "  Writes the viewer's page (memory over time, flame graphs of allocation stacks, the\n"
    "  largest blocks and the owners at a set of times, the peak's and the leaks' sites) as\n"
    "  one HTML file that any browser opens without a server or a network: under 5 MB\n"
    "  whatever the run's size. Default output: RUN.html beside the database. A trace\n"
    "  directory or a PyTorch memory snapshot is converted first (into a temporary file).\n"
    "  -o, --output FILE   write the report there\n"
    "  --site-skip=NAME[,NAME...]   call sites skip these functions too (memscope analyze)\n";

int cmd_report(int argc, char **argv)
{
    const char *db = NULL, *out = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(report_usage, stdout);
            return 0;
        }
        if (!strncmp(a, "--site-skip", 11) && (a[11] == '=' || (!a[11] && i + 1 < argc))) {
            int rc = cli_site_skip("report", "--site-skip", a[11] ? a + 12 : argv[++i]);
            if (rc)
                return rc;
            continue;
        }
        if ((!strcmp(a, "-o") || !strcmp(a, "--output")) && i + 1 < argc)
            out = argv[++i];
        else if (!strncmp(a, "--output=", 9))
            out = a + 9;
        else if (a[0] == '-' && a[1])
            return usage_error("report: unknown option '%s'", a);
        else if (db)
            return usage_error("report: one database at a time ('%s' and '%s')", db, a);
        else
            db = a;
    }
    if (!db)
        return usage_error("report: which database? (memscope report RUN.db -o RUN.html)");
    char def[4096];
    if (!out) {
        size_t n = strlen(db);
        while (n > 1 && db[n - 1] == '/') /* a trace directory: DIR.html beside it */
            n--;
        if (n > 3 && !strncmp(db + n - 3, ".db", 3))
            n -= 3;
        if (snprintf(def, sizeof def, "%.*s.html", (int)n, db) >= (int)sizeof def)
            return usage_error("report: path too long");
        out = def;
    }
    char err[512] = "";
    struct ms_view v;
    struct cli_view_input in;
    if (cli_view_input("report", db, &in) < 0)
        return 1;
    int opened = ms_view_open(&v, in.db, err, sizeof err);
    if (opened < 0) {
        cli_view_input_release(&in);
        cli_error("report: %s", err);
        return 1;
    }
    struct ms_output o;
    int rc = ms_output_open(&o, out);
    if (rc < 0) {
        ms_view_release(&v);
        cli_view_input_release(&in);
        cli_error("report: cannot write %s: %s", out, ms_strerror(rc));
        return 1;
    }
    int fd = dup(o.fd);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        ms_output_abort(&o);
        ms_view_release(&v);
        cli_view_input_release(&in);
        cli_error("report: cannot write %s: %s", out, strerror(errno));
        return 1;
    }
    rc = ms_view_report(&v, f, err, sizeof err);
    ms_view_release(&v);
    cli_view_input_release(&in);
    int werr = ferror(f) ? errno : 0;
    if (fclose(f) != 0 && !werr)
        werr = errno;
    if (rc < 0 || werr) {
        ms_output_abort(&o);
        if (rc < 0)
            cli_error("%s", err);
        else
            cli_error("report: cannot write %s: %s", out, strerror(werr ? werr : EIO));
        return 1;
    }
    if ((rc = ms_output_commit(&o)) < 0) {
        cli_error("report: cannot write %s: %s", out, ms_strerror(rc));
        return 1;
    }
    cli_log(1, "report: wrote %s", out);
    return 0;
}

/* cli.h: what the subcommands of the memscope command share. Only the CLI prints and exits. */
#ifndef MS_CLI_H
#define MS_CLI_H

/* Each subcommand gets argv with argv[0] = the subcommand name and returns the process exit
 * status: 0 ok, 1 failure, 2 usage error (bad option or value). */
int cmd_run(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_analyze(int argc, char **argv);
int cmd_pack(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_view(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_usage(int argc, char **argv);   /* cmd_usage.c */
int cmd_attach(int argc, char **argv);  /* cmd_attach.c */
int cmd_usage(int argc, char **argv);   /* cmd_usage.c */
int cmd_monitor(int argc, char **argv); /* cmd_monitor.c */
int cmd_top(int argc, char **argv);     /* cmd_top.c */
int cmd_sql(int argc, char **argv);     /* cmd_sql.c */
int cmd_ranks(int argc, char **argv);   /* cmd_ranks.c */
/* msMemScope's `--compare --input-path=A,B` (cmd_compare.c): argv[0] is memscope's. */
int cmd_compare_ms(int argc, char **argv);
#ifdef MEMSCOPE_HAVE_SNAPSHOT
int cmd_snapshot(int argc, char **argv);
#endif

#include "store/store.h"

#include <stdio.h>
#include <time.h>
struct ms_pack_stats;
/* Packs the raw trace at path, or every raw *.mst in the directory path (those modified at or
 * after `since`, when it is not 0), in place (cmd_pack.c). Adds to *total and *packed; returns
 * 0, or -1 when some file failed (message printed; that file keeps its raw form). */
int cli_pack_path(const char *path, int workers, time_t since, struct ms_pack_stats *total,
                  int *packed);

/* Resolves a --layer NAME (name or event type, any case) against the layers of database
 * db_path into *layer (cmd_analyze.c). Returns 0, or the exit status after printing why (1: the
 * database cannot be opened, 2: no such layer); cmd names the command in the message. */
int cli_resolve_layer(const char *cmd, const char *db_path, const char *name, int *layer);

struct ms_analyze_opts;
/* select.c: "--name=value" or "--name value" at argv[*i]: the value (*i moved past a separate
 * value), NULL when argv[*i] is not that option; *missing set when the option has no value. */
const char *cli_opt_value(int argc, char **argv, int *i, const char *name, int *missing);
/* select.c: parses argv[*i] when it is one of the selectors (--layer=NAME into *layer, --step,
 * --at, --process, --device, --from, --to into o; a value in the next argument advances *i).
 * Returns -1 when it is none of them, 0 when parsed, or 2 (a usage error, printed). */
int cli_select_option(const char *cmd, int argc, char **argv, int *i, struct ms_analyze_opts *o,
                      const char **layer);
/* messages.c: prints "memscope: <fmt>\n" to stderr. Returns -1 so callers can
 * `return cli_error(...)`. */
int cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Prints a usage error ("memscope: <fmt>\n" plus a hint) and returns 2. */
int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* select.c: adds the comma list of --site-skip (or MEMSCOPE_SITE_SKIP, what = that name) to
 * the call-site rule of the analyses and the viewer (ms_site_rule). 0, or a usage error's exit
 * status 2 with the message printed. */
int cli_site_skip(const char *cmd, const char *what, const char *list);

/* Logging: 0 debug, 1 info, 2 warning, 3 error. Set by --log-level, -q, -v. */
extern int cli_log_level;
void cli_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* run_files.c: whether process pid holds the file path (an absolute, resolved path) open: a
 * traced process still writing its trace (its agent keeps the descriptor). */
int cli_holds_file(long pid, const char *path);

/* typo.c: the name of names[0..n) that word, a mistyped command, means ("anaylze" ->
 * "analyze"), or NULL: one edit away for names of up to 4 letters, two for longer ones. A word
 * that names a program (a path, or a program on PATH) is never taken for a typo: msMemScope's
 * form runs it. */
const char *cli_mistyped(const char *word, const char *const *names, size_t n);

/* startup.c: memscope's heap in huge pages: starts memscope again (execv) with
 * glibc.malloc.hugetlb=1 in GLIBC_TUNABLES, and in that second start puts the user's
 * environment back; nothing when the user set hugetlb, the kernel gives no huge pages or
 * memscope cannot be started again. */
void cli_huge_page_heap(char **argv);
/* startup.c: SQLite's log calls ms_oom_note() for each allocation that failed inside it. */
void cli_sqlite_oom_log(void);
/* startup.c: SIGINT, SIGTERM and SIGHUP (unless ignored) remove this process's temporary files
 * (files.h's cleanup list), then end memscope as the signal would have. */
void cli_cleanup_on_signals(void);

/* view_input.c: whether the file at path, which the snapshot reader refused with err, is no
 * snapshot at all (not a damaged one): its first byte already failed, or it is empty, an SQLite
 * database, a trace; *kind gets what it is (ms_file_kind). */
int cli_not_snapshot(const char *path, const char *err, const char **kind);

/* run_files.c (memscope run's helpers; docs/cli.md, "Files") */
/* Takes the lock of out_file (<out_file>.lock) until exit: 0, -EBUSY when another run holds it,
 * or -errno. */
int run_lock_output(const char *out_file);
/* Releases that lock now and removes the lock file if this run made it (else done at exit). */
void run_unlock_output(void);
/* The directory of the running memscope binary in buf (len bytes); 0 or -1. */
int run_exe_dir(char *buf, size_t len);
/* libmemscope.so: $MEMSCOPE_AGENT, beside the binary, or in the install tree (realpath in out,
 * len bytes); 0 or -1. */
int run_find_agent(char *out, size_t len);
/* mkdir -p with mode 0700; 0 or -errno. The outermost directory it made goes to made (len
 * bytes), "" when none. */
int run_mkdir_p(const char *path, char *made, size_t len);
/* Removes dir, then its parents, while they are empty and inside made (run_mkdir_p's). */
void run_rmdirs(const char *dir, const char *made);
/* Removes dir's files (one level) and dir; 0 or -errno. */
int run_remove_tree(const char *dir);
/* Prints the agents' <pid>.msg files of the trace directory dir on stderr and removes them. */
void run_print_agent_messages(const char *dir);
/* Whether directory dir holds nothing. */
int run_dir_empty(const char *dir);
/* Why the agent could not load into program (static, setuid/setgid, or unknown), in why. */
void run_untraceable_reason(const char *program, char *why, size_t len);
/* Says that the program died of signal signo (core: it dumped core). */
void run_say_killed(int signo, int core);
/* 1 (and why) when program needs a sanitizer runtime that must load before the agent. */
int run_sanitized_program(const char *program, char *why, size_t len);
/* The pid of a process still writing one of the traces in dir (it holds the file open), or 0. */
long run_running_writer(const char *dir);

/* run_convert.c: ms_store_convert(o) in a child process; a child that dies leaves an error in err
 * (MS_EIO) and nothing half-written. *stop set by a signal handler is passed on to the child. */
int run_convert(const struct ms_store_options *o, volatile int *stop, struct ms_store_result *res,
                char *err, size_t errlen);

/* view_input.c: the database `memscope view` and `memscope report` read for path: path itself
 * when it is a database (or missing: the caller's open reports it), else a trace directory or
 * a PyTorch snapshot converted into a private temporary directory (in->dir, removed by
 * cli_view_input_release). Returns 0, or -1 with a message printed (what: "view"). */
struct cli_view_input {
    char db[4200];
    char dir[4096]; /* "" when nothing was created */
};
int cli_view_input(const char *what, const char *path, struct cli_view_input *in);
void cli_view_input_release(struct cli_view_input *in);

#endif

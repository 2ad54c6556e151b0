/* convert_exec.c: programs that ran untraced (issue 37). The agent writes an EXEC record
 * before each exec or posix_spawn (src/agent/exec.c): the process, the program, and whether
 * the program should write a trace of its own or why it will not. Pass 2 collects them (an
 * EXEC_FAILED withdraws its thread's last one); at the end each is matched with the traces of
 * the run: a trace of that pid started after the record (for an exec in place: a later image
 * of the same pid) means the program was traced. Every other one becomes a row of table
 * untraced, with the agent's reason, or, when the agent expected a trace, "no trace": the
 * program's agent could not write one (a change of user, LD_PRELOAD removed by the program
 * itself). docs/database.md, "Programs that ran untraced". Workload: one call per exec. */
#include "convert_internal.h"

struct exec_note {
    uint32_t proc, thread; /* the image that wrote it, and its thread */
    uint64_t pid;          /* the process that runs the program */
    uint64_t mono_ns;      /* the record's CLOCK_MONOTONIC time */
    int64_t ts;            /* the same as epoch ns */
    int why;               /* MS_EXEC_* */
    int failed;            /* an EXEC_FAILED followed: nothing was started */
    char *path;
};

#define MAX_EXECS (1u << 20)

static const char *reason_text(int why)
{
    switch (why) {
    case MS_EXEC_NO_PRELOAD:
        return "its environment did not carry memscope's LD_PRELOAD (a wrapper replaced or "
               "removed it)";
    case MS_EXEC_NO_DIR: return "its environment did not carry MEMSCOPE_TRACE_DIR";
    case MS_EXEC_STATIC:
        return "it is statically linked: no dynamic loader to load memscope's agent";
    case MS_EXEC_FOREIGN:
        return "it is a 32-bit program (or another machine's), which cannot load memscope's "
               "64-bit agent";
    case MS_EXEC_SETUID:
        return "it is a setuid or setgid program: the dynamic loader ignores LD_PRELOAD for it";
    case MS_EXEC_SANITIZER:
        return "it is built with AddressSanitizer (or another sanitizer whose runtime must load "
               "first or serves malloc itself): memscope's agent cannot record it";
    default:
        return "it wrote no trace: its agent did not start or could not create its trace file "
               "(after a change of user, or LD_PRELOAD removed by the program itself)";
    }
}

int conv__on_exec(struct conv *c, struct stream *s)
{
    const struct ms_record *r = &s->r;
    if (r->fn == MS_EXT_EXEC_FAILED) {
        for (size_t i = c->nexecs; i-- > 0;)
            if (c->execs[i].proc == s->proc && c->execs[i].thread == s->thread) {
                c->execs[i].failed = 1;
                break;
            }
        return 0;
    }
    if (c->nexecs >= MAX_EXECS)
        return 0; /* said by none: a program that execs a million times */
    if (c->nexecs == c->aexecs &&
        ms_grow((void **)&c->execs, &c->aexecs, c->nexecs, sizeof *c->execs, 16, MAX_EXECS) < 0)
        return conv__oom(c, "exec records");
    char *path = malloc(r->len1 + 1);
    if (!path)
        return conv__oom(c, "exec records");
    memcpy(path, r->str1, r->len1);
    path[r->len1] = 0;
    c->execs[c->nexecs++] = (struct exec_note){
        .proc = s->proc,
        .thread = s->thread,
        .pid = r->addr,
        .mono_ns = r->ns,
        .ts = s->ts,
        .why = r->size < MS_EXEC_REASONS ? (int)r->size : MS_EXEC_TRACED,
        .path = path,
    };
    return 0;
}

/* Whether a trace of the run is the program e started. */
static int traced(const struct conv *c, const struct exec_note *e)
{
    const struct ms_trace_file_header *w = &c->procs[e->proc].tr.hdr;
    for (size_t i = 0; i < c->nprocs; i++) {
        const struct ms_trace_file_header *h = &c->procs[i].tr.hdr;
        if (h->pid != e->pid)
            continue;
        if (e->pid != w->pid) /* another process (vfork, posix_spawn): its trace */
            return 1;
        if (h->image_seq > w->image_seq && h->start_mono_ns >= e->mono_ns)
            return 1; /* an image of the same pid after the exec */
    }
    return 0;
}

int conv__write_untraced(struct conv *c)
{
    if (!c->nexecs)
        return 0;
    sqlite3_stmt *st;
    int rc = conv__prepare(c, &st, "INSERT INTO untraced VALUES (NULL,?,?,?,?,?)");
    for (size_t i = 0; i < c->nexecs && rc == 0; i++) {
        const struct exec_note *e = &c->execs[i];
        if (e->failed || traced(c, e))
            continue;
        sqlite3_bind_int64(st, 1, c->procs[e->proc].id);
        sqlite3_bind_int64(st, 2, (int64_t)e->pid);
        sqlite3_bind_int64(st, 3, e->ts);
        sqlite3_bind_text(st, 4, e->path, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 5, reason_text(e->why), -1, SQLITE_STATIC);
        rc = conv__step_reset(c, st, "insert untraced");
    }
    sqlite3_finalize(st);
    return rc;
}

void conv__execs_release(struct conv *c)
{
    for (size_t i = 0; i < c->nexecs; i++)
        free(c->execs[i].path);
    free(c->execs);
    c->execs = NULL;
    c->nexecs = c->aexecs = 0;
}

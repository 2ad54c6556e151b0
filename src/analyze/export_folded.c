/* export_folded.c: the profile as folded stacks (`--format=collapsed`: Brendan Gregg's
 * flamegraph.pl, inferno, speedscope and most flame-graph tools read it) and as speedscope's own
 * JSON file format (`--format=speedscope`; https://www.speedscope.app/file-format-schema.json):
 * one line, or one sample, per stack, weighed by the bytes of --what (docs/exports.md). Called by
 * `memscope export`; workload: every stack of a run once. */
#include "export.h"

#include "common/grow.h"
#include "common/ms_error.h"
#include "version.h"
#include "store/strtab.h"

#include <stdlib.h>
#include <string.h>

/* A frame's name in a folded line: the frame's line (store/stack_text.h's rule), with '\\',
 * ';' and line ends escaped as "\\\\", "\\;", "\\n" so that ';' only separates frames. */
static void put_folded(FILE *f, const char *s)
{
    while (*s) {
        size_t n = strcspn(s, ";\\\n\r");
        fwrite(s, 1, n, f);
        s += n;
        if (*s == ';' || *s == '\\')
            fputc('\\', f), fputc(*s++, f);
        else if (*s)
            fputs("\\n", f), s++;
    }
}

int ms_export_collapsed(const struct ms_profile *p, enum ms_export_what what, FILE *out, char *err,
                        size_t errlen)
{
    struct ms_export_stacks s;
    if (ms_export_stacks_init(&s, p->db) < 0) {
        return ms_errf(err, errlen, MS_EDB, "cannot read the stacks: %s", sqlite3_errmsg(p->db));
    }
    uint32_t *ix = ms_profile_sorted(p);
    int rc = ix ? 0 : MS_ENOMEM;
    for (size_t k = 0; rc == 0 && k < p->ne; k++) {
        const struct ms_profile_entry *e = &p->e[ix[k]];
        int64_t v = ms_profile_value(e, what, NULL);
        if (v <= 0)
            continue;
        if ((rc = ms_export_stack_load(&s, e->stack_id)) < 0)
            break;
        if (!s.n)
            fputs("(no stack)", out);
        for (size_t i = 0; i < s.n; i++) {
            if (i)
                fputc(';', out);
            put_folded(out, s.v[i].f.text);
        }
        fprintf(out, " %lld\n", (long long)v);
    }
    free(ix);
    ms_export_stacks_release(&s);
    if (rc < 0)
        return ms_errf(err, errlen, rc, "%s",
                       rc == MS_ENOMEM ? "out of memory" : "cannot read a stack's frames");
    return rc;
}

/* speedscope's frames: each distinct frame line once, by index. */
struct frames {
    struct ms_strtab names;
    struct ms_export_frame *v; /* by index (strtab id - 1) */
    size_t a;
};

static long frame_index(struct frames *fr, const struct ms_export_frame *f)
{
    int64_t id;
    int isnew;
    const char *t = f->f.text;
    if (ms_strtab_intern(&fr->names, t, strlen(t), &id, &isnew) < 0)
        return -1;
    if (isnew) {
        if (ms_grow((void **)&fr->v, &fr->a, (size_t)id - 1, sizeof *fr->v, 256, MS_GROW_MAX) < 0)
            return -1;
        fr->v[id - 1] = *f;
    }
    return (long)id - 1;
}

int ms_export_speedscope(const struct ms_profile *p, enum ms_export_what what, const char *name,
                         FILE *out, char *err, size_t errlen)
{
    static const char *const units[] = {"allocated", "live at the end", "live at the peak",
                                        "leaked"};
    struct ms_export_stacks s;
    if (ms_export_stacks_init(&s, p->db) < 0) {
        return ms_errf(err, errlen, MS_EDB, "cannot read the stacks: %s", sqlite3_errmsg(p->db));
    }
    struct frames fr = {0};
    ms_strtab_init(&fr.names, MS_GROW_MAX, (size_t)1 << 32);
    struct ms_names names;
    int rc = ms__names_load(p->db, &names, err, errlen);
    if (rc < 0) {
        ms_export_stacks_release(&s);
        ms_strtab_release(&fr.names);
        return rc;
    }
    uint32_t *ix = ms_profile_sorted(p);
    if (!ix)
        rc = MS_ENOMEM;
    struct ms_json j;
    ms_json_init(&j, out);
    ms_json_begin_object(&j, NULL);
    ms_json_str(&j, "$schema", "https://www.speedscope.app/file-format-schema.json");
    ms_json_str(&j, "exporter", "memscope " MEMSCOPE_VERSION);
    ms_json_str(&j, "name", name);
    ms_json_int(&j, "activeProfileIndex", 0);
    ms_json_begin_array(&j, "profiles");
    /* one profile per (process, layer): the entries of each are adjacent in ix */
    for (size_t k = 0; rc == 0 && k < p->ne;) {
        size_t end = k;
        int64_t total = 0;
        while (end < p->ne && p->e[ix[end]].process_id == p->e[ix[k]].process_id &&
               p->e[ix[end]].layer == p->e[ix[k]].layer)
            total += ms_profile_value(&p->e[ix[end++]], what, NULL);
        if (total <= 0) {
            k = end;
            continue;
        }
        const struct ms_profile_entry *e0 = &p->e[ix[k]];
        const struct ms_name_proc *proc = ms__names_proc(&names, e0->process_id);
        char title[512];
        snprintf(title, sizeof title, "%s (pid %lld) %s: bytes %s",
                 proc && proc->exe ? proc->exe : "process", proc ? (long long)proc->pid : 0LL,
                 ms__names_layer(&names, e0->layer), units[what]);
        ms_json_begin_object(&j, NULL);
        ms_json_str(&j, "type", "sampled");
        ms_json_str(&j, "name", title);
        ms_json_str(&j, "unit", "bytes");
        ms_json_int(&j, "startValue", 0);
        ms_json_int(&j, "endValue", total);
        ms_json_begin_array(&j, "samples");
        for (size_t i = k; rc == 0 && i < end; i++) {
            const struct ms_profile_entry *e = &p->e[ix[i]];
            if (ms_profile_value(e, what, NULL) <= 0)
                continue;
            if ((rc = ms_export_stack_load(&s, e->stack_id)) < 0)
                break;
            ms_json_begin_array(&j, NULL);
            struct ms_export_frame none = {.f = {.text = "(no stack)"}};
            if (!s.n) {
                long x = frame_index(&fr, &none);
                if (x < 0)
                    rc = MS_ENOMEM;
                ms_json_int(&j, NULL, x);
            }
            for (size_t f = 0; rc == 0 && f < s.n; f++) {
                long x = frame_index(&fr, &s.v[f]);
                if (x < 0)
                    rc = MS_ENOMEM;
                ms_json_int(&j, NULL, x);
            }
            ms_json_end_array(&j);
        }
        ms_json_end_array(&j);
        ms_json_begin_array(&j, "weights");
        for (size_t i = k; i < end; i++) {
            int64_t v = ms_profile_value(&p->e[ix[i]], what, NULL);
            if (v > 0)
                ms_json_int(&j, NULL, v);
        }
        ms_json_end_array(&j);
        ms_json_end_object(&j);
        k = end;
    }
    ms_json_end_array(&j);
    ms_json_begin_object(&j, "shared");
    ms_json_begin_array(&j, "frames");
    for (size_t i = 0; i < fr.names.count; i++) {
        const struct ms_stack_frame *f = &fr.v[i].f;
        ms_json_begin_object(&j, NULL);
        ms_json_str(&j, "name", f->text);
        if (f->file) {
            ms_json_str(&j, "file", f->file);
            if (f->line > 0)
                ms_json_int(&j, "line", f->line);
        }
        ms_json_end_object(&j);
    }
    ms_json_end_array(&j);
    ms_json_end_object(&j);
    ms_json_end_object(&j);
    ms_json_finish(&j);
    free(ix);
    free(fr.v);
    ms_strtab_release(&fr.names);
    ms__names_release(&names);
    ms_export_stacks_release(&s);
    if (rc < 0)
        return ms_errf(err, errlen, rc, "%s",
                       rc == MS_ENOMEM ? "out of memory" : "cannot read a stack's frames");
    return rc;
}

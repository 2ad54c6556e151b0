/* export_pprof.c: the profile as pprof's profile.proto, gzip'd (`--format=pprof`; `go tool
 * pprof`, Google's pprof, Grafana Pyroscope, Polar Signals read it; docs/exports.md).
 *
 * The message (github.com/google/pprof, proto/profile.proto) is encoded here by hand: a
 * profile is a handful of repeated messages and a string table, and protobuf's wire format
 * for them is varints and length-prefixed bytes. Sample types alloc_objects/count,
 * alloc_space/bytes, inuse_objects/count, inuse_space/bytes (Go's heap profile's), one sample
 * per (process, layer, stack) with labels pid and layer; a location per return address (per
 * Python frame), its inlined functions as several lines, innermost first, as pprof wants them;
 * a mapping per module with its GNU build id, read from the module's file when it is still
 * there. Called by `memscope export`; workload: every stack of a run once, the encoded profile
 * in memory (about 30 bytes per frame of a distinct location), then compressed by zlib. */
#include "export.h"

#include "common/buf.h"
#include "common/grow.h"
#include "common/ms_error.h"
#include "store/strtab.h"

#include <elf.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

/* An encoder's buffer (src/common/buf.h): appends never fail, they set oom and the writer checks
 * it once. */
static void pb_put(struct ms_buf *b, const void *data, size_t len)
{
    ms_buf_add(b, data, len);
}

static void pb_varint(struct ms_buf *b, uint64_t v)
{
    unsigned char t[10];
    size_t n = 0;
    do {
        t[n] = (unsigned char)(v & 0x7f);
        v >>= 7;
        if (v)
            t[n] |= 0x80;
        n++;
    } while (v);
    pb_put(b, t, n);
}

/* field = value (wire type 0); zero is protobuf 3's default and left out */
static void pb_int(struct ms_buf *b, unsigned field, uint64_t v)
{
    if (!v)
        return;
    pb_varint(b, (uint64_t)field << 3);
    pb_varint(b, v);
}

/* field = len bytes (wire type 2: strings, packed numbers, messages) */
static void pb_bytes(struct ms_buf *b, unsigned field, const void *data, size_t len)
{
    pb_varint(b, (uint64_t)field << 3 | 2);
    pb_varint(b, len);
    pb_put(b, data, len);
}

/* field = the message in sub, which is emptied for the next one */
static void pb_msg(struct ms_buf *b, unsigned field, struct ms_buf *sub)
{
    if (sub->oom)
        b->oom = 1;
    pb_bytes(b, field, sub->p, sub->len);
    sub->len = 0;
}

/* The module's GNU build id (NT_GNU_BUILD_ID in a PT_NOTE segment) as hex into out (""
 * when the file is gone, not a 64-bit ELF file or has none). Reads at most 64 KiB of notes. */
static void build_id(const char *path, char *out, size_t len)
{
    out[0] = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    Elf64_Ehdr eh;
    if (pread(fd, &eh, sizeof eh, 0) != (ssize_t)sizeof eh || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
        eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr) ||
        eh.e_phnum > 256) {
        close(fd);
        return;
    }
    for (unsigned i = 0; i < eh.e_phnum && !out[0]; i++) {
        Elf64_Phdr ph;
        if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + i * sizeof ph)) != (ssize_t)sizeof ph)
            break;
        if (ph.p_type != PT_NOTE || ph.p_filesz > 65536 || ph.p_filesz < 12)
            continue;
        unsigned char buf[65536];
        if (pread(fd, buf, ph.p_filesz, (off_t)ph.p_offset) != (ssize_t)ph.p_filesz)
            continue;
        for (size_t o = 0; o + 12 <= ph.p_filesz;) {
            Elf64_Nhdr nh;
            memcpy(&nh, buf + o, sizeof nh);
            size_t name = (nh.n_namesz + 3) & ~(size_t)3, desc = (nh.n_descsz + 3) & ~(size_t)3;
            if (name > ph.p_filesz || desc > ph.p_filesz || o + 12 + name + desc > ph.p_filesz)
                break;
            if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
                !memcmp(buf + o + 12, "GNU", 4) && nh.n_descsz * 2 < len) {
                for (size_t k = 0; k < nh.n_descsz; k++)
                    snprintf(out + 2 * k, 3, "%02x", buf[o + 12 + name + k]);
                break;
            }
            o += 12 + name + desc;
        }
    }
    close(fd);
}

struct pprof {
    const struct ms_profile *p;
    struct ms_strtab strings; /* the string table: index = id (0 is "") */
    struct ms_strtab funcs;   /* "name\x1f" "system name\x1f" "file": function id = id */
    struct ms_strtab maps;    /* module path: mapping id = id */
    struct ms_u64map locs;    /* frame key -> location id (uint32) */
    uint32_t nlocs;
    struct ms_buf samples, locations, functions, mappings, tmp, tmp2, ids;
    sqlite3_stmt *module;
    int oom;
};

static int64_t str(struct pprof *x, const char *s)
{
    int64_t id;
    int isnew;
    if (!s || !*s)
        return 0;
    if (ms_strtab_intern(&x->strings, s, strlen(s), &id, &isnew) < 0) {
        x->oom = 1;
        return 0;
    }
    return id;
}

static uint64_t function_id(struct pprof *x, const struct ms_stack_frame *f)
{
    const char *name = f->function ? f->function : "??";
    const char *sys = f->linkage ? f->linkage : name;
    const char *file = f->file ? f->file : "";
    size_t ln = strlen(name), ls = strlen(sys), lf = strlen(file);
    char *key = malloc(ln + ls + lf + 3);
    if (!key) {
        x->oom = 1;
        return 0;
    }
    memcpy(key, name, ln), key[ln] = 0x1f;
    memcpy(key + ln + 1, sys, ls), key[ln + 1 + ls] = 0x1f;
    memcpy(key + ln + ls + 2, file, lf);
    int64_t id;
    int isnew;
    int rc = ms_strtab_intern(&x->funcs, key, ln + ls + lf + 2, &id, &isnew);
    free(key);
    if (rc < 0) {
        x->oom = 1;
        return 0;
    }
    if (isnew) {
        pb_int(&x->tmp2, 1, (uint64_t)id);
        pb_int(&x->tmp2, 2, (uint64_t)str(x, name));
        pb_int(&x->tmp2, 3, (uint64_t)str(x, sys));
        pb_int(&x->tmp2, 4, (uint64_t)str(x, file));
        pb_msg(&x->functions, 5, &x->tmp2);
    }
    return (uint64_t)id;
}

static uint64_t mapping_id(struct pprof *x, const char *path)
{
    if (!path)
        return 0;
    int64_t id;
    int isnew;
    if (ms_strtab_intern(&x->maps, path, strlen(path), &id, &isnew) < 0) {
        x->oom = 1;
        return 0;
    }
    if (isnew) {
        int64_t lo = 0, hi = 0, bias = 0;
        sqlite3_bind_text(x->module, 1, path, -1, SQLITE_STATIC);
        if (sqlite3_step(x->module) == SQLITE_ROW) {
            lo = sqlite3_column_int64(x->module, 0);
            hi = sqlite3_column_int64(x->module, 1);
            bias = sqlite3_column_int64(x->module, 2);
        }
        sqlite3_reset(x->module);
        char bid[130];
        build_id(path, bid, sizeof bid);
        pb_int(&x->tmp2, 1, (uint64_t)id);
        pb_int(&x->tmp2, 2, (uint64_t)lo);
        pb_int(&x->tmp2, 3, (uint64_t)hi);
        pb_int(&x->tmp2, 4, (uint64_t)(lo - bias));
        pb_int(&x->tmp2, 5, (uint64_t)str(x, path));
        pb_int(&x->tmp2, 6, (uint64_t)str(x, bid));
        for (unsigned f = 7; f <= 10; f++) /* has functions, filenames, lines, inline frames */
            pb_int(&x->tmp2, f, 1);
        pb_msg(&x->mappings, 3, &x->tmp2);
    }
    return (uint64_t)id;
}

/* The location of frames v[lo..hi] (one pc: inlined ones first in reverse, i.e. v[hi] is the
 * innermost; or one Python frame), made on first use. */
static uint64_t location_id(struct pprof *x, const struct ms_export_frame *v, size_t lo, size_t hi)
{
    const struct ms_export_frame *outer = &v[lo];
    uint64_t key = (uint64_t)outer->f.id | (outer->python ? (uint64_t)1 << 62 : 0);
    uint32_t id;
    if (ms_u64map_get32(&x->locs, key, &id))
        return id;
    id = ++x->nlocs;
    if (ms_u64map_set32(&x->locs, key, id) < 0) {
        x->oom = 1;
        return 0;
    }
    pb_int(&x->tmp, 1, id);
    if (!outer->python) {
        pb_int(&x->tmp, 2, mapping_id(x, outer->f.module));
        pb_int(&x->tmp, 3, outer->f.pc);
    }
    for (size_t i = hi + 1; i-- > lo;) { /* lines: innermost first, the caller last */
        uint64_t fn = function_id(x, &v[i].f);
        pb_int(&x->tmp2, 1, fn);
        pb_int(&x->tmp2, 2, (uint64_t)(v[i].f.line > 0 ? v[i].f.line : 0));
        /* the function's message went to x->functions; tmp2 now holds the line */
        pb_msg(&x->tmp, 4, &x->tmp2);
    }
    pb_msg(&x->locations, 4, &x->tmp);
    return id;
}

static void label(struct pprof *x, struct ms_buf *s, const char *key, const char *sv, int64_t num,
                  const char *unit)
{
    struct ms_buf l = {0};
    pb_int(&l, 1, (uint64_t)str(x, key));
    if (sv)
        pb_int(&l, 2, (uint64_t)str(x, sv));
    else {
        pb_int(&l, 3, (uint64_t)num);
        pb_int(&l, 4, (uint64_t)str(x, unit));
    }
    pb_msg(s, 3, &l);
    free(l.p);
}

static void value_type(struct pprof *x, struct ms_buf *b, unsigned field, const char *type,
                       const char *unit)
{
    struct ms_buf v = {0};
    pb_int(&v, 1, (uint64_t)str(x, type));
    pb_int(&v, 2, (uint64_t)str(x, unit));
    pb_msg(b, field, &v);
    free(v.p);
}

/* Writes the bytes gzip'd to out. */
static int gzip_write(const struct ms_buf *b, FILE *out)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return MS_ENOMEM;
    unsigned char buf[65536];
    int rc = 0, zr;
    z.next_in = (Bytef *)b->p;
    z.avail_in = (uInt)b->len; /* a buffer holds at most 1 GiB (MS_BUF_MAX) */
    do {
        z.next_out = buf;
        z.avail_out = sizeof buf;
        zr = deflate(&z, Z_FINISH);
        if (zr == Z_STREAM_ERROR) {
            rc = MS_ENOMEM;
            break;
        }
        size_t have = sizeof buf - z.avail_out;
        if (have && fwrite(buf, 1, have, out) != have)
            rc = MS_EIO;
    } while (rc == 0 && zr != Z_STREAM_END);
    deflateEnd(&z);
    return rc;
}

int ms_export_pprof(const struct ms_profile *p, FILE *out, char *err, size_t errlen)
{
    struct pprof x;
    memset(&x, 0, sizeof x);
    x.p = p;
    ms_strtab_init(&x.strings, MS_GROW_MAX, (size_t)1 << 32);
    ms_strtab_init(&x.funcs, MS_GROW_MAX, (size_t)1 << 32);
    ms_strtab_init(&x.maps, 1u << 20, (size_t)1 << 28);
    ms_u64map_init(&x.locs, sizeof(uint32_t), MS_U64MAP_MAX);
    struct ms_export_stacks s = {0};
    struct ms_names names;
    int rc = ms__names_load(p->db, &names, err, errlen);
    if (rc < 0)
        goto out_strtabs;
    if (ms_export_stacks_init(&s, p->db) < 0 ||
        sqlite3_prepare_v2(p->db, "SELECT MIN(lo), MAX(hi), MIN(bias) FROM modules WHERE path = ?",
                           -1, &x.module, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "cannot read the stacks: %s", sqlite3_errmsg(p->db));
        rc = MS_EDB;
        goto out_names;
    }
    struct ms_buf head = {0};
    value_type(&x, &head, 1, "alloc_objects", "count");
    value_type(&x, &head, 1, "alloc_space", "bytes");
    value_type(&x, &head, 1, "inuse_objects", "count");
    value_type(&x, &head, 1, "inuse_space", "bytes");
    uint32_t *ix = ms_profile_sorted(p);
    if (!ix)
        rc = MS_ENOMEM;
    for (size_t k = 0; rc == 0 && k < p->ne; k++) {
        const struct ms_profile_entry *e = &p->e[ix[k]];
        if (!e->allocs && !e->inuse)
            continue;
        if ((rc = ms_export_stack_load(&s, e->stack_id)) < 0)
            break;
        /* locations, leaf first: a native pc's frames run from its containing function
         * (inline_depth 0) to its innermost inlined one */
        for (size_t hi = s.n; hi-- > 0;) {
            size_t lo = hi;
            if (!s.v[hi].python)
                while (lo > 0 && !s.v[lo - 1].python && s.v[lo - 1].f.pc == s.v[hi].f.pc &&
                       s.v[lo].f.inline_depth > 0)
                    lo--;
            pb_varint(&x.ids, location_id(&x, s.v, lo, hi));
            hi = lo;
        }
        struct ms_buf smp = {0}, *sm = &smp;
        if (x.ids.len)
            pb_bytes(sm, 1, x.ids.p, x.ids.len);
        x.ids.len = 0;
        struct ms_buf vals = {0};
        pb_varint(&vals, (uint64_t)e->allocs);
        pb_varint(&vals, (uint64_t)e->alloc_bytes);
        pb_varint(&vals, (uint64_t)e->inuse);
        pb_varint(&vals, (uint64_t)e->inuse_bytes);
        pb_msg(sm, 2, &vals);
        free(vals.p);
        const struct ms_name_proc *proc = ms__names_proc(&names, e->process_id);
        label(&x, sm, "pid", NULL, proc ? proc->pid : e->process_id, "");
        label(&x, sm, "layer", ms__names_layer(&names, e->layer), 0, NULL);
        if (proc && proc->exe)
            label(&x, sm, "exe", proc->exe, 0, NULL);
        pb_msg(&x.samples, 2, sm);
        free(smp.p);
    }
    free(ix);
    if (rc == 0) {
        struct ms_buf all = {0};
        pb_put(&all, head.p, head.len);
        pb_put(&all, x.samples.p, x.samples.len);
        pb_put(&all, x.mappings.p, x.mappings.len);
        pb_put(&all, x.locations.p, x.locations.len);
        pb_put(&all, x.functions.p, x.functions.len);
        value_type(&x, &x.tmp2, 11, "space", "bytes"); /* period_type: before the strings */
        pb_bytes(&all, 6, "", 0);                      /* string 0 is "" */
        for (size_t i = 0; i < x.strings.count; i++)
            pb_bytes(&all, 6, x.strings.texts[i], strlen(x.strings.texts[i]));
        pb_int(&all, 9, (uint64_t)p->from_ns);
        pb_int(&all, 10, (uint64_t)(p->to_ns - p->from_ns));
        pb_put(&all, x.tmp2.p, x.tmp2.len);
        pb_int(&all, 12, 1);
        if (all.oom || x.oom || head.oom || x.samples.oom || x.locations.oom || x.functions.oom ||
            x.mappings.oom)
            rc = MS_ENOMEM;
        else if ((rc = gzip_write(&all, out)) == MS_EIO)
            snprintf(err, errlen, "cannot write the profile");
        free(all.p);
    }
    free(head.p);
    if (rc == MS_ENOMEM)
        snprintf(err, errlen, "out of memory");
    else if (rc < 0 && !err[0])
        snprintf(err, errlen, "cannot read a stack's frames");
out_names:
    sqlite3_finalize(x.module);
    ms_export_stacks_release(&s);
    ms__names_release(&names);
out_strtabs:
    ms_strtab_release(&x.strings);
    ms_strtab_release(&x.funcs);
    ms_strtab_release(&x.maps);
    ms_u64map_release(&x.locs);
    free(x.samples.p), free(x.locations.p), free(x.functions.p), free(x.mappings.p);
    free(x.tmp.p), free(x.tmp2.p), free(x.ids.p);
    return rc;
}

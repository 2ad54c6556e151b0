/* db_ids.h: the vocabulary of the memscope database (docs/database.md): its format version and
 * the ids of its layers and event kinds (tables layers and event_kinds), in C and as SQL text.
 *
 * One place for the store (the DDL in db_schema.c, the conversion), the snapshot import,
 * the analyses and the CLI: a query writes "kind IN (" MS_SQL_MALLOC ", " MS_SQL_FREE ")", not
 * "kind IN (1, 2)". Header only. */
#ifndef MS_DB_IDS_H
#define MS_DB_IDS_H

/* The database format version this code writes and the highest it reads (meta.format_version). */
#define MS_DB_FORMAT_VERSION 2
#define MS_DB_FORMAT_VERSION_SQL "2" /* the same, as SQL text */

/* Layer ids. */
enum {
    MS_LAYER_ANNOTATION = 0,
    MS_LAYER_HEAP = 1,
    MS_LAYER_MMAP = 2,
    MS_LAYER_PTA = 3,          /* snapshot import: PyTorch's caching-allocator blocks */
    MS_LAYER_PTA_SEGMENT = 4,  /* ... and its segments */
    MS_LAYER_PINNED = 5,       /* CUDA pinned host memory (HOST_PINNED) */
    MS_LAYER_MMAP_RESERVE = 6, /* address space reserved by anonymous PROT_NONE mappings */
    MS_LAYER_POOL0 = 16,
    /* CUDA device memory: layer MS_LAYER_CUDA0 + MS_CUDA_LAYERS * d + k for device ordinal d
     * (d = MS_CUDA_NODEV when unknown) and kind k (MS_CUDA_L_*) */
    MS_LAYER_CUDA0 = 1024,
};
enum {
    MS_CUDA_L_HAL,
    MS_CUDA_L_POOL,
    MS_CUDA_L_PHYS,
    MS_CUDA_L_VA,
    MS_CUDA_L_MAP,
    MS_CUDA_L_PTA,     /* PyTorch's caching allocator: blocks */
    MS_CUDA_L_PTA_SEG, /* ... and the segments it got from the driver */
    MS_CUDA_LAYERS = 8
};
#define MS_CUDA_NODEV 64

#define MS_SQL_LAYER_PTA "3"
#define MS_SQL_LAYER_PTA_SEGMENT "4"
#define MS_SQL_LAYER_MMAP_RESERVE "6"
_Static_assert(MS_LAYER_PTA == 3 && MS_LAYER_PTA_SEGMENT == 4 && MS_LAYER_MMAP_RESERVE == 6,
               "MS_SQL_LAYER_* name the MS_LAYER_* ids");

/* Event kinds. */
enum {
    MS_KIND_MALLOC = 1,
    MS_KIND_FREE = 2,
    MS_KIND_FREE_REQUESTED = 3, /* snapshot import */
    MS_KIND_STEP = 4,
    MS_KIND_MARK = 5,
    MS_KIND_RANGE_START = 6,
    MS_KIND_RANGE_END = 7,
    MS_KIND_ACCESS = 8,
    MS_KIND_OOM = 9,
    MS_KIND_KERNEL_LAUNCH = 10,
    MS_KIND_OOM_RECENT = 11,   /* after an OOM: a live block, newest first */
    MS_KIND_OOM_TOP = 12,      /* after an OOM: a live block, largest first */
    MS_KIND_DEVICE_USAGE = 13, /* what NVML reports at a step and at exit */
};

/* The kinds as SQL text (checked against the enum below). */
#define MS_SQL_MALLOC "1"
#define MS_SQL_FREE "2"
#define MS_SQL_STEP "4"
#define MS_SQL_MARK "5"
#define MS_SQL_RANGE_START "6"
#define MS_SQL_RANGE_END "7"
#define MS_SQL_FREE_REQUESTED "3"
#define MS_SQL_ACCESS "8"
#define MS_SQL_OOM "9"
#define MS_SQL_OOM_RECENT "11"
#define MS_SQL_OOM_TOP "12"
#define MS_SQL_KERNEL_LAUNCH "10"
#define MS_SQL_DEVICE_USAGE "13"
_Static_assert(MS_KIND_MALLOC == 1 && MS_KIND_FREE == 2 && MS_KIND_FREE_REQUESTED == 3 &&
                   MS_KIND_STEP == 4 && MS_KIND_RANGE_START == 6 && MS_KIND_RANGE_END == 7 &&
                   MS_KIND_ACCESS == 8 && MS_KIND_OOM == 9 && MS_KIND_OOM_RECENT == 11 &&
                   MS_KIND_OOM_TOP == 12 && MS_KIND_KERNEL_LAUNCH == 10 &&
                   MS_KIND_DEVICE_USAGE == 13,
               "MS_SQL_* name the MS_KIND_* ids");

/* MARK messages that are memscope's own bookkeeping, not the user's marks: owner tags (the
 * store applies them, docs/database.md) and the PyTorch module log (docs/torch.md). They stay
 * in table events; memscope_dump and the CSV, whose MSTX rows are the user's marks in
 * msMemScope's files, leave them out. As SQL (a condition on the column col) and in C, both
 * case-sensitive (GLOB, not LIKE, which ignores ASCII case): tests/unit/test_db_schema.c. */
#define MS_SQL_OWN_MARK(col)                                                        \
    "(" #col " GLOB 'memscope-tag:*' OR " #col " GLOB 'memscope-module:*' OR " #col \
    " GLOB 'describe addr=*')"
static inline int ms_own_mark(const char *s)
{
    static const char *const prefixes[] = {"memscope-tag:", "memscope-module:", "describe addr="};
    for (unsigned i = 0; s && i < sizeof prefixes / sizeof prefixes[0]; i++) {
        const char *p = prefixes[i], *q = s;
        while (*p && *p == *q)
            p++, q++;
        if (!*p)
            return 1;
    }
    return 0;
}

/* An ACCESS record's name may carry msMemScope's ACCESS Attr members after this byte:
 * "aten::addmm\x1fdtype=torch.float32;shape=[2, 3];format=contiguous" (memscope.torch). */
#define MS_ACCESS_ATTR_SEP '\x1f'

/* Ranges that are PyTorch ops (memscope.torch names them by schema, `aten::addmm`): in
 * memscope_dump and the CSV they are msMemScope's OP_LAUNCH rows ATEN_START / ATEN_END, named
 * as msMemScope names them, `torch._ops.aten.addmm.default` (the overload is not recorded:
 * `.default` unless the name carries one). As SQL (col the range name) and in C. */
#define MS_SQL_ATEN_RANGE(col) "(" #col " GLOB 'aten::?*')"
#define MS_SQL_ATEN_NAME(col)                                                                  \
    "('torch._ops.aten.' || substr(" #col ", 7) || CASE WHEN instr(substr(" #col ", 7), '.') " \
    "THEN '' ELSE '.default' END)"
static inline int ms_aten_range(const char *s)
{
    return s && s[0] == 'a' && s[1] == 't' && s[2] == 'e' && s[3] == 'n' && s[4] == ':' &&
           s[5] == ':' && s[6];
}

#endif

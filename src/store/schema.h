/* schema.h: the SQL of the memscope database (docs/database.md), shared by the converter
 * (convert.c) and the CSV export (export.c). */
#ifndef MS_STORE_SCHEMA_H
#define MS_STORE_SCHEMA_H

/* The database format version this code writes and the highest it reads (meta.format_version). */
#define MS_DB_FORMAT_VERSION 1

/* Layer and event-kind ids (tables layers and event_kinds). */
enum {
    MS_LAYER_ANNOTATION = 0,
    MS_LAYER_HEAP = 1,
    MS_LAYER_MMAP = 2,
    MS_LAYER_PINNED = 5,     /* CUDA pinned host memory (HOST_PINNED) */
    MS_LAYER_POOL0 = 16,
    /* CUDA device memory: layer MS_LAYER_CUDA0 + MS_CUDA_LAYERS * d + k for device ordinal d
     * (d = MS_CUDA_NODEV when unknown) and kind k (MS_CUDA_L_*) */
    MS_LAYER_CUDA0 = 1024,
};
enum {
    MS_CUDA_L_HAL, MS_CUDA_L_POOL, MS_CUDA_L_PHYS, MS_CUDA_L_VA, MS_CUDA_L_MAP,
    MS_CUDA_L_PTA,     /* PyTorch's caching allocator: blocks */
    MS_CUDA_L_PTA_SEG, /* ... and the segments it got from the driver */
    MS_CUDA_LAYERS = 8
};
#define MS_CUDA_NODEV 64
enum {
    MS_KIND_MALLOC = 1,
    MS_KIND_FREE = 2,
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

/* Tables, fixed rows and the memscope_dump view; run before loading. */
extern const char ms_schema_sql[];
/* Indexes. The converter runs them before loading: they are partial or on small tables, so
 * keeping them up to date costs less than reading the events table again to build them. */
extern const char ms_schema_index_sql[];

#endif

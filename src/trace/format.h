/* format.h: the memscope trace format, version 1: constants and the byte layout.
 *
 * Written by the agent (src/agent, through encode.h, without malloc) and read by reader.c.
 * docs/trace-format.md is the long description; this comment is the normative summary, and a
 * change to either changes both. All integers are little-endian.
 *
 * One file per traced process image: <trace dir>/<pid>.<n>.mst (n = 0, 1, ... so that an exec'd
 * image with the same pid gets its own file).
 *
 * File header, at offset 0, MS_TRACE_HEADER_SIZE bytes:
 *   off  size  field
 *   0    8     magic "MSTRACE\0"
 *   8    4     version (MS_TRACE_VERSION)
 *   12   4     header_size (4096)
 *   16   4     chunk_align (4096): every chunk starts at a multiple of it
 *   20   4     flags (MS_TRACE_F_*)
 *   24   8     pid
 *   28..       (see struct ms_trace_file_header for the rest)
 *
 * After the header come chunks. A chunk belongs to one thread; its 32-byte header is
 *   0 magic "MSCK" | 4 size (bytes incl. header, multiple of chunk_align) | 8 tid |
 *   12 thread_serial (process-unique, never reused) | 16 seq (0, 1, ... per thread) |
 *   20 used (bytes of committed records after the header) | 24 base_ns (CLOCK_MONOTONIC)
 * The writer stores a record, then publishes it by a release-store of `used`, so a reader of a
 * file whose writer died sees only whole records. Chunks of one thread appear in the file in
 * seq order but interleaved with other threads' chunks; zero-filled pages may sit between
 * chunks when a writer died after reserving space.
 *
 * Records: a type byte, then fields. Delta state restarts at each chunk: prev_ns = base_ns,
 * prev_addr = 0. "dts" is varint(ns - prev_ns); "addr" is varint(zigzag(addr - prev_addr));
 * other integers are unsigned LEB128 varints.
 *   0x10+f  HEAP_ALLOC   dts addr size stack      f = MS_FN_* (malloc, calloc, realloc, ...)
 *   0x20    HEAP_FREE    dts addr
 *   HEAP_ALLOC and HEAP_FREE with bit 0x40 set (0x50+f, 0x60) store the address delta in units
 *   of 16 bytes: zigzag((addr - prev_addr) / 16), used when both addresses are 16-aligned.
 *   0x30+f  MMAP_ALLOC   dts addr size stack      f = 0 mmap, 1 mremap
 *   0x38    MUNMAP       dts addr size
 *   0x40    STACK        id depth pc0 (varint) then depth-1 zigzag deltas pc[i]-pc[i-1]
 *   0x41    MODULE       bias lo hi pathlen path  (an ELF object: load bias, [lo,hi) mapped)
 *   0x42    PROCESS      ppid exelen exe cmdlen cmd (cmd: NUL-separated argv)
 *   0x43    LOST         dts count               (events this thread could not record)
 *   0x80-0xff EXTENSION  len payload             (skippable by readers that do not know it)
 * Stack id 0 means "no stack". Stack ids are unique within a file.
 *
 * Extension payloads always begin with dts (applied to prev_ns by every reader, known type or
 * not); their addresses are absolute varints (prev_addr is not touched); "str" is a varint
 * length then bytes (at most MS_TRACE_MAX_LABEL). Version 1 defines (annotation API):
 *   0x81 STEP          dts                      memscope_step(): ends the current step
 *   0x82 OWNER_PUSH    dts str                  memscope_owner_push(label)
 *   0x83 OWNER_POP     dts
 *   0x84 MARK          dts str                  memscope_mark(msg)
 *   0x85 RANGE_PUSH    dts str                  memscope_range_push(name)
 *   0x86 RANGE_POP     dts
 *   0x87 ACCESS        dts addr size flags str  memscope_access(p, n, flags, op)
 *   0x88 POOL_ALLOC    dts addr size stack str  memscope_pool_alloc(pool, p, n); str = pool
 *   0x89 POOL_FREE     dts addr str
 *   0x8a POOL_RESERVE  dts addr size stack str  memscope_pool_reserve(pool, p, n)
 *   0x8b POOL_RELEASE  dts addr str
 *   0x8c PYFRAME       dts id firstline str     a Python code object: str = file NUL function
 *   0x8d PYSTACK       dts id depth (frame line)*depth
 *                      the Python part of stack id (the STACK record with the same id is the
 *                      native part): frame ids (PYFRAME) and current lines, innermost first
 *   0x8e PYCALL        dts id                   tracer on: a Python call of frame id
 *   0x8f PYRETURN      dts                      tracer on: the matching return
 * and the CUDA driver records (src/agent/cuda.c; device = CUDA ordinal + 1, 0 unknown):
 *   0x90 CUDA_MEM      dts op device addr size stack aux1 aux2 aux3
 *                      a driver memory call that succeeded (or a free that failed: aux2 = its
 *                      CUresult); op = MS_CU_*; aux1/aux2/aux3 by op: stream/pool/the pool's
 *                      reserved bytes (async allocations), handle/offset (cuMemMap), flags
 *                      (managed, host alloc, register, IPC open)
 *   0x91 CUDA_OOM      dts op device size stack free total
 *                      an allocation that failed with CUDA_ERROR_OUT_OF_MEMORY; free/total:
 *                      cuMemGetInfo of the device at that moment (0 when unknown)
 *   0x92 CUDA_LAUNCH   dts op device func stream gx gy gz bx by bz shmem stack
 *   0x93 CUDA_FUNC     dts func str            the kernel name of function handle func, written
 *                      before the first launch of it that the writing thread records
 *   0x94 CUDA_USAGE    dts device process_used device_used device_total
 *                      what NVML reports at a step and at exit (process_used 0: not listed)
 * and the address-space records (src/agent/agent.c; a reader that predates them skips them and
 * sees neither the reservations nor their commits, as before):
 *   0x95 MMAP_RESERVE  dts addr size stack     an anonymous mmap without access (PROT_NONE):
 *                      address space reserved, no memory (instead of MMAP_ALLOC)
 *   0x96 MMAP_COMMIT   dts addr size stack     mprotect(addr, size, prot) with access (read,
 *                      write or exec) that succeeded: memory where it lies in a reservation
 *   0x97 MMAP_DECOMMIT dts addr size           mprotect(addr, size, PROT_NONE) that succeeded
 * and the exec records (src/agent/exec.c; a reader that predates them skips them):
 *   0x98 EXEC          dts pid why str          an exec (or posix_spawn) of program str by
 *                      process pid (as memscope run sees it: a vfork child's own): why is
 *                      MS_EXEC_TRACED when the program should write a trace of its own, else
 *                      the reason it will not (MS_EXEC_*)
 *   0x99 EXEC_FAILED   dts                      the thread's last EXEC returned: no program
 * In sampling mode (sample_bytes = B > 0) a heap allocation of S bytes is in the trace with
 * probability 1 - exp(-S/B), and the free of each recorded one is recorded; other frees may be
 * recorded too (readers drop a free they cannot match). Other layers are recorded whole. The
 * header's heap_* fields hold the exact counts of every heap allocation and free (sample.c adds
 * each thread's to them, atomically, now and then, at thread exit and at process exit). */
#ifndef MS_TRACE_FORMAT_H
#define MS_TRACE_FORMAT_H

#include <stdint.h>

#define MS_TRACE_MAGIC "MSTRACE" /* 8 bytes with the NUL */
#define MS_TRACE_VERSION 1u
#define MS_TRACE_HEADER_SIZE 4096u
#define MS_TRACE_CHUNK_ALIGN 4096u
#define MS_TRACE_CHUNK_MAGIC 0x4b43534du /* "MSCK" little-endian */
#define MS_TRACE_CHUNK_HEADER_SIZE 32u
#define MS_TRACE_MAX_CHUNK (64u << 20) /* readers refuse bigger chunks */
#define MS_TRACE_MAX_DEPTH 1000u
#define MS_TRACE_MAX_PATH 4096u
#define MS_TRACE_MAX_CMDLINE 65536u
#define MS_TRACE_MAX_LABEL 1024u

/* Version 2, the packed trace (pack.h; docs/trace-format.md): the same header fields in a
 * header of MS_TRACE_V2_HEADER_SIZE bytes with MS_TRACE_F_PACKED set, chunks unaligned, and
 * besides raw chunks ("MSCK", description records) packed ones ("MSPK") coded with the model of
 * pack_model.h, each decoding to at most MS_PACK_MAX_RAW bytes of version-1 records (a reader
 * refuses chunks that claim more). */
#define MS_TRACE_PACKED_VERSION 2u
#define MS_TRACE_V2_HEADER_SIZE 128u
#define MS_TRACE_PACK_MAGIC 0x4b50534du /* "MSPK" little-endian: a packed chunk */
#define MS_TRACE_F_PACKED 4u            /* header flag of a packed trace */
#define MS_PACK_MAX_RAW (1u << 20)

#define MS_TRACE_F_STACKS 1u   /* native stacks were collected */
#define MS_TRACE_F_DEFERRED 2u /* collect-mode=deferred: recording starts at memscope_start() */
/* The image began as a fork (or a clone without CLONE_VM) of ppid's image at start_mono_ns: its
 * memory was a copy of its parent's then (copy-on-write, docs/usage.md), not an exec'd program. */
#define MS_TRACE_F_FORKED 8u

/* Record types. */
enum {
    MS_REC_HEAP_ALLOC = 0x10, /* + MS_FN_* */
    MS_REC_HEAP_FREE = 0x20,
    MS_REC_MMAP_ALLOC = 0x30, /* + 0 mmap, 1 mremap */
    MS_REC_MUNMAP = 0x38,
    MS_REC_STACK = 0x40,
    MS_REC_MODULE = 0x41,
    MS_REC_PROCESS = 0x42,
    MS_REC_LOST = 0x43,
    MS_REC_EXTENSION = 0x80,
    MS_REC_F_ALIGNED16 = 0x40, /* flag on HEAP_ALLOC / HEAP_FREE: address delta / 16 */
};

/* Extension record types (the type byte of an EXTENSION record). */
enum {
    MS_EXT_STEP = 0x81,
    MS_EXT_OWNER_PUSH = 0x82,
    MS_EXT_OWNER_POP = 0x83,
    MS_EXT_MARK = 0x84,
    MS_EXT_RANGE_PUSH = 0x85,
    MS_EXT_RANGE_POP = 0x86,
    MS_EXT_ACCESS = 0x87,
    MS_EXT_POOL_ALLOC = 0x88,
    MS_EXT_POOL_FREE = 0x89,
    MS_EXT_POOL_RESERVE = 0x8a,
    MS_EXT_POOL_RELEASE = 0x8b,
    MS_EXT_PYFRAME = 0x8c,
    MS_EXT_PYSTACK = 0x8d,
    MS_EXT_PYCALL = 0x8e,
    MS_EXT_PYRETURN = 0x8f,
    MS_EXT_CUDA_MEM = 0x90,
    MS_EXT_CUDA_OOM = 0x91,
    MS_EXT_CUDA_LAUNCH = 0x92,
    MS_EXT_CUDA_FUNC = 0x93,
    MS_EXT_CUDA_USAGE = 0x94,
    MS_EXT_MMAP_RESERVE = 0x95,
    MS_EXT_MMAP_COMMIT = 0x96,
    MS_EXT_MMAP_DECOMMIT = 0x97,
    MS_EXT_EXEC = 0x98,
    MS_EXT_EXEC_FAILED = 0x99,
};

/* CUDA driver calls (op of the CUDA records). The X-macro gives each its name as users write it
 * (cuda.h's macro names; the agent hooks the current ABI of each, e.g. cuMemAlloc_v2). */
/* clang-format off */
#define MS_CU_OPS(X)                                                                           \
    X(MEM_ALLOC, "cuMemAlloc") X(MEM_ALLOC_PITCH, "cuMemAllocPitch")                          \
    X(MEM_ALLOC_MANAGED, "cuMemAllocManaged") X(MEM_FREE, "cuMemFree")                        \
    X(MEM_ALLOC_ASYNC, "cuMemAllocAsync") X(MEM_ALLOC_FROM_POOL_ASYNC, "cuMemAllocFromPoolAsync") \
    X(MEM_FREE_ASYNC, "cuMemFreeAsync") X(MEM_CREATE, "cuMemCreate")                          \
    X(MEM_RELEASE, "cuMemRelease") X(MEM_ADDRESS_RESERVE, "cuMemAddressReserve")              \
    X(MEM_ADDRESS_FREE, "cuMemAddressFree") X(MEM_MAP, "cuMemMap") X(MEM_UNMAP, "cuMemUnmap") \
    X(MEM_HOST_ALLOC, "cuMemHostAlloc") X(MEM_ALLOC_HOST, "cuMemAllocHost")                   \
    X(MEM_FREE_HOST, "cuMemFreeHost") X(MEM_HOST_REGISTER, "cuMemHostRegister")               \
    X(MEM_HOST_UNREGISTER, "cuMemHostUnregister") X(IPC_OPEN, "cuIpcOpenMemHandle")           \
    X(IPC_CLOSE, "cuIpcCloseMemHandle") X(LAUNCH_KERNEL, "cuLaunchKernel")                    \
    X(LAUNCH_KERNEL_EX, "cuLaunchKernelEx") X(LAUNCH_COOPERATIVE, "cuLaunchCooperativeKernel")
/* clang-format on */

enum {
    MS_CU_NONE = 0,
#define MS_CU_ENUM(id, name) MS_CU_##id,
    MS_CU_OPS(MS_CU_ENUM)
#undef MS_CU_ENUM
        MS_CU_OP_COUNT
};

/* The name of CUDA op op, or NULL when it is not one. */
static inline const char *ms_cu_op_name(uint64_t op)
{
    static const char *const names[] = {0,
#define MS_CU_NAME(id, name) name,
                                        MS_CU_OPS(MS_CU_NAME)
#undef MS_CU_NAME
    };
    return op < MS_CU_OP_COUNT ? names[op] : 0;
}

/* memscope_access() flags (also include/memscope.h). */
#define MS_ACCESS_READ 1u
#define MS_ACCESS_WRITE 2u

/* Allocation functions (low nibble of HEAP_ALLOC). */
enum {
    MS_FN_MALLOC = 0,
    MS_FN_CALLOC = 1,
    MS_FN_REALLOC = 2,
    MS_FN_REALLOCARRAY = 3,
    MS_FN_POSIX_MEMALIGN = 4,
    MS_FN_ALIGNED_ALLOC = 5,
    MS_FN_MEMALIGN = 6,
    MS_FN_VALLOC = 7,
    MS_FN_PVALLOC = 8,
    MS_FN_HEAP_COUNT = 9,
    MS_FN_MMAP = 0,
    MS_FN_MREMAP = 1,
};

/* The file header as laid out on disk (x86-64 little-endian; offsets in the comment above). */
/* Why an exec'd program writes no trace (EXEC records): the agent's reading before the exec. */
enum {
    MS_EXEC_TRACED = 0,     /* it should: its absence is the converter's to notice */
    MS_EXEC_NO_PRELOAD = 1, /* its environment has no LD_PRELOAD naming the agent */
    MS_EXEC_NO_DIR = 2,     /* its environment has no MEMSCOPE_TRACE_DIR */
    MS_EXEC_STATIC = 3,     /* a static executable: no dynamic loader */
    MS_EXEC_FOREIGN = 4,    /* a 32-bit program, or another machine's */
    MS_EXEC_SETUID = 5,     /* setuid or setgid for this user: the loader ignores LD_PRELOAD */
    MS_EXEC_SANITIZER = 6,  /* needs a sanitizer runtime the agent cannot work beside */
    MS_EXEC_REASONS = 7
};

struct ms_trace_file_header {
    char magic[8];
    uint32_t version;
    uint32_t header_size;
    uint32_t chunk_align;
    uint32_t flags;
    uint64_t pid;
    uint64_t ppid;
    uint64_t start_mono_ns; /* CLOCK_MONOTONIC when the agent started in this image */
    uint64_t
        start_real_ns; /* CLOCK_REALTIME at the same moment: epoch = mono - start_mono + start_real */
    uint32_t max_depth;     /* --call-stack=c:N */
    uint32_t image_seq;     /* n in <pid>.<n>.mst */
    uint64_t file_end;      /* bytes reserved so far, header included (writer's atomic cursor) */
    uint64_t lost_events;   /* events not recorded after recording stopped (atomic) */
    uint64_t stopped_errno; /* nonzero when the agent stopped recording: the errno it hit */
    uint64_t sample_bytes;  /* --sampling: mean bytes between heap samples; 0: every event */
    uint64_t heap_allocs;   /* sampling mode: heap allocations, sampled or not (atomic) */
    uint64_t heap_bytes;    /* ... their requested bytes (atomic) */
    uint64_t heap_frees;    /* ... heap frees (atomic) */
    /* --trace-ring: 0, or the offset of the first chunk kept: the chunks before it were dropped
     * (their disk space freed, the file's range a hole) with the events they held; readers of a
     * version-1 trace start there. Every description a kept chunk needs is in a kept chunk (but
     * CUDA_FUNC: NEEDSWORK, docs/production.md). A
     * packed trace keeps the value (1 when the offset means nothing there): events dropped. */
    uint64_t ring_start;
};
/* Offsets are fixed by the documentation; keep the struct in step with it. */
_Static_assert(sizeof(struct ms_trace_file_header) == 128, "trace header layout");

struct ms_trace_chunk_header {
    uint32_t magic;
    uint32_t size;
    uint32_t tid;
    uint32_t thread_serial;
    uint32_t seq;
    uint32_t used;
    uint64_t base_ns;
};
_Static_assert(sizeof(struct ms_trace_chunk_header) == MS_TRACE_CHUNK_HEADER_SIZE, "chunk layout");

/* Returns the name of allocation function fn of record type base (HEAP_ALLOC or MMAP_ALLOC). */
static inline const char *ms_fn_name(int base, int fn)
{
    static const char *const heap[] = {"malloc",       "calloc",         "realloc",
                                       "reallocarray", "posix_memalign", "aligned_alloc",
                                       "memalign",     "valloc",         "pvalloc"};
    if (base == MS_REC_MMAP_ALLOC)
        return fn == MS_FN_MREMAP ? "mremap" : "mmap";
    return fn >= 0 && fn < MS_FN_HEAP_COUNT ? heap[fn] : "?";
}

#endif

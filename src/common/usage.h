/* usage.h: what the OS says a process uses (the usage monitor, docs/usage.md): one sample of a
 * process read from /proc, and the sampler's file in a trace directory (`usage-<pid>.msu`, pid:
 * the program `memscope run` started; several runs may share a directory), which the
 * conversion reads into the usage_samples table.
 *
 * Readers of /proc are here, not in the agent: sampling happens in the memscope process (or any
 * other process: `memscope usage --pid`), never inside the traced program, and costs nothing on
 * its allocation path. The live monitor (issue 39) reads the same samples.
 *
 * The file's byte layout (little-endian, the only byte order memscope runs on), normative:
 *
 *   header, 16 bytes:  "MSUSAGE\0" (8 bytes), u32 version (1), u32 record size (96)
 *   records, 96 bytes each, appended by one writer in time order per process:
 *     0  u64 ts_ns       CLOCK_MONOTONIC ns: the clock of the agent's events
 *     8  u32 pid
 *    12  u32 flags       MS_USAGE_F_* below; unknown bits are ignored
 *    16  u64 rss_anon    RssAnon, bytes        24 u64 rss_file   RssFile
 *    32  u64 rss_shmem   RssShmem              40 u64 stack      VmStk
 *    48  u64 swap        VmSwap                56 u64 pss        smaps_rollup Pss
 *    64  u64 uss         smaps_rollup Private_Clean + Private_Dirty
 *    72  u64 cg_current  the cgroup's memory.current    80 u64 cg_max   memory.max
 *    88  u32 threads     Threads
 *    92  u32 private_kib the pages present and mapped by this process only in its private
 *                        anonymous writable mappings, KiB, when MS_USAGE_F_PAGES (a forked
 *                        process's pagemap was walked in this sample: common/usage_pages.h;
 *                        the walk's ranges are in usage-<pid>.msp); else 0
 *
 * A reader treats the file as hostile: a wrong magic or record size is refused, a newer version
 * is refused, a partial last record (a sampler killed mid-write) is ignored, and at most
 * MS_USAGE_MAX_RECORDS records are read. */
#ifndef MS_USAGE_H
#define MS_USAGE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define MS_USAGE_PREFIX "usage-" /* usage-<pid>.msu in the trace directory */
#define MS_USAGE_SUFFIX ".msu"
#define MS_USAGE_MAX_FILES 4096u /* read in one directory */
#define MS_USAGE_MAGIC "MSUSAGE" /* 8 bytes with its NUL */
#define MS_USAGE_VERSION 1u
#define MS_USAGE_HEADER 16u
#define MS_USAGE_RECORD 96u
#define MS_USAGE_MAX_RECORDS (16u << 20) /* 1.5 GiB of samples: far beyond a real run */

enum {
    MS_USAGE_F_STATUS = 1u << 0, /* the /proc/PID/status fields were read */
    MS_USAGE_F_SMAPS = 1u << 1,  /* pss and uss were read (smaps_rollup) */
    MS_USAGE_F_CGROUP = 1u << 2, /* cg_current was read */
    MS_USAGE_F_CG_MAX = 1u << 3, /* cg_max is a limit (memory.max was not "max") */
    MS_USAGE_F_EXIT = 1u << 4,   /* the process has ended: seen gone at ts_ns; figures are 0 */
    MS_USAGE_F_PAGES = 1u << 5,  /* private_anon was read (a pagemap walk, usage_pages.h) */
};

/* One sample of one process. */
struct ms_usage_sample {
    uint64_t ts_ns;
    uint32_t pid, flags;
    uint64_t rss_anon, rss_file, rss_shmem, stack, swap, pss, uss, cg_current, cg_max;
    uint32_t threads;
    uint64_t private_anon; /* bytes (a multiple of 1 KiB in the file), MS_USAGE_F_PAGES */
};

/* Where a process's cgroup memory figures are: cgroup v2's memory.current and memory.max, else
 * cgroup v1's memory.usage_in_bytes and memory.limit_in_bytes (a v1 limit of 2^62 or more is no
 * limit). Paths are "" when there is no readable memory controller. A sampler that reads them
 * ten times a second keeps them open (ms_usage_read_cgroup's keep): current_fd, max_fd. */
struct ms_usage_cgroup {
    char current[512], max[512];
    int current_fd, max_fd; /* -1: not open */
};

/* Fills *cg for pid from /proc/PID/cgroup (its descriptors -1: this is its init). Returns 0, or
 * a negative errno (-ENOENT: no readable memory controller; cg's paths are "" then). */
int ms_usage_cgroup_find(pid_t pid, struct ms_usage_cgroup *cg);
/* Closes the files ms_usage_read_cgroup kept open; cg must have been through
 * ms_usage_cgroup_find. */
void ms_usage_cgroup_release(struct ms_usage_cgroup *cg);

/* Reads process pid's figures now into *s (ts_ns from CLOCK_MONOTONIC taken before reading).
 * cg: the process's cgroup files (ms_usage_cgroup_find), or NULL to skip the cgroup. smaps: 0
 * skips smaps_rollup (PSS, USS), whose cost grows with the process's resident memory. Returns
 * 0; -ESRCH when the process is gone or a zombie (no memory left to read); another negative
 * errno when /proc/PID/status cannot be read (-EACCES: another user's process). smaps_rollup unreadable (an older kernel, permissions) only leaves
 * MS_USAGE_F_SMAPS clear. Allocates nothing; opens each file for the moment of its read. */
int ms_usage_read(pid_t pid, const struct ms_usage_cgroup *cg, int smaps,
                  struct ms_usage_sample *s);

/* The pace of the reads whose cost grows with the process: smaps_rollup makes the kernel walk
 * the process's page tables (about 1 ms of CPU per 100-200 MiB resident in small pages), and
 * the sampler's pagemap walks (usage_pages.h) read 8 bytes per page mapped. Each kind is read at
 * most as often as keeps it under 1/MS_USAGE_PACE of a core (0.125%) for all the processes
 * sampled together: after a read that cost C of the reading thread's CPU, that process's next
 * is not before MS_USAGE_PACE x C x the number of processes sharing the budget. A process alone
 * has its PSS and USS read at every 0.1 s sample while a read costs under 125 us (tens of MiB
 * resident), every 0.8 s when it costs 1 ms (100-200 MiB), every 8 s at 10 ms (1-2 GiB). Both
 * kinds together (0.25%) and the reads of every tick (status, the cgroup, the trace directory:
 * about 0.1% of a core for a few processes at 0.1 s) keep the sampler under the 0.5% of
 * a core (bench/RESULTS.md). */
#define MS_USAGE_PACE 800

/* ms_usage_read with PSS and USS at the pace (MS_USAGE_PACE, one process alone in the budget):
 * read when CLOCK_MONOTONIC has passed *next_smaps_ns (the caller's, one per process, 0 at
 * first), which is then moved on. Returns what ms_usage_read returns. */
int ms_usage_read_paced(pid_t pid, const struct ms_usage_cgroup *cg, uint64_t *next_smaps_ns,
                        struct ms_usage_sample *s);
/* The same with one budget shared by share processes (the sampler's live ones): the spacing is
 * share times longer, so that all of them together stay under 1/MS_USAGE_PACE of a core. */
int ms_usage_read_shared(pid_t pid, const struct ms_usage_cgroup *cg, uint64_t *next_smaps_ns,
                         unsigned share, struct ms_usage_sample *s);

/* A process sampled again and again (by the sampler of `memscope run` and by `memscope usage`,
 * ten times a second): its /proc files stay open between samples, so that a sample is one
 * pread of status (and of smaps_rollup when the pace allows) instead of an open, two reads and
 * a close of each; the open's walk through /proc is most of what a read costs when its caches
 * are cold, as they are a tenth of a second later. The descriptors are bound to the process
 * they were opened on: once it has ended, another process given its pid reads as ended
 * (-ESRCH), never as it. smaps_rollup is bound to the address space, so it is opened again
 * after an exec. The cgroup is read apart (ms_usage_read_cgroup): processes share one.
 * keep 0: each file is opened and closed at each read, as ms_usage_read does (a caller keeps
 * the files of at most MS_USAGE_KEEP_MAX processes open, and opens the others' at each read).
 * The caller's struct; ms_usage_proc_release closes its descriptors (two at most). */
#define MS_USAGE_KEEP_MAX 64 /* processes a sampler keeps open at once: 128 descriptors */
struct ms_usage_proc {
    pid_t pid;
    int keep;
    int status_fd, smaps_fd; /* -1: not open */
    uint64_t next_smaps_ns;  /* PSS and USS are read again from this time on (the pace) */
    uint64_t smaps_reads, smaps_cpu_ns; /* the paced reads made and their CPU, for the log */
};
void ms_usage_proc_init(struct ms_usage_proc *p, pid_t pid, int keep);
void ms_usage_proc_release(struct ms_usage_proc *p);

/* Reads p's status, and its smaps_rollup at the pace (share: as ms_usage_read_shared), into *s.
 * The cgroup's fields are left 0 (ms_usage_read_cgroup). Returns what ms_usage_read returns. */
int ms_usage_proc_read(struct ms_usage_proc *p, unsigned share, struct ms_usage_sample *s);

/* Adds the figures of cgroup cg (ms_usage_cgroup_find) to *s: cg_current and cg_max, and the
 * flags MS_USAGE_F_CGROUP and MS_USAGE_F_CG_MAX where read. Nothing when cg has no files. keep:
 * its files stay open for the next read (ms_usage_cgroup_release closes them). */
void ms_usage_read_cgroup(struct ms_usage_cgroup *cg, int keep, struct ms_usage_sample *s);

/* Whether a file name is a usage file's: "usage-" ... ".msu". */
int ms_usage_is_file(const char *name);

/* Encodes s as one record (MS_USAGE_RECORD bytes) into out. */
void ms_usage_encode(const struct ms_usage_sample *s, unsigned char *out);
/* Writes the header (MS_USAGE_HEADER bytes) into out. */
void ms_usage_header(unsigned char *out);

/* Reads the sampler file at path: *out gets its records (the caller frees it with free()),
 * *n their count. Returns 0; -ENOENT when there is no such file; MS_EFORMAT for a file that is
 * not a usage file; MS_EVERSION for a newer version; MS_ENOMEM; another negative errno. */
int ms_usage_load(const char *path, struct ms_usage_sample **out, size_t *n);

#endif

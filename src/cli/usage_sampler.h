/* usage_sampler.h: `memscope run`'s usage monitor: a thread of the memscope process that samples
 * every traced process from /proc every --usage-interval into <trace dir>/usage-<pid>.msu
 * (common/usage.h, docs/usage.md), and walks the pagemap of each forked one for the pages it
 * copied into <trace dir>/usage-<pid>.msp (common/usage_pages.h). The traced program runs
 * nothing for it. */
#ifndef MS_USAGE_SAMPLER_H
#define MS_USAGE_SAMPLER_H

#include <dirent.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

struct usage_proc; /* one sampled process (usage_sampler.c) */

struct usage_sampler {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int running, stop;
    int fd;                    /* the usage file */
    uint64_t size, size_limit; /* its bytes; RLIMIT_FSIZE (never passed: no SIGXFSZ) */
    char dir[4096];            /* the trace directory: its <pid>.<n>.mst names the traced pids */
    DIR *dirp;                 /* it, open; listed again only when it may have changed */
    uint64_t dir_mtime_ns;     /* its time at the last listing */
    uint64_t listed_real_ns;   /* when that listing began (CLOCK_REALTIME) */
    int rescan;                /* the last listing left something to read again */
    pid_t root;                /* the program memscope started */
    uint64_t interval_ns;
    struct usage_proc *procs;
    size_t nprocs, cap;
    unsigned kept; /* processes whose /proc files are kept open now */
    /* what it did, for the log and bench/RESULTS.md: samples, ticks, the thread's CPU; the
     * directory's listings; the paced PSS/USS reads and their CPU */
    uint64_t samples, ticks, cpu_ns, listings, smaps_reads, smaps_cpu_ns;
    int write_failed; /* a write failed or would pass the limit: no more are made */
    /* copy-on-write: the pages file usage-<root>.msp (created at its first walk, -1 before),
     * its bytes, whether it ended; the pagemap walks made and written, their CPU */
    int pfd;
    uint64_t psize;
    int pwrite_failed;
    uint64_t walks, walks_written, walk_cpu_ns;
};

/* Starts sampling root and every process that writes a trace into trace_dir, every interval_s
 * seconds (> 0), into trace_dir/usage-<root>.msu. Returns 0, or a negative errno (nothing started; the
 * run goes on without samples). */
int usage_sampler_start(struct usage_sampler *u, const char *trace_dir, pid_t root,
                        double interval_s);

/* Stops the thread (if started) after one last pass, which writes the exit sample of every
 * process found gone, and closes the file. Safe on a sampler that did not start. */
void usage_sampler_stop(struct usage_sampler *u);

#endif

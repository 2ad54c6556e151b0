/* usage_nvml.h: device memory through NVML for `memscope usage --devices` (docs/usage.md):
 * libnvidia-ml.so.1 loaded with dlopen when present (no NVIDIA package at build time), devices
 * by NVML index. Used by cmd_usage.c only; the agent asks NVML itself under `memscope run`
 * (src/agent/cuda.c). */
#ifndef MS_USAGE_NVML_H
#define MS_USAGE_NVML_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct usage_nvml {
    void *lib;
    int (*init)(void);
    int (*count)(unsigned *);
    int (*by_index)(unsigned, void **);
    int (*memory)(void *, void *);
    int (*processes)(void *, unsigned *, void *);
};

/* One device's figures now: used, free and total bytes. */
struct usage_nvml_sample {
    uint64_t used, free, total;
};

/* Loads and initializes NVML. Returns 0, or a negative code with a one-line reason in why
 * ("libnvidia-ml.so.1 not found (no NVIDIA driver)", "nvmlInit failed: N"). */
int usage_nvml_open(struct usage_nvml *n, char *why, size_t len);

/* The number of devices, or a negative code. */
int usage_nvml_count(struct usage_nvml *n);

/* Reads device index d into *s, and into shares[i] the bytes NVML lists for pids[i] on it (0
 * when not listed). Returns 0 or a negative code. */
int usage_nvml_read(struct usage_nvml *n, unsigned d, const pid_t *pids, size_t npids,
                    uint64_t *shares, struct usage_nvml_sample *s);

#endif

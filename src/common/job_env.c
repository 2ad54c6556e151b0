/* job_env.c: a distributed job's rank and id from the launcher's environment (job_env.h).
 * Called once per conversion. */
#include "job_env.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long long number(const char *const *names)
{
    for (; *names; names++) {
        const char *v = getenv(*names);
        if (!v || *v < '0' || *v > '9')
            continue;
        char *end;
        errno = 0;
        long long x = strtoll(v, &end, 10);
        if (!errno && !*end && x <= 2147483647LL)
            return x;
    }
    return -1;
}

void ms_job_env_read(struct ms_job_env *e)
{
    static const char *const rank[] = {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                       NULL};
    static const char *const local[] = {"LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK",
                                        NULL};
    static const char *const world[] = {"WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", NULL};
    static const char *const job[] = {"MEMSCOPE_JOB", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", NULL};
    e->rank = number(rank);
    e->local_rank = number(local);
    e->world_size = number(world);
    e->job[0] = 0;
    for (const char *const *n = job; *n && !e->job[0]; n++) {
        const char *v = getenv(*n);
        if (!v || !*v || strlen(v) >= sizeof e->job)
            continue;
        int ok = 1;
        for (const char *p = v; *p; p++)
            ok &= *p > ' ' && *p < 127;
        if (ok)
            snprintf(e->job, sizeof e->job, "%s", v);
    }
}

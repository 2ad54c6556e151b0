/* job_env.h: which rank of a distributed job this process is, from the launcher's environment
 * (docs/columnar.md): the one rule the conversion (meta rows rank, local_rank, world_size, job)
 * and the Parquet export (their defaults) share. */
#ifndef MS_JOB_ENV_H
#define MS_JOB_ENV_H

struct ms_job_env {
    long long rank, local_rank, world_size; /* -1: not set */
    char job[128];                          /* "": not set */
};

/* Reads, first set wins: rank from RANK (torchrun, torch.distributed's env://), SLURM_PROCID,
 * OMPI_COMM_WORLD_RANK, PMI_RANK; local_rank from LOCAL_RANK, SLURM_LOCALID,
 * OMPI_COMM_WORLD_LOCAL_RANK; world_size from WORLD_SIZE, SLURM_NTASKS, OMPI_COMM_WORLD_SIZE;
 * job from MEMSCOPE_JOB, TORCHELASTIC_RUN_ID, SLURM_JOB_ID. A value that is not a number from 0
 * to 2^31-1 (a job: printable ASCII, under 128 bytes) counts as not set. */
void ms_job_env_read(struct ms_job_env *e);

#endif

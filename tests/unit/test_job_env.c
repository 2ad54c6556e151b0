/* test_job_env.c: src/common/job_env.c, the one rule that reads a distributed job's rank, local
 * rank, world size and id from the launcher's environment: the order of the names (first set
 * wins), values that count as not set (not a number, negative, over 2^31-1, a job id with a
 * blank or a control character, 128 bytes or more) and fall through to the next name. */
#include "test.h"

#include "common/job_env.h"

#include <stdlib.h>

static const char *const all[] = {"RANK",
                                  "SLURM_PROCID",
                                  "OMPI_COMM_WORLD_RANK",
                                  "PMI_RANK",
                                  "LOCAL_RANK",
                                  "SLURM_LOCALID",
                                  "OMPI_COMM_WORLD_LOCAL_RANK",
                                  "WORLD_SIZE",
                                  "SLURM_NTASKS",
                                  "OMPI_COMM_WORLD_SIZE",
                                  "MEMSCOPE_JOB",
                                  "TORCHELASTIC_RUN_ID",
                                  "SLURM_JOB_ID"};

static void clear(void)
{
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        unsetenv(all[i]);
}

int main(void)
{
    struct ms_job_env e;
    clear();
    ms_job_env_read(&e);
    CHECK_EQ(e.rank, -1);
    CHECK_EQ(e.local_rank, -1);
    CHECK_EQ(e.world_size, -1);
    CHECK_STREQ(e.job, "");

    /* torchrun's names first */
    setenv("RANK", "3", 1);
    setenv("SLURM_PROCID", "5", 1);
    setenv("LOCAL_RANK", "1", 1);
    setenv("WORLD_SIZE", "8", 1);
    setenv("TORCHELASTIC_RUN_ID", "run-42", 1);
    setenv("SLURM_JOB_ID", "777", 1);
    ms_job_env_read(&e);
    CHECK_EQ(e.rank, 3);
    CHECK_EQ(e.local_rank, 1);
    CHECK_EQ(e.world_size, 8);
    CHECK_STREQ(e.job, "run-42");
    setenv("MEMSCOPE_JOB", "mine", 1);
    ms_job_env_read(&e);
    CHECK_STREQ(e.job, "mine");

    /* values that are not set fall through to the next name */
    setenv("RANK", "x1", 1);
    setenv("MEMSCOPE_JOB", "has blank", 1);
    setenv("TORCHELASTIC_RUN_ID", "", 1);
    ms_job_env_read(&e);
    CHECK_EQ(e.rank, 5);
    CHECK_STREQ(e.job, "777");
    setenv("SLURM_PROCID", "-2", 1);
    setenv("OMPI_COMM_WORLD_RANK", "2147483648", 1);
    setenv("PMI_RANK", "2147483647", 1);
    setenv("SLURM_JOB_ID", "tab\there", 1);
    ms_job_env_read(&e);
    CHECK_EQ(e.rank, 2147483647);
    CHECK_STREQ(e.job, "");
    setenv("PMI_RANK", "12abc", 1);
    char longjob[129];
    memset(longjob, 'j', 128);
    longjob[128] = 0;
    setenv("MEMSCOPE_JOB", longjob, 1);
    ms_job_env_read(&e);
    CHECK_EQ(e.rank, -1);
    CHECK_STREQ(e.job, "");
    longjob[127] = 0; /* 127 bytes fit */
    setenv("MEMSCOPE_JOB", longjob, 1);
    ms_job_env_read(&e);
    CHECK_STREQ(e.job, longjob);

    /* Slurm's and Open MPI's names alone */
    clear();
    setenv("SLURM_LOCALID", "0", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "16", 1);
    setenv("OMPI_COMM_WORLD_RANK", "9", 1);
    ms_job_env_read(&e);
    CHECK_EQ(e.rank, 9);
    CHECK_EQ(e.local_rank, 0);
    CHECK_EQ(e.world_size, 16);
    clear();
    return 0;
}

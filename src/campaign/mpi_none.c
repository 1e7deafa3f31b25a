/* The MPI entry points of a build without MPI (docs/replay.md "Campaigns"):
 * `--mpi` is a usage error, "built without MPI". mpi.c replaces this file
 * when CMake finds MPI. */
#include <string.h>

#include "campaign/campaign.h"

int plena_campaign_have_mpi(void)
{
    return 0;
}

static int no_mpi(struct plena_err *err)
{
    return PLENA_FAIL(err, PLENA_E_USAGE, "--mpi", "built without MPI");
}

/* The body of both campaign entry points: nothing ran (the summary, of
 * `size` bytes, zeroed); the rest of their arguments is unused. */
static int no_mpi_run(const void *m, const void *s, const void *o, const void *mo, void *sum,
                      size_t size, struct plena_err *err)
{
    (void)m, (void)s, (void)o, (void)mo;
    memset(sum, 0, size);
    return no_mpi(err);
}

int plena_campaign_mpi_init(struct plena_campaign_mpi **m, struct plena_err *err)
{
    *m = NULL;
    return no_mpi(err);
}

int plena_campaign_mpi_rank(const struct plena_campaign_mpi *m)
{
    (void)m;
    return 0;
}

int plena_campaign_mpi_size(const struct plena_campaign_mpi *m)
{
    (void)m;
    return 1;
}

void plena_campaign_mpi_bcast_ints(struct plena_campaign_mpi *m, int64_t *v, size_t n)
{
    (void)m;
    (void)v;
    (void)n;
}

void plena_campaign_mpi_bcast_str(struct plena_campaign_mpi *m, char *buf, size_t n)
{
    (void)m;
    (void)buf;
    (void)n;
}

int plena_campaign_mpi_finish(struct plena_campaign_mpi *m, int code)
{
    (void)m;
    return code;
}

int plena_campaign_run_mpi(struct plena_campaign_mpi *m, const struct plena_campaign_set *s,
                           const struct plena_campaign_run_opts *o,
                           const struct plena_campaign_mpi_opts *mo,
                           struct plena_campaign_run_summary *sum, struct plena_err *err)
{
    return no_mpi_run(m, s, o, mo, sum, sizeof *sum, err);
}

int plena_campaign_determinism_mpi(struct plena_campaign_mpi *m, const struct plena_campaign_set *s,
                                   const struct plena_campaign_det_opts *o,
                                   const struct plena_campaign_mpi_opts *mo,
                                   struct plena_campaign_det_summary *sum, struct plena_err *err)
{
    return no_mpi_run(m, s, o, mo, sum, sizeof *sum, err);
}

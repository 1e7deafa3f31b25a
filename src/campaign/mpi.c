/* MPI distribution of a campaign (docs/replay.md "Campaigns", with its
 * sharding, the determinism gate's parallel pass and the per-node width):
 * rank 0 computes the work list and broadcasts it (ids, hashes and the trace
 * JSON itself), item k of the cost-ordered list runs on rank k mod R in that
 * rank's local pool, and rank 0 alone writes results, manifest, progress,
 * failures, exports and the verdicts. Compiled only when CMake finds MPI.
 * Other ranks never re-read the inputs and never ship large binaries: only
 * results.json, stage_profile.json and the tail of the worker log travel.
 * Messages are raw bytes (a homogeneous cluster is assumed: same binary, same
 * endianness). */
#define _XOPEN_SOURCE 700 /* nftw, mkdtemp */
#include <mpi.h>

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "campaign/campaign_internal.h"
#include "common/alloc.h"
#include "gen/build.h"
#include "common/fileio.h"
#include "replay/jsonw.h"
#include "replay/result.h"

enum { TAG_RESULT = 71, TAG_DONE = 72 };

#define LOG_TAIL_BYTES (256 * 1024) /* the log is for reading failures, not archiving */
#define BCAST_CHUNK    (1 << 30)

struct plena_campaign_mpi {
    int rank, size;
    int node_rank, node_size; /* MPI_COMM_TYPE_SHARED split */
    MPI_Comm node;
};

int plena_campaign_have_mpi(void)
{
    return 1;
}

/* Waits for a nonblocking operation without spinning a core: the ranks that
 * wait (during rank 0's serial pass or probe) share the node with workers. */
static void wait_req(MPI_Request *r)
{
    int flag = 0;
    for (;;) {
        MPI_Test(r, &flag, MPI_STATUS_IGNORE);
        if (flag) return;
        struct timespec ts = {0, 2000000L};
        nanosleep(&ts, NULL);
    }
}

static void bcast_bytes(void *p, size_t n)
{
    for (size_t off = 0; off < n; off += BCAST_CHUNK) {
        size_t k = n - off < BCAST_CHUNK ? n - off : BCAST_CHUNK;
        MPI_Request r;
        MPI_Ibcast((char *)p + off, (int)k, MPI_BYTE, 0, MPI_COMM_WORLD, &r);
        wait_req(&r);
    }
}

int plena_campaign_mpi_init(struct plena_campaign_mpi **out, struct plena_err *err)
{
    *out = NULL;
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited && MPI_Init(NULL, NULL) != MPI_SUCCESS)
        return PLENA_FAIL(err, PLENA_E_INTERNAL, "MPI_Init", "MPI initialisation failed");
    struct plena_campaign_mpi *m = plena_calloc(1, sizeof *m);
    if (!m) return PLENA_FAIL(err, PLENA_E_NOMEM, "mpi", "out of memory");
    MPI_Comm_rank(MPI_COMM_WORLD, &m->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &m->size);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, m->rank, MPI_INFO_NULL, &m->node);
    MPI_Comm_rank(m->node, &m->node_rank);
    MPI_Comm_size(m->node, &m->node_size);
    *out = m;
    return 0;
}

int plena_campaign_mpi_rank(const struct plena_campaign_mpi *m)
{
    return m->rank;
}

int plena_campaign_mpi_size(const struct plena_campaign_mpi *m)
{
    return m->size;
}

void plena_campaign_mpi_bcast_ints(struct plena_campaign_mpi *m, int64_t *v, size_t n)
{
    (void)m;
    bcast_bytes(v, n * sizeof *v);
}

void plena_campaign_mpi_bcast_str(struct plena_campaign_mpi *m, char *buf, size_t n)
{
    (void)m;
    bcast_bytes(buf, n);
    buf[n - 1] = 0;
}

int plena_campaign_mpi_finish(struct plena_campaign_mpi *m, int code)
{
    int worst = code;
    if (m) {
        MPI_Request r;
        MPI_Iallreduce(&code, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &r);
        wait_req(&r);
        MPI_Comm_free(&m->node);
        plena_free(m);
    }
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Finalize();
    return worst;
}

/* ---- scratch ---- */
static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static void rm_tree(const char *path)
{
    struct stat st;
    if (!lstat(path, &st)) nftw(path, rm_one, 32, FTW_DEPTH | FTW_PHYS);
}

static int make_scratch(const struct plena_campaign_mpi *m,
                        const struct plena_campaign_mpi_opts *mo, char *dir, size_t n,
                        struct plena_err *err)
{
    const char *base = mo && mo->scratch ? mo->scratch : getenv("TMPDIR");
    if (!base || !*base) base = "/tmp";
    int rc = plena_mkdir_p(base, err);
    if (rc) return rc;
    if (snprintf(dir, n, "%s/plena_campaign_rank%d_XXXXXX", base, m->rank) >= (int)n)
        return PLENA_FAIL(err, PLENA_E_OUTPUT, base, "scratch path too long");
    if (!mkdtemp(dir))
        return PLENA_FAIL(err, PLENA_E_OUTPUT, base, "cannot create rank scratch: %s",
                          strerror(errno));
    return 0;
}

/* ---- the work list broadcast ---- */
/* Rank 0 passes status (nonzero: every rank stops, nothing is sent) and
 * idx[0..n-1] into s; the others receive the items as `local` (k order).
 * *status_out is rank 0's status on every rank. */
static int bcast_work(struct plena_campaign_mpi *m, int status, const struct plena_campaign_set *s,
                      const size_t *idx, size_t n, struct plena_campaign_set *local,
                      int *status_out, struct plena_err *err)
{
    int64_t hdr[3] = {status, (int64_t)n, 0};
    struct plena_buf b;
    plena_buf_init(&b);
    if (m->rank == 0 && !status) {
        for (size_t k = 0; k < n; k++) {
            const struct plena_replay_item *it = &s->v[idx[k]].item;
            plena_buf_append(&b, it->trace_id, strlen(it->trace_id) + 1);
            plena_buf_append(&b, it->dir_name, strlen(it->dir_name) + 1);
            plena_buf_append(&b, it->trace_sha256, strlen(it->trace_sha256) + 1);
            plena_buf_append(&b, it->fingerprint, strlen(it->fingerprint) + 1);
            if (plena_replay_json_canonical(&b, it->trace)) b.failed = 1;
            plena_buf_append(&b, "", 1);
        }
        /* a failed pack still broadcasts (status), so no rank is left waiting */
        if (b.failed) hdr[0] = PLENA_E_NOMEM;
        hdr[2] = b.failed ? 0 : (int64_t)b.len;
    }
    bcast_bytes(hdr, sizeof hdr);
    *status_out = (int)hdr[0];
    int rc = 0;
    if (hdr[0]) {
        if (m->rank == 0 && b.failed) rc = PLENA_FAIL(err, PLENA_E_NOMEM, "mpi", "out of memory");
        plena_buf_free(&b);
        return rc;
    }
    size_t len = (size_t)hdr[2];
    n = (size_t)hdr[1];
    char *data = m->rank == 0 ? b.data : plena_malloc(len ? len : 1);
    if (!data && m->rank != 0) /* the others would wait in the broadcast: end the job */
        MPI_Abort(MPI_COMM_WORLD, 5);
    bcast_bytes(data, len);
    if (m->rank != 0) {
        memset(local, 0, sizeof *local);
        local->v = plena_calloc(n ? n : 1, sizeof *local->v);
        if (!local->v) rc = PLENA_FAIL(err, PLENA_E_NOMEM, "mpi", "out of memory");
        size_t pos = 0;
        for (size_t k = 0; k < n && !rc; k++) {
            const char *f[5];
            for (int i = 0; i < 5; i++) {
                f[i] = data + pos;
                pos += strlen(f[i]) + 1;
            }
            struct plena_campaign_trace *t = &local->v[k];
            local->n = k + 1;
            t->item.trace = json_loads(f[4], JSON_REJECT_DUPLICATES, NULL);
            snprintf(t->item.trace_id, sizeof t->item.trace_id, "%s", f[0]);
            snprintf(t->item.dir_name, sizeof t->item.dir_name, "%s", f[1]);
            snprintf(t->item.trace_sha256, sizeof t->item.trace_sha256, "%s", f[2]);
            snprintf(t->item.fingerprint, sizeof t->item.fingerprint, "%s", f[3]);
            snprintf(t->item.source_path, sizeof t->item.source_path, "rank0:%s", f[0]);
            /* the broadcast must reproduce rank 0's trace exactly */
            char hex[65] = "";
            if (!t->item.trace || plena_replay_json_sha256(t->item.trace, 1, hex, err) ||
                strcmp(hex, f[2]))
                rc = PLENA_FAIL(err, PLENA_E_INTERNAL, f[0],
                                "broadcast trace does not hash to rank 0's trace_sha256");
        }
        plena_free(data);
    }
    plena_buf_free(&b);
    return rc;
}

/* ---- the distributed pool ---- */
struct msg_hdr {
    int64_t k, exit_code, signal, interrupted, finished, worker, max_rss_kb;
    double host_seconds;
    int64_t len[3]; /* results.json, stage_profile.json, log tail; -1 absent */
};
/* the three files a message carries: two of the build directory, then the
 * worker log */
static const char *msg_file(int f)
{
    return f == 0   ? plena_build_file_name(PLENA_BUILD_FILE_RESULTS)
           : f == 1 ? plena_build_file_name(PLENA_BUILD_FILE_STAGE_PROFILE)
                    : plena_build_file_name(PLENA_BUILD_FILE_WORKER_LOG);
}

struct done_msg {
    int64_t rc, interrupted;
    char msg[512];
};

struct dist {
    struct plena_campaign_mpi *m;
    const struct plena_campaign_worker *w;
    volatile sig_atomic_t *stop;
    int shared_fs;
    size_t n;       /* work-list items */
    unsigned width; /* this rank's local width */
    /* rank 0 */
    struct plena_campaign_job *all; /* rank 0's view of every item, k order */
    const char *root_dir;           /* where rank 0 writes received results */
    plena_campaign_done_fn done;
    plena_campaign_tick_fn tick;
    void *ctx;
    size_t remote_left;  /* remote items not reported yet */
    size_t remote_width; /* running estimate bound for progress */
    int ranks_done;
    int remote_interrupted;
    int rc;
    struct plena_err *err;
    /* other ranks */
    const char *scratch_root;
};

static int is_mine(const struct dist *d, size_t k, int rank)
{
    return (int)(k % (size_t)d->m->size) == rank;
}

/* other ranks: the last message of a pool, also sent when the rank could not
 * start its share, since rank 0 waits for one from every rank */
static void send_done(int rc, int interrupted, const struct plena_err *e)
{
    struct done_msg dm;
    memset(&dm, 0, sizeof dm);
    dm.rc = rc;
    dm.interrupted = interrupted;
    if (rc && e) plena_err_format(e, dm.msg, sizeof dm.msg);
    MPI_Send(&dm, (int)sizeof dm, MPI_BYTE, 0, TAG_DONE, MPI_COMM_WORLD);
}

/* rank 0: one message from a rank */
static void handle_msg(struct dist *d, MPI_Status *st)
{
    int count = 0;
    MPI_Get_count(st, MPI_BYTE, &count);
    char *buf = plena_malloc(count > 0 ? (size_t)count : 1);
    if (!buf) {
        /* the message must still be taken off the wire; without memory the
         * job cannot continue sensibly */
        MPI_Abort(MPI_COMM_WORLD, 5);
        return;
    }
    MPI_Recv(buf, count, MPI_BYTE, st->MPI_SOURCE, st->MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (st->MPI_TAG == TAG_DONE) {
        struct done_msg dm;
        memset(&dm, 0, sizeof dm);
        memcpy(&dm, buf, (size_t)count < sizeof dm ? (size_t)count : sizeof dm);
        dm.msg[sizeof dm.msg - 1] = 0;
        d->ranks_done++;
        if (dm.interrupted) d->remote_interrupted = 1;
        if (dm.rc && !d->rc) {
            d->rc = (int)dm.rc;
            PLENA_FAIL(d->err, (enum plena_status)dm.rc, "mpi", "rank %d: %s", st->MPI_SOURCE,
                       dm.msg);
        }
        plena_free(buf);
        return;
    }
    struct msg_hdr h;
    if ((size_t)count < sizeof h) {
        plena_free(buf);
        return;
    }
    memcpy(&h, buf, sizeof h);
    if (h.k < 0 || (size_t)h.k >= d->n || !is_mine(d, (size_t)h.k, st->MPI_SOURCE)) {
        if (!d->rc)
            d->rc = PLENA_FAIL(d->err, PLENA_E_INTERNAL, "mpi",
                               "rank %d reported item %lld it does not own", st->MPI_SOURCE,
                               (long long)h.k);
        plena_free(buf);
        return;
    }
    struct plena_campaign_job *j = &d->all[h.k];
    int ok = 1;
    if (!d->shared_fs) {
        char dir[4400], p[4500];
        snprintf(dir, sizeof dir, "%s/%s", d->root_dir, j->dir_name);
        struct plena_err e;
        plena_err_clear(&e);
        if (plena_mkdir_p(dir, &e)) ok = 0;
        size_t off = sizeof h;
        /* log and profile first: results.json is the checkpoint, so it lands last */
        static const int order[3] = {2, 1, 0};
        const char *data[3];
        for (int f = 0; f < 3; f++) {
            data[f] = h.len[f] >= 0 ? buf + off : NULL;
            off += h.len[f] > 0 ? (size_t)h.len[f] : 0;
        }
        for (int i = 0; i < 3 && ok; i++) {
            int f = order[i];
            snprintf(p, sizeof p, "%s/%s", dir, msg_file(f));
            if (data[f]) {
                if (plena_file_write_atomic(p, data[f], (size_t)h.len[f], &e)) ok = 0;
            } else if (f == 1 && data[0])
                remove(p); /* a stale profile of an earlier attempt */
        }
        if (!ok && !d->rc) {
            d->rc = e.code ? (int)e.code : PLENA_E_OUTPUT;
            if (d->err && !d->err->code) *d->err = e;
        }
    }
    j->exit_code = (int)h.exit_code;
    j->signal = (int)h.signal;
    j->interrupted = (int)h.interrupted;
    j->finished = (int)h.finished;
    j->worker = (int)h.worker;
    j->max_rss_kb = (long)h.max_rss_kb;
    j->host_seconds = h.host_seconds;
    snprintf(j->log_path, sizeof j->log_path, "%s/%s/%s", d->root_dir, j->dir_name,
             plena_build_file_name(PLENA_BUILD_FILE_WORKER_LOG));
    if (d->remote_left) d->remote_left--;
    if (ok && d->done) d->done(d->ctx, j);
    plena_free(buf);
}

static int poll_msgs(struct dist *d)
{
    int got = 0;
    for (;;) {
        int flag = 0;
        MPI_Status st;
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
        if (!flag) return got;
        handle_msg(d, &st);
        got = 1;
    }
}

static size_t remote_running(const struct dist *d)
{
    return d->remote_left < d->remote_width ? d->remote_left : d->remote_width;
}

static void root_done(void *ctx, struct plena_campaign_job *j)
{
    struct dist *d = ctx;
    j->worker = j->worker * d->m->size; /* slot * R + rank: unique across ranks */
    if (d->done) d->done(d->ctx, j);
}

static void root_tick(void *ctx, size_t n_running, size_t n_dispatched)
{
    struct dist *d = ctx;
    poll_msgs(d);
    if (d->tick) d->tick(d->ctx, n_running + remote_running(d), n_dispatched);
}

/* other ranks: ship one completion to rank 0 */
static void remote_done(void *ctx, struct plena_campaign_job *j)
{
    struct dist *d = ctx;
    struct msg_hdr h;
    memset(&h, 0, sizeof h);
    h.k = (int64_t)j->trace;
    h.exit_code = j->exit_code;
    h.signal = j->signal;
    h.interrupted = j->interrupted;
    h.finished = j->finished;
    h.worker = (int64_t)j->worker * d->m->size + d->m->rank;
    h.max_rss_kb = j->max_rss_kb;
    h.host_seconds = j->host_seconds;
    char *data[3] = {NULL, NULL, NULL};
    size_t len[3] = {0, 0, 0};
    char dir[4400];
    snprintf(dir, sizeof dir, "%s/%s", d->scratch_root, j->dir_name);
    for (int f = 0; f < 3; f++) {
        h.len[f] = -1;
        if (d->shared_fs) continue;
        char p[4500];
        snprintf(p, sizeof p, "%s/%s", dir, msg_file(f));
        struct stat st;
        if (stat(p, &st)) continue;
        if (plena_file_read_all(p, &data[f], &len[f], NULL)) continue;
        if (f == 2 && len[f] > LOG_TAIL_BYTES) {
            memmove(data[f], data[f] + len[f] - LOG_TAIL_BYTES, LOG_TAIL_BYTES);
            len[f] = LOG_TAIL_BYTES;
        }
        h.len[f] = (int64_t)len[f];
    }
    struct plena_buf b;
    plena_buf_init(&b);
    plena_buf_append(&b, &h, sizeof h);
    for (int f = 0; f < 3; f++) {
        if (data[f]) plena_buf_append(&b, data[f], len[f]);
        plena_free(data[f]);
    }
    if (b.failed) { /* rank 0 would wait for this item forever */
        plena_buf_free(&b);
        MPI_Abort(MPI_COMM_WORLD, 5);
        return;
    }
    MPI_Send(b.data, (int)b.len, MPI_BYTE, 0, TAG_RESULT, MPI_COMM_WORLD);
    plena_buf_free(&b);
    /* shipped: the rank-local build directory (binaries included) goes */
    if (!d->shared_fs) rm_tree(dir);
}

/* Runs the work list across the ranks. Rank 0 dispatches its own items from
 * d->all (skipping k < first) and receives the rest; the others run `mine`. */
static int dist_pool(struct dist *d, struct plena_campaign_job *mine, size_t n_mine, size_t first,
                     int *interrupted, struct plena_err *err)
{
    int rc = 0;
    *interrupted = 0;
    if (d->m->rank != 0) {
        struct plena_err e;
        plena_err_clear(&e);
        rc = plena_campaign_pool(d->w, mine, n_mine, d->width, d->stop, remote_done, NULL, d,
                                 interrupted, &e);
        send_done(rc, *interrupted, &e);
        if (rc && err) *err = e;
        return rc;
    }
    /* rank 0: own items, then drain until every rank said done */
    size_t n_own = 0;
    d->remote_left = 0;
    for (size_t k = first; k < d->n; k++) {
        if (is_mine(d, k, 0))
            n_own++;
        else
            d->remote_left++;
    }
    struct plena_campaign_job *own = plena_calloc(n_own ? n_own : 1, sizeof *own);
    if (!own) rc = PLENA_FAIL(err, PLENA_E_NOMEM, "mpi", "out of memory");
    size_t o = 0;
    for (size_t k = first; own && k < d->n; k++)
        if (is_mine(d, k, 0)) own[o++] = d->all[k];
    d->err = err;
    if (!rc)
        rc = plena_campaign_pool(d->w, own, n_own, d->width, d->stop, root_done, root_tick, d,
                                 interrupted, err);
    /* whatever happened locally, the other ranks' messages must be taken */
    while (d->ranks_done < d->m->size - 1) {
        if (!poll_msgs(d)) {
            if (d->tick) d->tick(d->ctx, remote_running(d), d->n);
            struct timespec ts = {0, 5000000L};
            nanosleep(&ts, NULL);
        }
    }
    plena_free(own);
    if (d->remote_interrupted) *interrupted = 1;
    return rc ? rc : d->rc;
}

/* The fields of a pass every rank sets; the rest of d starts zeroed. */
static void dist_begin(struct dist *d, struct plena_campaign_mpi *m,
                       const struct plena_campaign_worker *w, volatile sig_atomic_t *stop,
                       int shared_fs, size_t n, unsigned width)
{
    *d =
        (struct dist){.m = m, .w = w, .stop = stop, .shared_fs = shared_fs, .n = n, .width = width};
}

/* A rank > 0's share of a pass: the items k >= first of local that are
 * this rank's (is_mine), replayed into sroot (created here) with scratch
 * as their working directory. *mine holds the jobs (the caller frees it).
 * After a local failure the pool still runs, with no jobs, so that rank 0
 * hears from this rank. Returns 0 or the first error. */
static int remote_pass(struct dist *d, const struct plena_campaign_set *local, size_t first,
                       const char *scratch, const char *sroot, struct plena_campaign_job **mine,
                       int *interrupted, struct plena_err *err)
{
    int rc = 0;
    size_t n_mine = 0;
    *mine = plena_calloc(d->n ? d->n : 1, sizeof **mine);
    if (!*mine) rc = PLENA_FAIL(err, PLENA_E_NOMEM, "mpi", "out of memory");
    for (size_t k = first; !rc && k < d->n; k++)
        if (is_mine(d, k, d->m->rank))
            rc = plena_campaign_job_init(&(*mine)[n_mine++], &local->v[k], k, scratch, sroot, err);
    if (!rc) rc = plena_mkdir_p(sroot, err);
    d->scratch_root = sroot;
    int prc = dist_pool(d, *mine, rc ? 0 : n_mine, first, interrupted, rc ? NULL : err);
    return rc ? rc : prc;
}

/* remote_pass on a scratch directory of this rank (made here): the results
 * go to out_dir/shared_sub on a shared file system, else to
 * scratch/local_sub. A failure to make the scratch directory is sent to
 * rank 0, which waits for every rank. */
static int rank_pass(struct dist *d, const struct plena_campaign_mpi_opts *mo,
                     const struct plena_campaign_set *local, size_t first, const char *out_dir,
                     const char *shared_sub, const char *local_sub, char *scratch, size_t scratch_n,
                     struct plena_campaign_job **mine, int *interrupted, struct plena_err *err)
{
    int rc = make_scratch(d->m, mo, scratch, scratch_n, err);
    if (rc) {
        send_done(rc, 0, err);
        return rc;
    }
    char sroot[4400];
    if (d->shared_fs)
        snprintf(sroot, sizeof sroot, "%s/%s", out_dir, shared_sub);
    else
        snprintf(sroot, sizeof sroot, "%s/%s", scratch, local_sub);
    rc = remote_pass(d, local, first, scratch, sroot, mine, interrupted, err);
    /* sroot ends here: the pass is over, and the jobs in *mine (whose
     * out_root points at it) are only freed by the caller */
    d->scratch_root = NULL;
    return rc;
}

/* width of this rank: the node's width divided by the ranks on the node */
static unsigned rank_width(const struct plena_campaign_mpi *m, unsigned node_width)
{
    unsigned w = node_width / (unsigned)m->node_size;
    return w ? w : 1;
}

/* ---- run (checkpointed replay under MPI) ---- */
int plena_campaign_run_mpi(struct plena_campaign_mpi *m, const struct plena_campaign_set *s,
                           const struct plena_campaign_run_opts *o,
                           const struct plena_campaign_mpi_opts *mo,
                           struct plena_campaign_run_summary *sum, struct plena_err *err)
{
    struct plena_campaign_run_ctx c;
    memset(&c, 0, sizeof c);
    c.manifest_fd = c.failures_fd = -1;
    memset(sum, 0, sizeof *sum);
    struct plena_campaign_set local;
    memset(&local, 0, sizeof local);
    size_t *idx = NULL;
    struct plena_campaign_job *mine = NULL;
    char scratch[4200] = "";
    int rc = 0, status = 0, began = 0;
    int shared_fs = mo && mo->shared_fs;
    if (m->rank == 0) {
        /* resume state first: only unfinished traces are sharded */
        rc = plena_campaign_run_begin(&c, s, o, sum, err);
        began = !rc;
        if (!rc && !(idx = plena_calloc(c.n_queue ? c.n_queue : 1, sizeof *idx)))
            rc = PLENA_FAIL(err, PLENA_E_NOMEM, "mpi", "out of memory");
        for (size_t k = 0; !rc && k < c.n_queue; k++)
            idx[k] = c.jobs[k].trace;
        status = rc ? (rc > 0 ? rc : PLENA_E_INTERNAL) : 0;
    }
    int root_status = 0;
    int brc =
        bcast_work(m, status, s, idx, m->rank == 0 ? c.n_queue : 0, &local, &root_status, err);
    if (m->rank == 0) {
        if (rc || brc) goto out;
    } else {
        if (root_status) goto out; /* rank 0 reports it */
        rc = brc;                  /* still takes part in the collectives below, with no items */
    }
    size_t n = m->rank == 0 ? c.n_queue : rc ? 0 : local.n;

    /* width: the node's width, divided by the ranks on the node */
    struct plena_campaign_width w;
    memset(&w, 0, sizeof w);
    double frac = o->memory_fraction > 0 ? o->memory_fraction : 0.70;
    int64_t mem = plena_campaign_mem_available_kb(o->meminfo_path);
    size_t first = 0;
    int interrupted = 0;
    if (o->jobs) {
        w.width = o->jobs;
        snprintf(w.reason, sizeof w.reason, "fixed");
        w.cores = plena_campaign_cores();
        w.mem_available_kb = mem;
        w.rss_probe_kb = -1;
        w.memory_fraction = frac;
    } else {
        /* the probe is item 0, the costliest, which is rank 0's anyway */
        int64_t pr[2] = {-1, 0}; /* rss, probe error status */
        if (m->rank == 0 && n && mem >= 0) {
            sum->width.width = 1;
            pr[1] = plena_campaign_pool(&o->worker, c.jobs, 1, 1, o->stop, plena_campaign_run_done,
                                        plena_campaign_run_tick, &c, &interrupted, err);
            struct plena_campaign_job *pj = &c.jobs[0];
            pr[0] = pj->finished && !pj->signal && pj->max_rss_kb > 0 ? pj->max_rss_kb : 0;
            if (!pr[1]) pr[1] = plena_campaign_run_probe_record(&c, pj, err);
            if (interrupted && !pr[1]) pr[1] = -5;
            first = 1;
        }
        plena_campaign_mpi_bcast_ints(m, pr, 2);
        if (pr[1]) {
            if (m->rank == 0 && pr[1] > 0) rc = (int)pr[1];
            if (pr[1] == -5) { /* stopped during the probe: resumable */
                sum->interrupted = 1;
                if (m->rank == 0) rc = plena_campaign_run_end(&c, 1, err);
            }
            goto out;
        }
        if (m->rank != 0 && n) first = 1; /* rank 0 did item 0 */
        plena_campaign_width_formula(plena_campaign_cores(), mem, n ? pr[0] : 1, frac,
                                     n > first ? n - first : 1, o->max_jobs, &w);
        if (!n) w.rss_probe_kb = -1;
    }
    unsigned rw = rank_width(m, w.width);
    int total_w = 0, my_w = (int)rw;
    MPI_Request req;
    MPI_Iallreduce(&my_w, &total_w, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req);
    wait_req(&req);

    struct dist d;
    dist_begin(&d, m, &o->worker, o->stop, shared_fs, n, rw);
    d.remote_width = (size_t)(total_w - (int)rw);
    if (m->rank == 0) {
        sum->width = w;
        sum->width.width = (unsigned)total_w;
        json_t *extra = json_pack("{s:{s:i,s:i,s:I,s:I,s:b}}", "mpi", "ranks", m->size,
                                  "ranks_on_node", m->node_size, "node_width", (json_int_t)w.width,
                                  "rank_width", (json_int_t)rw, "shared_fs", shared_fs);
        rc = plena_campaign_write_width(o->out_dir, &sum->width, extra, err);
        json_decref(extra);
        /* a local failure still has to drain the others: fall through */
        d.all = c.jobs;
        d.root_dir = c.replay_root;
        d.done = plena_campaign_run_done;
        d.tick = plena_campaign_run_tick;
        d.ctx = &c;
        int prc = dist_pool(&d, NULL, 0, first, &interrupted, rc ? NULL : err);
        if (!rc) rc = prc;
        if (!rc) rc = plena_campaign_run_end(&c, interrupted, err);
    } else if (rc) {
        send_done(rc, 0, err); /* rank 0 waits for every rank */
    } else {
        rc = rank_pass(&d, mo, &local, first, o->out_dir, "replay", "replay", scratch,
                       sizeof scratch, &mine, &interrupted, err);
        sum->interrupted = interrupted;
        sum->code = interrupted ? PLENA_E_INTERRUPTED : PLENA_OK;
    }
out:
    if (scratch[0]) rm_tree(scratch);
    if (began) plena_campaign_run_free(&c);
    plena_free(idx);
    plena_free(mine);
    plena_campaign_set_free(&local);
    return rc;
}

/* ---- determinism gate (the parallel pass uses the ranks) ---- */
int plena_campaign_determinism_mpi(struct plena_campaign_mpi *m, const struct plena_campaign_set *s,
                                   const struct plena_campaign_det_opts *o,
                                   const struct plena_campaign_mpi_opts *mo,
                                   struct plena_campaign_det_summary *sum, struct plena_err *err)
{
    memset(sum, 0, sizeof *sum);
    struct plena_campaign_det_plan pl;
    memset(&pl, 0, sizeof pl);
    struct plena_campaign_set local;
    memset(&local, 0, sizeof local);
    size_t *idx = NULL;
    struct plena_campaign_job *all = NULL, *mine = NULL;
    char scratch[4200] = "";
    int rc = 0, status = 0, intr = 0, planned = 0;
    int shared_fs = mo && mo->shared_fs;
    int64_t J = 0;
    if (m->rank == 0) {
        rc = plena_campaign_det_begin(s, o, &pl, err);
        planned = !rc;
        if (!rc) rc = plena_campaign_det_serial(s, o, &pl, &intr, err);
        /* the parallel pass's work list is cost-ordered like every shard */
        if (!rc && !intr) {
            idx = plena_calloc(pl.n ? pl.n : 1, sizeof *idx);
            all = plena_calloc(pl.n ? pl.n : 1, sizeof *all);
            if (!idx || !all) rc = PLENA_FAIL(err, PLENA_E_NOMEM, "mpi", "out of memory");
        }
        if (!rc && !intr) {
            memcpy(idx, pl.pick, pl.n * sizeof *idx);
            for (size_t i = 1; i < pl.n; i++) {
                size_t x = idx[i], j = i;
                while (j > 0 && plena_campaign_cmp_cost(&s->v[idx[j - 1]], &s->v[x]) > 0) {
                    idx[j] = idx[j - 1];
                    j--;
                }
                idx[j] = x;
            }
            for (size_t k = 0; !rc && k < pl.n; k++)
                rc = plena_campaign_job_init(&all[k], &s->v[idx[k]], idx[k], o->out_dir,
                                             pl.parallel, err);
        }
        J = pl.width;
        status = rc ? rc : intr ? -5 : 0;
    }
    int root_status = 0;
    int brc = bcast_work(m, status, s, idx, m->rank == 0 ? pl.n : 0, &local, &root_status, err);
    if (root_status) { /* rank 0 failed or was stopped in the serial pass */
        if (root_status == -5) {
            sum->interrupted = 1;
            snprintf(sum->status, sizeof sum->status, "failed");
        }
        goto out;
    }
    plena_campaign_mpi_bcast_ints(m, &J, 1);
    if (brc) { /* only another rank gets here: rank 0's failures are root_status */
        rc = brc;
        send_done(rc, 0, err);
        goto out;
    }
    size_t n = m->rank == 0 ? pl.n : local.n;
    /* J workers in total, spread over the ranks (at least one each) */
    unsigned rw = (unsigned)(J / m->size + (m->rank < J % m->size));
    struct dist d;
    dist_begin(&d, m, &o->worker, o->stop, shared_fs, n, rw ? rw : 1);
    d.remote_width = (size_t)J > d.width ? (size_t)J - d.width : (size_t)(m->size - 1);
    if (m->rank == 0) {
        d.all = all;
        d.root_dir = pl.parallel;
        rc = dist_pool(&d, NULL, 0, 0, &intr, err);
        if (!rc && intr) {
            sum->interrupted = 1;
            sum->trace_count = pl.n;
            sum->parallel_width = pl.width;
            snprintf(sum->status, sizeof sum->status, "failed");
        } else if (!rc) {
            json_t *extra =
                json_pack("{s:{s:i,s:b}}", "mpi", "ranks", m->size, "shared_fs", shared_fs);
            rc = plena_campaign_det_verdict(s, o, &pl, extra, sum, err);
            json_decref(extra);
        }
    } else {
        rc = rank_pass(&d, mo, &local, 0, o->out_dir, "determinism/parallel", "parallel", scratch,
                       sizeof scratch, &mine, &intr, err);
        sum->interrupted = intr;
    }
out:
    if (scratch[0]) rm_tree(scratch);
    if (planned) plena_campaign_det_plan_free(&pl);
    plena_free(idx);
    plena_free(all);
    plena_free(mine);
    plena_campaign_set_free(&local);
    return rc;
}

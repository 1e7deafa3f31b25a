/* Weight cache entries (docs/formats.md "Weight cache entries"): a 128-byte
 * header naming everything the bytes depend on, then the MX image. The
 * header is compared whole before any byte is used, so an entry of another
 * key, shape, format or generator revision is a miss, never a wrong hit. */
#include "gen/weight_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fileio.h"
#include "num/prng.h"

#define HEADER_BYTES   128
#define FORMAT_VERSION 1u
static const char magic[8] = {'P', 'L', 'E', 'N', 'A', 'W', 'C', '\n'};

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* The header of k's entry with n bytes (little-endian fields; the layout
 * is docs/formats.md's table). */
static void header_of(const struct plena_weight_key *k, uint64_t n, uint8_t h[HEADER_BYTES])
{
    memset(h, 0, HEADER_BYTES);
    memcpy(h, magic, sizeof magic);
    put_u32(h + 8, FORMAT_VERSION);
    put_u32(h + 12, PLENA_WEIGHT_CACHE_REVISION);
    put_u64(h + 16, k->seed);
    const uint32_t f[8] = {k->role, k->expert, k->K, k->N, k->fan_in, k->mode, k->K_p, k->N_p};
    for (int i = 0; i < 8; i++)
        put_u32(h + 24 + 4 * i, f[i]);
    put_u64(h + 56, n);
}

int plena_weight_cache_path(const char *dir, const struct plena_weight_key *k, char *buf,
                            size_t len)
{
    uint8_t h[HEADER_BYTES];
    header_of(k, 0, h); /* the name does not depend on n: one matrix, one name */
    int w = snprintf(buf, len, "%s/r%u-e%u-%016llx.mx", dir, k->role, k->expert,
                     (unsigned long long)plena_fnv1a64(h, sizeof h));
    return w < 0 || (size_t)w >= len ? -1 : 0;
}

int plena_weight_cache_load(const char *dir, const struct plena_weight_key *k, uint8_t *bytes,
                            uint64_t n, int *hit, struct plena_err *err)
{
    *hit = 0;
    char path[4096];
    if (plena_weight_cache_path(dir, k, path, sizeof path))
        return PLENA_FAIL(err, PLENA_E_OUTPUT, dir, "weight cache path too long");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return 0;
        return PLENA_FAIL(err, PLENA_E_OUTPUT, path, "cannot open weight cache entry: %s",
                          strerror(errno));
    }
    struct stat st;
    uint8_t want[HEADER_BYTES], got[HEADER_BYTES];
    header_of(k, n, want);
    int rc = 0;
    if (fstat(fd, &st))
        rc = PLENA_FAIL(err, PLENA_E_OUTPUT, path, "cannot stat weight cache entry: %s",
                        strerror(errno));
    /* a file of another size is a miss; one of this size whose header cannot be read is an
     * error (not a miss that would be overwritten) */
    else if ((uint64_t)st.st_size == HEADER_BYTES + n &&
             (rc = plena_fd_read_range(fd, path, 0, got, HEADER_BYTES, err)) == 0 &&
             !memcmp(got, want, HEADER_BYTES)) {
        rc = plena_fd_read_range(fd, path, HEADER_BYTES, bytes, (size_t)n, err);
        *hit = !rc;
    }
    close(fd);
    return rc;
}

int plena_weight_cache_store(const char *dir, const struct plena_weight_key *k,
                             const uint8_t *bytes, uint64_t n, struct plena_err *err)
{
    /* the temporary is named as plena_file_stage names its own
     * (PATH.tmp.<pid>.<n>), so plena_file_clean_stale_tmp removes what a
     * killed writer left; the counter is shared by the fill threads */
    static unsigned counter;
    char path[4096], tmp[4200];
    if (plena_weight_cache_path(dir, k, path, sizeof path))
        return PLENA_FAIL(err, PLENA_E_OUTPUT, dir, "weight cache path too long");
    int fd = -1;
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", path, (long)getpid(),
                 __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0)
        return PLENA_FAIL(err, PLENA_E_OUTPUT, path, "cannot create a weight cache entry: %s",
                          strerror(errno));
    uint8_t h[HEADER_BYTES];
    header_of(k, n, h);
    const char *what = NULL;
    if (plena_fd_write_all(fd, h, sizeof h, 0) ||
        plena_fd_write_all(fd, bytes, (size_t)n, HEADER_BYTES))
        what = "cannot write";
    else if (fsync(fd))
        what = "cannot sync";
    int e = errno;
    if (close(fd) && !what) {
        what = "cannot close";
        e = errno;
    }
    if (!what && rename(tmp, path)) {
        what = "cannot rename into place";
        e = errno;
    }
    if (what) {
        unlink(tmp);
        return PLENA_FAIL(err, PLENA_E_OUTPUT, path, "%s the weight cache entry: %s", what,
                          strerror(e));
    }
    return 0;
}

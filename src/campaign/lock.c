/* The campaign directory's lock (docs/replay.md "Campaigns"): one
 * coordinator per --out. A POSIX record lock (fcntl F_SETLK) on
 * <out>/campaign.lock: the kernel drops it when the holder exits however it
 * dies (kill -9 leaves no stale lock), it is not inherited by forked
 * workers, and F_GETLK names the holder's pid without trusting the file's
 * content. The pid is also written into the file for a human reading it.
 * Rejected: flock (the lock belongs to the open file description, which a
 * forked child that has not exec'ed yet keeps alive after the coordinator
 * died; no holder pid from the kernel) and O_EXCL lock files (stale after a
 * crash). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "campaign/campaign.h"
#include "common/fileio.h"

int plena_campaign_lock(const char *out_dir, int *fd_out, struct plena_err *err)
{
    *fd_out = -1;
    char p[4200];
    if (plena_path_join(p, sizeof p, out_dir, "campaign.lock"))
        return PLENA_FAIL(err, PLENA_E_OUTPUT, out_dir, "path too long");
    int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return PLENA_FAIL(err, PLENA_E_OUTPUT, p, "cannot open the lock file: %s", strerror(errno));
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET; /* l_start = l_len = 0: the whole file */
    if (fcntl(fd, F_SETLK, &fl)) {
        int e = errno;
        long holder = -1;
        if (e == EACCES || e == EAGAIN) {
            struct flock q;
            memset(&q, 0, sizeof q);
            q.l_type = F_WRLCK;
            q.l_whence = SEEK_SET;
            if (!fcntl(fd, F_GETLK, &q) && q.l_type != F_UNLCK) holder = (long)q.l_pid;
        }
        close(fd);
        if (e != EACCES && e != EAGAIN)
            return PLENA_FAIL(err, PLENA_E_OUTPUT, p, "cannot lock: %s", strerror(e));
        /* USAGE: the invocation names a directory another coordinator owns */
        if (holder > 0)
            return PLENA_FAIL(err, PLENA_E_USAGE, p,
                              "the campaign directory %s is in use by another coordinator "
                              "(pid %ld); wait for it or choose another --out",
                              out_dir, holder);
        return PLENA_FAIL(err, PLENA_E_USAGE, p,
                          "the campaign directory %s is in use by another coordinator; wait for "
                          "it or choose another --out",
                          out_dir);
    }
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) || write(fd, pid, (size_t)n) != n) {
        int e = errno;
        close(fd);
        return PLENA_FAIL(err, PLENA_E_OUTPUT, p, "cannot write the lock file: %s", strerror(e));
    }
    *fd_out = fd;
    return 0;
}

void plena_campaign_unlock(int *fd)
{
    if (*fd >= 0) close(*fd); /* closing drops the record lock */
    *fd = -1;
}

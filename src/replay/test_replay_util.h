/* Shared by the replay tests that run real replays: the shipped settings
 * with a 16384-row VRAM (same timing, but the VRAM dump each run writes is
 * 2 MiB instead of 512 MiB, which keeps the tests fast), and running the
 * `plena` binary with its output kept in the test's directory. */
#ifndef PLENA_REPLAY_TEST_REPLAY_UTIL_H
#define PLENA_REPLAY_TEST_REPLAY_UTIL_H

#include "common/test_support.h"
#include "settings/settings.h"

static inline void replay_test_write_small_settings(const char *path)
{
    plena_test_write_replaced(NULL, path, plena_settings_reference_text(),
                              "[TRANSACTIONAL.CONFIG.VECTOR_SRAM_SIZE]\nvalue = 4194304\n",
                              "[TRANSACTIONAL.CONFIG.VECTOR_SRAM_SIZE]\nvalue = 16384\n");
}

/* Runs bin with args (NULL-terminated, without bin itself) on this
 * environment, its standard output and error in dir/stdout.txt and
 * dir/stderr.txt (truncated). Returns its exit code, 128 + the signal when
 * it was killed. */
static inline int replay_test_run(const char *bin, const char *dir, const char *const *args)
{
    char o[512], e[512];
    plena_test_path(o, sizeof o, dir, "stdout.txt");
    plena_test_path(e, sizeof e, dir, "stderr.txt");
    return plena_test_wait(plena_test_spawn(bin, args, NULL, o, e));
}

#endif

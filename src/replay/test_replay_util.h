/* Shared by the replay tests that run real replays: the shipped settings
 * with a 16384-row VRAM. Same timing, but the VRAM dump each run writes is
 * 2 MiB instead of 512 MiB, which keeps the tests fast. */
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

#endif

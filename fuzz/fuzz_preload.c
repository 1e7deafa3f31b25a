/* libFuzzer target: the preload readers (HBM image, FP SRAM, INT SRAM and
 * VRAM preload files) on a small machine; the first byte picks the reader. */
#include "fuzz_util.h"

#include "emu/emu.h"
#include "settings/settings.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    struct plena_settings s;
    plena_settings_reference(&s);
    s.hbm_size = 1u << 16;
    s.vector_sram_size = 64;
    s.fp_sram_depth = 64;
    s.int_sram_depth = 64;
    struct plena_emu *e = NULL;
    struct plena_err err = {0};
    if (plena_emu_new(&s, 0, &e, &err)) abort();
    const char *path = fuzz_file("preload.bin", data + 1, size - 1);
    switch (data[0] & 3) {
    case 0: plena_emu_load_hbm_file(e, path, &err); break;
    case 1: plena_emu_load_fpsram_file(e, path, &err); break;
    case 2: plena_emu_load_intsram_file(e, path, &err); break;
    default: plena_emu_load_vram_file(e, path, &err); break;
    }
    plena_emu_free(e);
    return 0;
}

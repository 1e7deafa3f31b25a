/* libFuzzer target: bytes -> plena_st_parse, the safetensors header parser
 * (docs/traces.md "safetensors reader"), then every accepted tensor read
 * whole (the offsets it accepted must lie inside the input). A crash,
 * sanitizer report or leak is a finding. Built by scripts/fuzz.sh. */
#include <stddef.h>
#include <stdint.h>

#include "ckpt/ckpt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct plena_st_header h;
    struct plena_err err = {0};
    if (plena_st_parse(data, size, "fuzz", &h, &err)) return 0;
    volatile float sink = 0;
    for (size_t i = 0; i < h.n_tensors; i++)
        for (uint64_t j = 0; j < h.tensors[i].count; j++)
            sink += plena_st_get(&h.tensors[i], j);
    (void)sink;
    plena_st_header_free(&h);
    return 0;
}

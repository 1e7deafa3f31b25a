/* libFuzzer target: the model-file loader (HF-style config JSON ->
 * plena_model_resolve, then plena_model_validate and, for a valid model,
 * the generator's capacity check at one token). */
#include "fuzz_util.h"

#include "gen/moe.h"
#include "model/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file("model.json", data, size);
    struct plena_moe_model m;
    struct plena_err err = {0};
    if (plena_model_resolve(path, &m, &err)) return 0;
    plena_err_clear(&err);
    if (plena_model_validate(&m, 64, &err)) return 0;
    /* widths that would take seconds to plan are not this target's subject */
    if ((uint64_t)m.hidden * (m.moe_inter + m.shared_inter) > (1u << 26)) return 0;
    struct plena_gen_machine gm;
    plena_gen_machine_default(&gm);
    struct plena_gen_capacity cap;
    plena_err_clear(&err);
    plena_gen_capacity_check(&m, &gm, 1, &cap, &err);
    return 0;
}

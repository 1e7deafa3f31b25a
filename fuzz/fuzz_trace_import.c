/* libFuzzer target: every trace importer (vLLM, Megatron, CSV, routing
 * rows; the first byte picks the format and the options), model e8k2. */
#include "fuzz_util.h"

#include "common/fileio.h"
#include "model/model.h"
#include "trace/build.h"
#include "trace/import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    static const enum plena_trace_import_format fmt[4] = {
        PLENA_TRACE_IMPORT_VLLM, PLENA_TRACE_IMPORT_MEGATRON, PLENA_TRACE_IMPORT_CSV,
        PLENA_TRACE_IMPORT_JSONL};
    struct plena_moe_model m;
    memset(&m, 0, sizeof m);
    snprintf(m.name, sizeof m.name, "e8k2");
    m.hidden = 64;
    m.moe_inter = 64;
    m.num_experts = 8;
    m.top_k = 2;
    struct plena_trace_import_opts o;
    plena_trace_import_opts_default(&o);
    o.model = &m;
    o.from = fmt[data[0] & 3];
    o.merge_ranks = (data[0] >> 2) & 1;
    o.keep_going = (data[0] >> 3) & 1;
    o.allow_uniform_weights = (data[0] >> 4) & 1;
    o.decode_aggregate = (data[0] >> 5) & 1;
    struct plena_trace_docs d;
    memset(&d, 0, sizeof d);
    struct plena_trace_import_log log = {0};
    plena_buf_init(&log.text);
    struct plena_err err = {0};
    plena_trace_import(&o, "f.in", (const char *)data + 1, size - 1, &d, &log, &err);
    plena_trace_docs_free(&d);
    plena_buf_free(&log.text);
    return 0;
}

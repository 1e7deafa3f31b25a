/* libFuzzer target: bytes -> plena_trace_validate_bytes, as a single trace
 * and as a trace set (docs/trace-schema.md "Validator findings"). A crash, sanitizer
 * report or leak is a finding; every crash becomes a fixture. Built by
 * scripts/fuzz.sh with clang -fsanitize=fuzzer,address,undefined. */
#include <stddef.h>
#include <stdint.h>

#include "trace/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct plena_trace_validate_options opt = {.max_errors = 20, .max_bytes = 1 << 20};
    struct plena_trace_report r;
    plena_trace_report_init(&r);
    plena_trace_validate_bytes((const char *)data, size, &opt, &r);
    plena_trace_report_free(&r);
    opt.strict = 1;
    struct plena_trace_set_report s = {0};
    plena_trace_validate_set_bytes((const char *)data, size, &opt, &s);
    plena_trace_set_report_free(&s);
    return 0;
}

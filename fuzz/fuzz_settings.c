/* libFuzzer target: the TOML-subset reader and the settings loader (parse,
 * then for accepted settings the writer and a re-parse that must agree). */
#include "fuzz_util.h"

#include "common/fileio.h"
#include "settings/settings.h"
#include "settings/toml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct plena_toml_doc doc;
    struct plena_err err = {0};
    if (!plena_toml_parse((const char *)data, size, "f.toml", &doc, &err)) plena_toml_free(&doc);
    struct plena_settings s, t;
    plena_err_clear(&err);
    if (plena_settings_parse((const char *)data, size, "f.toml", &s, &err)) return 0;
    struct plena_buf b;
    plena_buf_init(&b);
    if (!plena_settings_to_toml(&s, &b)) {
        plena_err_clear(&err);
        /* what plena writes it reads back as the same settings */
        if (plena_settings_parse(b.data, b.len, "w.toml", &t, &err) ||
            !plena_settings_equal(&s, &t))
            abort();
    }
    plena_buf_free(&b);
    return 0;
}

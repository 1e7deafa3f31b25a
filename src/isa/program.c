/* Machine-code reader/writer (docs/formats.md "Machine code") and
 * plena_program_load/free. The reader accepts any whitespace, optional 0x/0X
 * and 1-8 hex digits of either case; the writer emits exactly `0x%08X\n`.
 * Assembly goes through asm.c; this file does no label pass of its own. */
#include "isa/program.h"

#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "isa/asm.h"

void plena_program_free(struct plena_program *p)
{
    if (!p) return;
    plena_free(p->words);
    plena_free(p->source_path);
    plena_free(p->src_line);
    plena_labels_free(&p->labels);
    memset(p, 0, sizeof *p);
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

int plena_program_parse_mem(const char *text, size_t len, const char *name,
                            struct plena_program *out, struct plena_err *err)
{
    memset(out, 0, sizeof *out);
    if (!name) name = "<input>";
    /* Every token takes at least two bytes (digit + separator) except the
     * last, so len/2 + 1 bounds the word count: one allocation. */
    size_t cap = len / 2 + 1, n = 0;
    out->words = plena_malloc(cap * sizeof *out->words);
    if (!out->words) return PLENA_FAIL(err, PLENA_E_NOMEM, name, "out of memory");
    uint32_t line = 1;
    size_t lines = 0;
    const char *p = text, *e = text + len;
    while (p < e) {
        if (is_ws(*p)) {
            if (*p == '\n') {
                line++;
                lines++;
            }
            p++;
            continue;
        }
        const char *ts = p;
        while (p < e && !is_ws(*p))
            p++;
        const char *ds = ts;
        if (p - ts >= 2 && ts[0] == '0' && (ts[1] == 'x' || ts[1] == 'X')) ds += 2;
        size_t nd = (size_t)(p - ds);
        uint32_t w = 0;
        int ok = nd >= 1 && nd <= 8;
        for (size_t i = 0; ok && i < nd; i++) {
            int h = hexval(ds[i]);
            if (h < 0)
                ok = 0;
            else
                w = (w << 4) | (uint32_t)h;
        }
        if (!ok) {
            char where[300];
            snprintf(where, sizeof where, "%s:%u", name, line);
            int tl = (int)(p - ts) > 64 ? 64 : (int)(p - ts);
            plena_program_free(out);
            return PLENA_FAIL(err, PLENA_E_INPUT, where,
                              "invalid machine-code token '%.*s%s' (expected 0x followed by 1-8 "
                              "hex digits)",
                              tl, ts, (p - ts) > 64 ? "..." : "");
        }
        out->words[n++] = w;
    }
    if (len > 0 && text[len - 1] != '\n') lines++;
    out->n = n;
    out->machine_code_bytes = len;
    out->machine_code_lines = lines;
    return 0;
}

int plena_program_read_mem(const char *path, struct plena_program *out, struct plena_err *err)
{
    char *data = NULL;
    size_t len = 0;
    memset(out, 0, sizeof *out);
    int rc = plena_file_read_all(path, &data, &len, err);
    if (rc) return rc;
    rc = plena_program_parse_mem(data, len, path, out, err);
    plena_free(data);
    return rc;
}

int plena_program_write_mem(const char *path, const uint32_t *words, size_t n,
                            struct plena_err *err)
{
    char *buf;
    size_t bytes;
    int rc = plena_program_mem_text(words, n, &buf, &bytes, path, err);
    if (rc) return rc;
    rc = plena_file_write_atomic(path, buf, bytes, err);
    plena_free(buf);
    return rc;
}

int plena_program_mem_text(const uint32_t *words, size_t n, char **text, size_t *len,
                           const char *path, struct plena_err *err)
{
    /* Two hex digits per byte from one table: this loop writes 55 MB for a
     * 5M-word program, so it is on the `plena asm` critical path. */
    static const char hex[] = "0123456789ABCDEF";
    char pairs[512];
    for (int i = 0; i < 256; i++) {
        pairs[2 * i] = hex[i >> 4];
        pairs[2 * i + 1] = hex[i & 15];
    }
    size_t bytes = n * 11;
    char *buf = plena_malloc(bytes ? bytes : 1);
    if (!buf) return PLENA_FAIL(err, PLENA_E_NOMEM, path, "out of memory for %zu words", n);
    char *q = buf;
    for (size_t i = 0; i < n; i++) {
        uint32_t w = words[i];
        q[0] = '0';
        q[1] = 'x';
        memcpy(q + 2, pairs + 2 * (w >> 24), 2);
        memcpy(q + 4, pairs + 2 * ((w >> 16) & 255u), 2);
        memcpy(q + 6, pairs + 2 * ((w >> 8) & 255u), 2);
        memcpy(q + 8, pairs + 2 * (w & 255u), 2);
        q[10] = '\n';
        q += 11;
    }
    *text = buf;
    *len = bytes;
    return 0;
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

int plena_program_load(const char *path, struct plena_asm_diags *warnings,
                       struct plena_program *out, struct plena_err *err)
{
    if (!ends_with(path, ".asm")) return plena_program_read_mem(path, out, err);
    struct plena_asm_opts o = {0, 0, 1};
    struct plena_asm_diags local;
    memset(&local, 0, sizeof local);
    /* The library never prints: warnings go back to the caller (or are dropped). */
    int rc = plena_asm_file(path, &o, out, warnings ? warnings : &local, err);
    plena_asm_diags_free(&local);
    return rc;
}

static const char *const lowering_markers[] = {
#define PLENA_LOWERING_MARKER(id, marker, option) marker,
    PLENA_LOWERING_LIST(PLENA_LOWERING_MARKER)
#undef PLENA_LOWERING_MARKER
};
static const char *const lowering_options[] = {
#define PLENA_LOWERING_OPTION(id, marker, option) option,
    PLENA_LOWERING_LIST(PLENA_LOWERING_OPTION)
#undef PLENA_LOWERING_OPTION
};
#define N_LOWERINGS (sizeof lowering_markers / sizeof lowering_markers[0])
const char *const plena_lowering_options[] = {
#define PLENA_LOWERING_OPTION(id, marker, option) option,
    PLENA_LOWERING_ROUTED(PLENA_LOWERING_OPTION)
#undef PLENA_LOWERING_OPTION
        NULL};

const char *plena_lowering_marker(enum plena_lowering l)
{
    return (unsigned)l < N_LOWERINGS ? lowering_markers[l] : lowering_markers[0];
}

const char *plena_lowering_option(enum plena_lowering l)
{
    return (unsigned)l < N_LOWERINGS ? lowering_options[l] : lowering_options[0];
}

int plena_lowering_parse_option(const char *s, enum plena_lowering *out)
{
    for (size_t i = PLENA_LOWERING_UNSET + 1; s && i < N_LOWERINGS; i++)
        if (!strcmp(lowering_options[i], s)) {
            *out = (enum plena_lowering)i;
            return 0;
        }
    return -1;
}

int plena_lowering_parse_marker(const char *s, enum plena_lowering *out)
{
    for (size_t i = 0; s && i < N_LOWERINGS; i++)
        if (!strcmp(lowering_markers[i], s)) {
            *out = (enum plena_lowering)i;
            return 0;
        }
    return -1;
}

/* Assembler, disassembler and .mem reader/writer tests (docs/machine.md
 * "Assembly syntax" and "Disassembly", docs/formats.md "Machine code").
 * Expected words are worked encodings, built by hand from the word layout of
 * docs/machine.md "Instruction word"; rejection cases are testdata/err_*.asm
 * with the expected "line:col: message" in their first line (decodetree
 * style). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/fileio.h"
#include "common/test_support.h"
#include "isa/asm.h"
#include "isa/disasm.h"
#include "isa/isa.h"
#include "isa/program.h"

static int asm_one(const char *text, int strict, int upstream, struct plena_program *p,
                   struct plena_asm_diags *d, struct plena_err *err)
{
    struct plena_asm_opts o = {strict, upstream, 0};
    return plena_asm_text(text, strlen(text), "t.asm", &o, p, d, err);
}

static uint32_t word_of(const char *text, int upstream)
{
    struct plena_program p;
    struct plena_err err = {0};
    int rc = asm_one(text, 0, upstream, &p, NULL, &err);
    if (rc) fprintf(stderr, "%s -> %s: %s\n", text, err.where, err.msg);
    assert_int_equal(rc, 0);
    assert_int_equal(p.n, 1);
    uint32_t w = p.words[0];
    plena_program_free(&p);
    return w;
}

/* Worked encodings, both encoder columns (docs/machine.md "Upstream encoder"). */
static const struct {
    const char *text;
    uint32_t plena, upstream;
} worked[] = {
    {"S_ADDI_INT gp1, gp0, 5", 0x00014062, 0x00014062},
    {"S_ADDI_INT gp5, gp5, 262143", 0xFFFFD562, 0xFFFFD562},
    {"S_LUI_INT gp2, 8", 0x000020A5, 0x000020A5},
    {"M_MM 0, gp2, gp1", 0x00004801, 0x00004801},
    {"M_MM_WO gp3, gp0, 0", 0x000000C6, 0x000000C6},
    {"M_MV_WO gp3, 4", 0x000100CB, 0x000010CB},
    {"H_PREFETCH_M gp8, gp6, a0, 1, 0", 0x00041A28, 0x00041A28},
    {"H_PREFETCH_V gp1, gp2, a3, 1, 1", 0x0044C869, 0x0044C869},
    {"V_ADD_VV gp4, gp5, gp6, 1", 0x0005950D, 0x0005950D},
    {"V_SUB_VF gp1, gp2, f3, 0, 1", 0x0040C850, 0x0040C850},
    {"V_EXP_V gp1, gp2, 1", 0x00040853, 0x00004853},
    {"V_RED_SUM f1, gp2", 0x00000855, 0x00000855},
    {"V_TOPK gp1, gp2, gp3, 1", 0x0004C877, 0x0004C877},
    {"V_TOPK gp1, gp2, gp3, 15", 0x003CC877, 0x003CC877},
    {"C_SET_TOPK_REG gp4", 0x00000138, 0x00000138},
    {"S_LD_FP f2, gp3, 7", 0x0001CC9E, 0x0001CC9E},
    {"S_ADD_FP f1, f2, f3", 0x0000C857, 0x0000C857},
    {"S_MAP_V_FP gp1, gp2, 0", 0x00000860, 0x00000860},
    {"C_SET_ADDR_REG a1, gp0, gp5", 0x0001406B, 0x0001406B},
    {"C_SET_SCALE_REG gp6", 0x000001AC, 0x000001AC},
    {"C_LOOP_START gp4, 16", 0x0000412F, 0x0000412F},
    {"C_LOOP_END gp4", 0x00000130, 0x00000130},
    {"V_SHFT_V gp1, gp2, gp3", 0x0000C872, 0x0000C872},
    {"C_BREAK", 0x00000034, 0x00000034},
};

static void test_worked_encodings(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof worked / sizeof worked[0]; i++) {
        assert_int_equal(word_of(worked[i].text, 0), worked[i].plena);
        assert_int_equal(word_of(worked[i].text, 1), worked[i].upstream);
    }
    /* Accepted upstream spellings (docs/isa.md "Operand forms"): 4th ignored
     * operand, gp0 for Z, the three-operand *_WO form, hex immediates, blanks
     * around commas. */
    assert_int_equal(word_of("M_MM gp0, gp2, gp1, 0", 0), 0x00004801);
    assert_int_equal(word_of("M_MV_WO gp3, gp0, 4", 0), 0x000100CB);
    assert_int_equal(word_of("  S_ADDI_INT   gp1 ,gp0 , 0x5  ; comment", 0), 0x00014062);
    assert_int_equal(word_of("S_LUI_INT gp2, 8 // comment\r", 0), 0x000020A5);
    /* Upstream V_RED_SUM drops the mask; V_RED_MAX moves it to bit 14. */
    assert_int_equal(word_of("V_RED_SUM f1, gp2, 3", 1), 0x00000855);
    assert_int_equal(word_of("V_RED_SUM f1, gp2, 3", 0), 0x00000855 | (3u << 18));
    assert_int_equal(word_of("V_RED_MAX f1, gp2, 3", 1), 0x00000856 | (3u << 14));
}

static void test_upstream_warns_where_layouts_differ(void **state)
{
    (void)state;
    struct plena_program p;
    struct plena_asm_diags d = {0};
    struct plena_err err = {0};
    const char *src = "M_MV_WO gp3, 4\nM_MV_WO gp3, 0\nV_EXP_V gp1, gp2, 1\nV_EXP_V gp1, gp2\n";
    assert_int_equal(asm_one(src, 0, 1, &p, &d, &err), 0);
    assert_int_equal(d.n, 2);
    assert_int_equal(d.v[0].line, 1);
    assert_int_equal(d.v[0].col, 14);
    assert_int_equal(d.v[1].line, 3);
    assert_non_null(strstr(d.v[0].text, "upstream encoder"));
    char buf[400];
    assert_string_equal(plena_asm_diag_format(&d, 0, buf, sizeof buf),
                        "t.asm:1:14: warning: upstream encoder: M_MV_WO imm18 placed at bit 10 "
                        "(the decoder reads bit 14); the word differs from the plena encoding");
    plena_asm_diags_free(&d);
    plena_program_free(&p);
    /* plena encoder: no warning. */
    assert_int_equal(asm_one(src, 0, 0, &p, &d, &err), 0);
    assert_int_equal(d.n, 0);
    plena_asm_diags_free(&d);
    plena_program_free(&p);
}

/* Operand forms of the upstream assembler (PLENA_Compiler assembler/parser.py
 * reads up to six operands and drops those the opcode does not encode).
 * Expected words are worked out by hand from the field layout. */
static void test_upstream_operand_forms(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        uint32_t word;
        size_t n_warn;
    } cases[] = {
        {"S_EXP_FP f1, f2, 0", 0x1Bu | 1u << 6 | 2u << 10, 0},
        {"S_RECI_FP f3, f3, 0", 0x1Cu | 3u << 6 | 3u << 10, 0},
        {"S_SQRT_FP f3, f4, 0, 0, 0, 0", 0x1Du | 3u << 6 | 4u << 10, 0},
        {"H_PREFETCH_V gp1, gp2, a3, 0, 0, 0", 0x29u | 1u << 6 | 2u << 10 | 3u << 14, 0},
        {"H_PREFETCH_M gp1, gp2, a3, 1, 2, 0",
         0x28u | 1u << 6 | 2u << 10 | 3u << 14 | 1u << 18 | 2u << 22, 0},
        {"M_MV_WO gp4, gp0, 5, 0", 0x0Bu | 4u << 6 | 5u << 14, 0},
        {"S_ADD_INT gp1, gp2, gp3, 0, 0, 0", 0x21u | 1u << 6 | 2u << 10 | 3u << 14, 0},
        {"V_RED_SUM f1, gp2, 0, 0", 0x15u | 1u << 6 | 2u << 10, 0},
        {"V_ADD_VV gp1, gp2, gp3, 1, 0, 0", 0x0Du | 1u << 6 | 2u << 10 | 3u << 14 | 1u << 18, 0},
        {"C_SET_SCALE_REG gp2, 0", 0x2Cu | 2u << 6, 0},
        {"C_LOOP_START gp2, 7, gp0, 0", 0x2Fu | 2u << 6 | 7u << 10, 0},
        {"C_BREAK 0", 0x34u, 0},
        {"S_EXP_FP f1, f2, f5", 0x1Bu | 1u << 6 | 2u << 10, 1}, /* dropped, non-zero: warning */
        {"S_MUL_FP f1, f2, f3, 9", 0x1Au | 1u << 6 | 2u << 10 | 3u << 14, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int strict = 0; strict < 2; strict++) {
            struct plena_program p;
            struct plena_asm_diags d = {0};
            struct plena_err err = {0};
            int rc = asm_one(cases[i].text, strict, 0, &p, &d, &err);
            if (rc) fprintf(stderr, "%s: %s %s\n", cases[i].text, err.where, err.msg);
            assert_int_equal(rc, 0);
            assert_int_equal(p.n, 1);
            assert_int_equal(p.words[0], cases[i].word);
            assert_int_equal(d.n, cases[i].n_warn);
            /* The disassembler prints the canonical form, which assembles to the same word. */
            char dis[PLENA_DISASM_MAX];
            plena_disasm_word(p.words[0], dis, sizeof dis);
            struct plena_program q;
            assert_int_equal(asm_one(dis, 1, 0, &q, NULL, &err), 0);
            assert_int_equal(q.words[0], cases[i].word);
            plena_program_free(&q);
            plena_asm_diags_free(&d);
            plena_program_free(&p);
        }
}

/* Every opcode: canonical text with extreme legal values for every operand
 * assembles, and asm(disasm(w)) == w. */
static uint32_t extreme(const char *kind, int hi)
{
    if (!hi) return 0;
    if (!strcmp(kind, "F")) return 7;
    if (!strcmp(kind, "I18")) return PLENA_IMM18_MAX;
    if (!strcmp(kind, "I22")) return PLENA_IMM22_MAX;
    return 15;
}

static void test_every_opcode_roundtrip(void **state)
{
    (void)state;
    int n_ops = 0;
    for (unsigned op = 0; op < PLENA_OP_COUNT; op++) {
        const struct plena_op_info *r = plena_isa_info(op);
        if (!r->valid) continue;
        n_ops++;
        for (int hi = 0; hi < 2; hi++) {
            /* Build the text from the descriptor by hand (independent of disasm.c). */
            char text[200];
            size_t at = (size_t)snprintf(text, sizeof text, "%s", r->name);
            struct plena_insn in = {0};
            in.op = (uint8_t)op;
            char d[64];
            snprintf(d, sizeof d, "%s", plena_form_descriptor(r->form));
            int first = 1;
            for (char *tk = strtok(d, " "); tk && *tk != '|'; tk = strtok(NULL, " ")) {
                if (*tk == '?') tk++;
                char *colon = strchr(tk, ':');
                *colon = 0;
                const char *field = colon + 1;
                if (!strcmp(field, "-")) continue;
                uint32_t v = extreme(tk, hi);
                /* Keep run-time-trapping values out (strict would reject them). */
                if (strstr(r->operands, "Z(=0)") && !strcmp(tk, "Z")) v = 0;
                if (!strcmp(tk, "S") && v > 1) v = 1;
                const char *pre = !strcmp(tk, "G")   ? "gp"
                                  : !strcmp(tk, "F") ? "f"
                                  : !strcmp(tk, "A") ? "a"
                                                     : "";
                at += (size_t)snprintf(text + at, sizeof text - at, "%s%s%u", first ? " " : ", ",
                                       pre, v);
                first = 0;
                if (!strcmp(field, "rd")) in.rd = (uint8_t)v;
                if (!strcmp(field, "rs1")) in.rs1 = (uint8_t)v;
                if (!strcmp(field, "rs2")) in.rs2 = (uint8_t)v;
                if (!strcmp(field, "rs3")) in.rs3 = (uint8_t)v;
                if (!strcmp(field, "funct1")) in.funct1 = (uint8_t)v;
                if (!strcmp(field, "imm")) in.imm = v;
            }
            uint32_t want = plena_isa_encode(&in);
            struct plena_program p;
            struct plena_err err = {0};
            struct plena_asm_opts o = {1, 0, 0}; /* strict: the text is canonical */
            int rc = plena_asm_text(text, strlen(text), "x.asm", &o, &p, NULL, &err);
            if (rc) fprintf(stderr, "%s: %s %s\n", text, err.where, err.msg);
            assert_int_equal(rc, 0);
            assert_int_equal(p.words[0], want);
            plena_program_free(&p);
            char dis[PLENA_DISASM_MAX];
            plena_disasm_word(want, dis, sizeof dis);
            assert_string_equal(dis, text);
        }
    }
    assert_int_equal(n_ops, 55);
}

/* disasm is the exact inverse of asm for every 32-bit word: asm(disasm(w)) == w
 * (undefined opcodes, FP fields >= 8 and bits outside the form's fields
 * included, through ".word"), and a word whose text is an instruction is the
 * canonical encoding of that text. */
static void test_random_words_stable(void **state)
{
    (void)state;
    uint32_t x = 0x12345678u;
    int as_text = 0, as_word = 0;
    for (int i = 0; i < 100000; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        /* Every other word keeps only the opcode and low fields, so the
         * canonical (text) case is sampled as well as the ".word" one. */
        uint32_t w = (i & 1) ? x : (x & 0x0003FFFFu);
        char a[PLENA_DISASM_MAX];
        plena_disasm_word(w, a, sizeof a);
        struct plena_program p;
        struct plena_err err = {0};
        struct plena_asm_opts o = {0, 0, 0};
        int rc = plena_asm_text(a, strlen(a), "r.asm", &o, &p, NULL, &err);
        if (rc || p.words[0] != w) fprintf(stderr, "%08X '%s': %s %s\n", w, a, err.where, err.msg);
        assert_int_equal(rc, 0);
        assert_int_equal(p.n, 1);
        assert_int_equal(p.words[0], w);
        plena_program_free(&p);
        struct plena_insn in;
        plena_isa_decode(w, &in);
        if (!strncmp(a, ".word", 5)) {
            as_word++;
        } else {
            as_text++;
            assert_true(plena_isa_info(in.op)->valid);
        }
        if (!plena_isa_info(in.op)->valid) {
            char want[32];
            snprintf(want, sizeof want, ".word 0x%08X", w);
            assert_string_equal(a, want);
        }
    }
    assert_true(as_text > 10000);
    assert_true(as_word > 10000);
    static const struct {
        uint32_t word;
        const char *text;
    } worked[] = {
        {0x00000031, ".word 0x00000031"},
        {0x0000C857, "S_ADD_FP f1, f2, f3"},
        {0x00041A28, "H_PREFETCH_M gp8, gp6, a0, 1, 0"},
        {0x00004801, "M_MM 0, gp2, gp1"},
        {0x00000855, "V_RED_SUM f1, gp2, 0"},
        /* bit 31 is outside S_ADD_FP's fields */
        {0x8000C857, ".word 0x8000C857 ; S_ADD_FP f1, f2, f3 with unused bits 0x80000000 set"},
    };
    char buf[PLENA_DISASM_MAX];
    for (size_t i = 0; i < sizeof worked / sizeof worked[0]; i++) {
        plena_disasm_word(worked[i].word, buf, sizeof buf);
        assert_string_equal(buf, worked[i].text);
    }
}

/* testdata/err_*.asm: first line "; expect: strict|lenient LINE:COL: TEXT". */
static void test_error_fixtures(void **state)
{
    (void)state;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/src/isa/testdata", PLENA_SOURCE_DIR);
    DIR *dp = opendir(dir);
    assert_non_null(dp);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(dp))) {
        size_t l = strlen(de->d_name);
        if (strncmp(de->d_name, "err_", 4) || l < 5 || strcmp(de->d_name + l - 4, ".asm")) continue;
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        char *text;
        size_t len;
        struct plena_err err = {0};
        assert_int_equal(plena_file_read_all(path, &text, &len, &err), 0);
        char mode[16], pos[32];
        int off = 0;
        assert_int_equal(sscanf(text, "; expect: %15s %31s %n", mode, pos, &off), 2);
        char *eol = strchr(text + off, '\n');
        char want[800];
        snprintf(want, sizeof want, "%.*s", (int)(eol - (text + off)), text + off);
        pos[strlen(pos) - 1] = 0; /* drop ':' */
        struct plena_asm_opts o = {!strcmp(mode, "strict"), 0, 1};
        struct plena_program p;
        plena_err_clear(&err);
        int rc = plena_asm_text(text, len, de->d_name, &o, &p, NULL, &err);
        char where[300];
        snprintf(where, sizeof where, "%s:%s", de->d_name, pos);
        if (rc != PLENA_E_INPUT || strcmp(err.where, where) || strncmp(err.msg, want, strlen(want)))
            fprintf(stderr, "%s: got rc %d '%s: %s', want '%s: %s'\n", de->d_name, rc, err.where,
                    err.msg, where, want);
        assert_int_equal(rc, PLENA_E_INPUT);
        assert_int_equal(err.code, PLENA_E_INPUT);
        assert_string_equal(err.where, where);
        assert_memory_equal(err.msg, want, strlen(want));
        assert_null(p.words);
        assert_int_equal(p.n, 0);
        /* The strict-only cases assemble in lenient mode (with a warning). */
        if (o.strict) {
            struct plena_asm_diags d = {0};
            o.strict = 0;
            assert_int_equal(plena_asm_text(text, len, de->d_name, &o, &p, &d, &err), 0);
            if (!strstr(de->d_name, "trailing_marker")) assert_true(d.n >= 1);
            plena_asm_diags_free(&d);
            plena_program_free(&p);
        }
        plena_free(text);
        n++;
    }
    closedir(dp);
    assert_true(n >= 24);
}

static void test_lenient_warnings(void **state)
{
    (void)state;
    struct plena_program p;
    struct plena_asm_diags d = {0};
    struct plena_err err = {0};
    const char *src = "S_ADD_FP f1, gp3, f2\n"      /* kind mismatch: number 3 used */
                      "S_ADDI_INT gp0, gp1, 1\n"    /* write to gp0 */
                      "V_TOPK gp1, gp2, gp3, 7\n"   /* policy 2..14 */
                      "M_BTMM 1, gp1, gp2\n"        /* rd != 0 */
                      "H_STORE_V gp1, gp2, a0, 3\n" /* rstride */
                      "M_MM 0, gp1, gp2, 5\n"       /* ignored operand non-zero */
                      "; @stage=nonsense\n";
    assert_int_equal(asm_one(src, 0, 0, &p, &d, &err), 0);
    assert_int_equal(p.n, 6);
    assert_int_equal(p.words[0], 0x17u | (1u << 6) | (3u << 10) | (2u << 14));
    assert_int_equal(d.n, 7);
    static const struct {
        uint32_t line, col;
        const char *text;
    } want[] = {{1, 14, "register kind mismatch"},
                {2, 12, "S_ADDI_INT writes gp0"},
                {3, 23, "V_TOPK policy 7"},
                {4, 8, "M_BTMM rd 1"},
                {5, 25, "rstride 3"},
                {6, 19, "operand 4 is ignored"},
                {7, 10, "unknown stage 'nonsense'"}};
    for (size_t i = 0; i < 7; i++) {
        assert_int_equal(d.v[i].line, want[i].line);
        assert_int_equal(d.v[i].col, want[i].col);
        assert_memory_equal(d.v[i].text, want[i].text, strlen(want[i].text));
    }
    assert_int_equal(p.src_line[5], 6);
    plena_asm_diags_free(&d);
    plena_program_free(&p);
    /* gp0 write is a warning in strict mode too. */
    assert_int_equal(asm_one("S_LUI_INT gp0, 1\n", 1, 0, &p, &d, &err), 0);
    assert_int_equal(d.n, 1);
    plena_asm_diags_free(&d);
    plena_program_free(&p);
}

static void test_empty_and_comments(void **state)
{
    (void)state;
    struct plena_program p;
    struct plena_err err = {0};
    assert_int_equal(asm_one("", 1, 0, &p, NULL, &err), 0);
    assert_int_equal(p.n, 0);
    plena_program_free(&p);
    const char *src = "; header\r\n\n   // c\n\t\nC_BREAK\r\n;; @stage=gather @pair=3\nC_BREAK";
    struct plena_asm_opts o = {1, 0, 1};
    assert_int_equal(plena_asm_text(src, strlen(src), "c.asm", &o, &p, NULL, &err), 0);
    assert_int_equal(p.n, 2);
    assert_int_equal(p.src_line[0], 5);
    assert_int_equal(p.src_line[1], 7);
    assert_int_equal(p.asm_source_lines, 7);
    assert_int_equal(p.asm_source_bytes, strlen(src));
    assert_true(p.has_labels);
    assert_int_equal(p.labels.n, 2);
    assert_int_equal(p.labels.v[1].pair, 3);
    assert_string_equal(p.source_path, "c.asm");
    plena_program_free(&p);
}

/* ---- .mem (docs/formats.md "Machine code") ---- */

static void mem_bad(const char *text, const char *where, const char *msg)
{
    struct plena_program p;
    struct plena_err err = {0};
    assert_int_equal(plena_program_parse_mem(text, strlen(text), "m.mem", &p, &err), PLENA_E_INPUT);
    assert_string_equal(err.where, where);
    assert_string_equal(err.msg, msg);
    assert_null(p.words);
}

static void test_mem_reader(void **state)
{
    (void)state;
    struct plena_program p;
    struct plena_err err = {0};
    const char *ok = "0x00014062\n0X000020a5 \t 4801\r\n\n  ff\n0x0";
    assert_int_equal(plena_program_parse_mem(ok, strlen(ok), "m.mem", &p, &err), 0);
    assert_int_equal(p.n, 5);
    assert_int_equal(p.words[0], 0x00014062);
    assert_int_equal(p.words[1], 0x000020A5);
    assert_int_equal(p.words[2], 0x00004801);
    assert_int_equal(p.words[3], 0xFF);
    assert_int_equal(p.words[4], 0);
    assert_int_equal(p.machine_code_lines, 5);
    plena_program_free(&p);
    assert_int_equal(plena_program_parse_mem("", 0, "m.mem", &p, &err), 0);
    assert_int_equal(p.n, 0);
    plena_program_free(&p);
    mem_bad("0x00014062\n0x0001406\n0x123456789\n", "m.mem:3",
            "invalid machine-code token '0x123456789' (expected 0x followed by 1-8 hex digits)");
    mem_bad("0x1\n\n0xZZ\n", "m.mem:3",
            "invalid machine-code token '0xZZ' (expected 0x followed by 1-8 hex digits)");
    mem_bad("0x", "m.mem:1",
            "invalid machine-code token '0x' (expected 0x followed by 1-8 hex digits)");
    mem_bad("0x1 S_ADD_INT", "m.mem:1",
            "invalid machine-code token 'S_ADD_INT' (expected 0x followed by 1-8 hex digits)");
    mem_bad("0x1;c", "m.mem:1",
            "invalid machine-code token '0x1;c' (expected 0x followed by 1-8 hex digits)");
}

static char tmpdir[64];

static void test_mem_writer_and_load(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/plena_test_asm.XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
    char path[128], apath[128];
    snprintf(path, sizeof path, "%s/p.mem", tmpdir);
    snprintf(apath, sizeof apath, "%s/p.asm", tmpdir);
    uint32_t w[3] = {0x00014062, 0x000020A5, 0xFFFFD562};
    struct plena_err err = {0};
    assert_int_equal(plena_program_write_mem(path, w, 3, &err), 0);
    char *text;
    size_t len;
    assert_int_equal(plena_file_read_all(path, &text, &len, &err), 0);
    assert_string_equal(text, "0x00014062\n0x000020A5\n0xFFFFD562\n");
    plena_free(text);
    struct plena_program p;
    assert_int_equal(plena_program_load(path, NULL, &p, &err), 0);
    assert_int_equal(p.n, 3);
    assert_int_equal(p.words[2], 0xFFFFD562);
    assert_int_equal(p.machine_code_bytes, 33);
    assert_false(p.has_labels);
    plena_program_free(&p);
    const char *src = "; @stage=gather\nS_ADDI_INT gp1, gp0, 5\n";
    assert_int_equal(plena_file_write_atomic(apath, src, strlen(src), &err), 0);
    assert_int_equal(plena_program_load(apath, NULL, &p, &err), 0);
    assert_int_equal(p.n, 1);
    assert_int_equal(p.words[0], 0x00014062);
    assert_true(p.has_labels);
    assert_int_equal(p.src_line[0], 2);
    plena_program_free(&p);
    char missing[160];
    snprintf(missing, sizeof missing, "%s/none.mem", tmpdir);
    assert_int_equal(plena_program_load(missing, NULL, &p, &err), PLENA_E_INPUT);
    unlink(path);
    unlink(apath);
    rmdir(tmpdir);
}

static void test_alloc_failure(void **state)
{
    (void)state;
    const char *src = "S_ADDI_INT gp1, gp0, 5\n; @stage=bogus\nC_BREAK\n";
    for (long k = 0; k < 12; k++) {
        struct plena_program p;
        struct plena_err err = {0};
        struct plena_asm_diags d = {0};
        struct plena_asm_opts o = {0, 0, 1};
        plena_alloc_fail_after(k);
        int rc = plena_asm_text(src, strlen(src), "f.asm", &o, &p, &d, &err);
        plena_alloc_fail_reset();
        if (rc) assert_int_equal(rc, PLENA_E_NOMEM);
        plena_asm_diags_free(&d);
        plena_program_free(&p);
    }
}

/* ---- CLI ($PLENA_BIN) ---- */

/* dir/name read whole; fails the test when unreadable. */
static char *read_in(const char *dir, const char *name)
{
    char *text = plena_test_read_file(dir, name, NULL);
    assert_non_null(text);
    return text;
}

static void test_cli(void **state)
{
    (void)state;
    const char *bin = plena_test_bin();
    if (!bin) {
        fprintf(stderr, "PLENA_BIN not set or not executable: CLI checks skipped\n");
        skip();
    }
    char dir[64], path[256];
    assert_int_equal(plena_test_mkdtemp(dir, sizeof dir, "test_cli"), 0);
    plena_test_path(path, sizeof path, dir, "a.asm");
    plena_test_write_text(dir, "a.asm",
                          "; @stage=router_topk\nV_TOPK gp1, gp2, gp3, 1\n; @stage=gather @pair=4\n"
                          "M_MV_WO gp3, 4\n; @stage=expert_bais\nC_BREAK\n");
    assert_int_equal(plena_test_sh("%s asm %s -o %s/a.mem --stage-map %s/map.json 2>%s/err.txt",
                                   bin, path, dir, dir, dir),
                     0);
    char *text = read_in(dir, "a.mem");
    assert_string_equal(text, "0x0004C877\n0x000100CB\n0x00000034\n");
    plena_free(text);
    text = read_in(dir, "err.txt");
    assert_non_null(strstr(text, "a.asm:5:10: warning: unknown stage 'expert_bais'"));
    plena_free(text);
    text = read_in(dir, "map.json");
    assert_non_null(strstr(text, "\"mode\": \"markers\""));
    assert_non_null(strstr(text, "{\"pc\": 2, \"line\": 6, \"stage\": \"gather\", \"pair\": 4}"));
    assert_non_null(
        strstr(text, "{\"name\": \"expert_bais\", \"first_line\": 5, \"occurrences\": 1}"));
    plena_free(text);
    /* upstream encoder */
    assert_int_equal(
        plena_test_sh("%s asm %s -o %s/u.mem --encoder=upstream 2>/dev/null", bin, path, dir), 0);
    text = read_in(dir, "u.mem");
    assert_string_equal(text, "0x0004C877\n0x000010CB\n0x00000034\n");
    plena_free(text);
    /* strict: unknown stage is an input error (exit 3) with file:line:col */
    assert_int_equal(
        plena_test_sh("%s asm %s -o %s/s.mem --strict 2>%s/err2.txt", bin, path, dir, dir), 3);
    text = read_in(dir, "err2.txt");
    assert_non_null(strstr(text, "a.asm:5:10: error: unknown stage 'expert_bais' (expected one of: "
                                 "router_topk, "));
    plena_free(text);
    char p2[300];
    assert_int_not_equal(access(plena_test_path(p2, sizeof p2, dir, "s.mem"), F_OK), 0);
    /* usage errors, unwritable output, missing input */
    assert_int_equal(plena_test_sh("%s asm %s 2>/dev/null", bin, path), 2);
    assert_int_equal(plena_test_sh("%s asm %s -o x.mem --encoder=foo 2>/dev/null", bin, path), 2);
    assert_int_equal(plena_test_sh("%s asm %s -o %s/nodir/x.mem 2>/dev/null", bin, path, dir), 4);
    assert_int_equal(plena_test_sh("%s asm %s/missing.asm -o %s/x.mem 2>/dev/null", bin, dir, dir),
                     3);
    assert_int_equal(plena_test_sh("%s asm --help >/dev/null", bin), 0);
    /* disasm */
    assert_int_equal(plena_test_sh("%s disasm %s/a.mem -o %s/d.asm", bin, dir, dir), 0);
    text = read_in(dir, "d.asm");
    assert_string_equal(text, "V_TOPK gp1, gp2, gp3, 1\nM_MV_WO gp3, 4\nC_BREAK\n");
    plena_free(text);
    plena_test_write_text(dir, "bad.mem", "0x1\n0xG\n");
    assert_int_equal(plena_test_sh("%s disasm %s/bad.mem 2>/dev/null >/dev/null", bin, dir), 3);
    assert_int_equal(plena_test_sh("%s disasm --help >/dev/null", bin), 0);
    assert_int_equal(plena_test_rmtree(dir), 0);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_worked_encodings),
    cmocka_unit_test(test_upstream_warns_where_layouts_differ),
    cmocka_unit_test(test_upstream_operand_forms),
    cmocka_unit_test(test_every_opcode_roundtrip),
    cmocka_unit_test(test_random_words_stable),
    cmocka_unit_test(test_error_fixtures),
    cmocka_unit_test(test_lenient_warnings),
    cmocka_unit_test(test_empty_and_comments),
    cmocka_unit_test(test_mem_reader),
    cmocka_unit_test(test_mem_writer_and_load),
    cmocka_unit_test(test_alloc_failure),
    cmocka_unit_test(test_cli),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), NULL, NULL);
}

/* plena disasm: machine code (.mem, docs/formats.md "Machine code") to
 * canonical assembly (docs/machine.md "Disassembly"), one line per word, to
 * stdout or -o (written atomically). */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/fileio.h"
#include "isa/disasm.h"
#include "isa/program.h"

struct disasm_cli {
    const char *in, *out;
};

static const struct plena_opt disasm_rows[] = {
    PLENA_OPT_PATH_ROW("-o", "OUT.asm", struct disasm_cli, out,
                       "write to a file (atomically) instead of standard output",
                       .def_text = "standard output"),
};
static const struct plena_opt_pos disasm_pos[] = {{"IN.mem",
                                                   "machine code, one 0xXXXXXXXX word per line",
                                                   offsetof(struct disasm_cli, in), 1, 1}};

static const struct plena_cmd_spec plena_disasm_spec = {
    .name = "disasm",
    .summary = "disassemble PLENA machine code into assembly",
    .description = "Disassembles PLENA machine code into canonical assembly, every optional "
                   "operand written out; a word no instruction text reproduces (undefined opcode, "
                   "FP field >= 8, unused bits set) becomes `.word 0xXXXXXXXX` with the "
                   "instruction as a comment, so `plena asm` of the output gives every word back.",
    PLENA_CMD_POS(disasm_pos),
    PLENA_CMD_ROWS(disasm_rows),
    .opts_size = sizeof(struct disasm_cli),
};

static int cmd_disasm(void *opts, const struct plena_cli_args *a)
{
    struct disasm_cli *c = opts;
    (void)a;
    const char *in = c->in, *out = c->out;
    struct plena_program p;
    struct plena_err err;
    plena_err_clear(&err);
    if (plena_program_read_mem(in, &p, &err)) return plena_cli_report("disasm", &err);
    struct plena_buf b;
    plena_buf_init(&b);
    int rc = plena_disasm_words(p.words, p.n, &b, &err);
    plena_program_free(&p);
    if (!rc) {
        if (out) {
            rc = plena_file_write_atomic(out, b.data ? b.data : "", b.len, &err);
        } else if (b.len && fwrite(b.data, 1, b.len, stdout) != b.len) {
            rc = PLENA_FAIL(&err, PLENA_E_OUTPUT, "<stdout>", "write failed");
        }
    }
    plena_buf_free(&b);
    return rc ? plena_cli_report("disasm", &err) : plena_status_exit_code(PLENA_OK);
}

const struct plena_cli_cmd plena_cli_cmd_disasm = {.spec = &plena_disasm_spec, .run = cmd_disasm};

/* plena disasm: machine code (.mem, spec/numerics-and-files.md 8) to
 * canonical assembly (spec/isa.md 13.6), one line per word, to stdout or -o
 * (written atomically). Exit 0 / 2 usage / 3 input / 4 output. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/fileio.h"
#include "isa/disasm.h"
#include "isa/program.h"

static const char help[] =
    "usage: plena disasm IN.mem [-o OUT.asm]\n\n"
    "Disassembles PLENA machine code into canonical assembly, every optional\n"
    "operand written out; invalid opcodes become `.word 0xXXXXXXXX`.\n\n"
    "  -o OUT.asm   write to a file (atomically) instead of standard output\n\n"
    "exit status: 0 success, 2 usage, 3 invalid input, 4 output not writable\n";

int plena_cmd_disasm(int argc, char **argv)
{
    const char *in = NULL, *out = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(help, stdout);
            return 0;
        } else if (!strcmp(a, "-o")) {
            if (i + 1 >= argc) return plena_cli_usage_error("disasm", "-o needs a value");
            out = argv[++i];
        } else if (a[0] == '-' && a[1]) {
            return plena_cli_usage_error("disasm", "unknown option '%s'", a);
        } else if (!in) {
            in = a;
        } else {
            return plena_cli_usage_error("disasm", "more than one input file ('%s', '%s')", in, a);
        }
    }
    if (!in) return plena_cli_usage_error("disasm", "missing input file");
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
    return rc ? plena_cli_report("disasm", &err) : 0;
}

/* An out-of-tree user of the installed libplena (CTest install_consumers):
 * only <plena/plena.h>, no plena source tree. Assembles a small PLENA program
 * with a hardware loop, runs it on the emulator built from the reference
 * settings, checks the scalar registers, then runs it again through the run
 * session (emulator + timing) and checks that it completed and took time.
 * EXPECT_VERSION (from pkg-config --modversion or the CMake package) must
 * equal plena_version(). Exit 0 only when every check holds. */
#include <plena/plena.h>

#include <stdio.h>
#include <string.h>

#ifndef EXPECT_VERSION
#error "build with -DEXPECT_VERSION=\"<version of the installed package>\""
#endif

/* gp3 = 1200 + 34 = 1234; gp4 = 1234 * 34 = 41956; the loop adds gp2 ten times to gp5. */
static const char program[] = "; @stage=gather\n"
                              "S_ADDI_INT gp1, gp0, 1200\n"
                              "S_ADDI_INT gp2, gp0, 34\n"
                              "S_ADD_INT gp3, gp1, gp2\n"
                              "S_MUL_INT gp4, gp3, gp2\n"
                              "C_LOOP_START gp6, 10\n"
                              "S_ADD_INT gp5, gp5, gp2\n"
                              "C_LOOP_END gp6\n";
static const uint32_t expect_gp[][2] = {{3, 1234}, {4, 41956}, {5, 340}};

static int fail(const char *what, const struct plena_err *err)
{
    fprintf(stderr, "consumer: %s: %s: %s\n", what, err ? err->where : "", err ? err->msg : "");
    return 1;
}

int main(void)
{
    if (strcmp(plena_version(), EXPECT_VERSION) != 0) {
        fprintf(stderr, "consumer: plena_version() %s, package %s\n", plena_version(),
                EXPECT_VERSION);
        return 1;
    }
    struct plena_err err = {0};
    struct plena_settings s;
    plena_settings_reference(&s);
    struct plena_asm_opts opts = {0};
    struct plena_program prog = {0};
    if (plena_asm_text(program, strlen(program), "consumer.asm", &opts, &prog, NULL, &err))
        return fail("assemble", &err);

    struct plena_emu *emu = NULL;
    if (plena_emu_new(&s, 0, &emu, &err)) return fail("emulator", &err);
    struct plena_emu_result res;
    if (plena_emu_run(emu, &prog, NULL, NULL, &res, &err)) return fail("run", &err);
    if (res.status != PLENA_RUN_COMPLETED) return fail("run trapped", NULL);
    int bad = 0;
    uint32_t got[3];
    for (size_t i = 0; i < 3; i++) {
        got[i] = plena_emu_gp_get(emu, expect_gp[i][0]);
        if (got[i] != expect_gp[i][1]) {
            fprintf(stderr, "consumer: gp%u = %u, expected %u\n", expect_gp[i][0], got[i],
                    expect_gp[i][1]);
            bad = 1;
        }
    }
    plena_emu_free(emu);

    struct plena_run_opts o;
    memset(&o, 0, sizeof o);
    o.program = &prog;
    o.settings = &s;
    o.hbm_model = -1;
    o.threads = 1;
    struct plena_run_outcome *out = plena_malloc(sizeof *out); /* large: not on the stack */
    if (!out) return fail("out of memory", NULL);
    if (plena_run_execute(&o, out, &err)) return fail("run session", &err);
    if (out->status != PLENA_RUN_OUT_COMPLETED || out->serial_cycles == 0) {
        fprintf(stderr, "consumer: run session status %d, %llu cycles\n", (int)out->status,
                (unsigned long long)out->serial_cycles);
        bad = 1;
    }
    printf("consumer: plena %s: gp3=%u gp4=%u gp5=%u, %llu instructions, %llu cycles: %s\n",
           plena_version(), got[0], got[1], got[2], (unsigned long long)out->instructions_executed,
           (unsigned long long)out->serial_cycles, bad ? "FAILED" : "ok");
    plena_free(out);
    plena_program_free(&prog);
    return bad;
}

/* plena moe: build a MoE layer program (spec/moe-lowering.md 6.1).
 * Writes program.asm, program.mem and layout.json into --out. Staging of the
 * memory images (hbm.bin, fp_sram.bin, int_sram.bin, vram_preload.bin), the
 * run through src/run/ and the --check against src/ref/ are not wired yet
 * (TODO below): until then --no-run or --program-only is required. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/alloc.h"
#include "common/fileio.h"
#include "gen/moe.h"

static void usage(void)
{
    printf("usage: plena moe --model NAME|FILE --tokens T [--routing device|balanced|random|FILE]\n"
           "                 [--seed S] [--weights random|zero|representable] [--out DIR]\n"
           "                 [--no-run] [--check] [--profile] [--program-only] [--list-models]\n");
}

static int write_layout(const char *path, const struct plena_moe_cfg *cfg, uint32_t T,
                        const struct plena_moe_emit_info *info, struct plena_err *err)
{
    struct plena_buf b;
    plena_buf_init(&b);
    const struct plena_moe_map *m = &info->map;
    static const char *space[] = {"vram", "hbm", "fp_sram", "int_sram"};
    plena_buf_printf(&b, "{\n  \"model\": \"%s\",\n  \"tokens\": %u,\n  \"tensors\": [\n",
                     cfg->name, T);
    for (unsigned i = 0; i < info->n_abi; i++) {
        const struct plena_tensor *t = &info->abi[i];
        plena_buf_printf(&b,
                         "    {\"name\": \"%s\", \"space\": \"%s\", \"base\": %llu, \"rows\": %u, "
                         "\"cols\": %u, \"prow\": %u, \"pcol\": %u}%s\n",
                         t->name, space[t->space], (unsigned long long)t->base, t->rows, t->cols,
                         t->prow, t->pcol, i + 1 < info->n_abi ? "," : "");
    }
    plena_buf_printf(&b,
                     "  ],\n  \"fp_sram\": {\"fp_base\": %u, \"zero_row\": 0, "
                     "\"one\": {\"offset\": %u, \"value\": %.9g}, "
                     "\"neg_alpha_routed\": {\"offset\": %u, \"value\": %.9g}, "
                     "\"neg_alpha_shared\": {\"offset\": %u, \"value\": %.9g}, "
                     "\"limit_pos\": {\"offset\": %u, \"value\": %.9g}, "
                     "\"limit_neg\": {\"offset\": %u, \"value\": %.9g}, "
                     "\"eps\": {\"offset\": %u, \"value\": %.9g}, "
                     "\"inv_h\": {\"offset\": %u, \"value\": %.9g}, "
                     "\"dot_scratch\": %u, \"w_off\": %u, \"gate_off\": %u, \"used\": %u},\n",
                     m->fp_base, m->off_one, m->c_one, m->off_na_routed, m->c_na_routed,
                     m->off_na_shared, m->c_na_shared, m->off_lp, m->c_lp, m->off_ln, m->c_ln,
                     m->off_eps, m->c_eps, m->off_invh, m->c_invh, m->off_dot, m->w_off,
                     m->gate_off, m->fp_used);
    plena_buf_printf(&b,
                     "  \"int_sram\": {\"int_base\": %u, \"ids_off\": %u, \"wtab_off\": %u, "
                     "\"spill_off\": %u, \"used\": %u},\n",
                     m->int_base, m->ids_off, m->wtab_off, m->spill_off, m->int_used);
    plena_buf_printf(
        &b,
        "  \"hbm\": {\"expert_stride\": %llu, \"windowed\": %s, \"experts_per_window\": "
        "%u, \"end\": %llu},\n",
        (unsigned long long)m->stride, m->windowed ? "true" : "false", m->epw,
        (unsigned long long)m->hbm_end);
    plena_buf_puts(&b, "  \"emit\": {\"topk_encoding\": {\"encoding\": \"");
    plena_buf_puts(&b, plena_topk_encoding_name(info->topk_encoding));
    plena_buf_puts(&b, "\", \"rmask\": ");
    if (info->topk_rmask < 0)
        plena_buf_puts(&b, "null");
    else
        plena_buf_printf(&b, "%d", info->topk_rmask);
    plena_buf_puts(&b, ", \"packed\": ");
    if (info->topk_encoding == PLENA_TOPK_ENC_REGISTER)
        plena_buf_printf(&b, "%u", info->topk_packed);
    else
        plena_buf_puts(&b, "null");
    plena_buf_printf(&b,
                     "}, \"routed_lowering\": \"%s\", \"t_blk\": %u, \"n_blocks\": %u, "
                     "\"pair_form\": \"%s\", \"vram_peak\": %llu, \"abi_elems\": %llu, "
                     "\"approx_routing\": %s,\n    \"stages\": {",
                     info->routed_lowering == PLENA_LOWERING_PAIR_MAJOR ? "pair_major" : "none",
                     m->t_blk, m->n_blocks, plena_pair_form_name(info->pair_form),
                     (unsigned long long)info->vram_peak, (unsigned long long)info->abi_elems,
                     cfg->approx_routing ? "true" : "false");
    for (int s = 0; s < PLENA_STAGE_COUNT; s++)
        plena_buf_printf(&b, "%s\"%s\": {\"static\": %llu, \"dynamic\": %llu}", s ? ", " : "",
                         plena_stage_name((enum plena_stage)s),
                         (unsigned long long)info->static_count[s],
                         (unsigned long long)info->dyn_count[s]);
    plena_buf_puts(&b, "}}\n}\n");
    int rc = b.failed ? PLENA_FAIL(err, PLENA_E_NOMEM, path, "out of memory")
                      : plena_file_write_atomic(path, b.data, b.len, err);
    plena_buf_free(&b);
    return rc;
}

int plena_cmd_moe(int argc, char **argv)
{
    static const struct option opts[] = {{"model", required_argument, 0, 'm'},
                                         {"tokens", required_argument, 0, 't'},
                                         {"routing", required_argument, 0, 'r'},
                                         {"seed", required_argument, 0, 's'},
                                         {"weights", required_argument, 0, 'w'},
                                         {"out", required_argument, 0, 'o'},
                                         {"no-run", no_argument, 0, 'n'},
                                         {"check", no_argument, 0, 'c'},
                                         {"profile", no_argument, 0, 'p'},
                                         {"program-only", no_argument, 0, 'P'},
                                         {"list-models", no_argument, 0, 'L'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *model = NULL, *out = "moe_build", *routing = "device", *weights = "random";
    long tokens = 0;
    int no_run = 0, check = 0, profile = 0, program_only = 0, list = 0;
    optind = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (ch) {
        case 'm': model = optarg; break;
        case 't': {
            char *end;
            tokens = strtol(optarg, &end, 10);
            if (*end || end == optarg)
                return plena_cli_usage_error("moe", "--tokens: expected an integer, got '%s'",
                                             optarg);
            break;
        }
        case 'r': routing = optarg; break;
        case 's': break;
        case 'w': weights = optarg; break;
        case 'o': out = optarg; break;
        case 'n': no_run = 1; break;
        case 'c': check = 1; break;
        case 'p': profile = 1; break;
        case 'P': program_only = 1; break;
        case 'L': list = 1; break;
        case 'h': usage(); return 0;
        default: return plena_cli_usage_error("moe", "unknown option");
        }
    }
    if (list) {
        for (unsigned i = 0; i < plena_gen_preset_count(); i++) {
            const struct plena_moe_model *m = plena_gen_preset_at(i);
            printf("%-20s H=%-5u I=%-5u E=%-4u k=%-3u shared=%u x %u%s\n", m->name, m->hidden,
                   m->moe_inter, m->num_experts, m->top_k, m->n_shared, m->shared_inter,
                   m->is_tiny ? " (tiny)" : "");
        }
        return 0;
    }
    if (!model) return plena_cli_usage_error("moe", "--model is required");
    if (tokens <= 0)
        return plena_cli_usage_error("moe", "--tokens must be a positive integer (got %ld)",
                                     tokens);
    if (strcmp(weights, "random") && strcmp(weights, "zero") && strcmp(weights, "representable"))
        return plena_cli_usage_error("moe", "--weights: expected random, zero or representable");
    (void)profile;
    (void)check;
    struct plena_err err;
    plena_err_clear(&err);
    struct plena_moe_model mdl;
    if (plena_gen_model_resolve(model, &mdl, &err)) return plena_cli_report("moe", &err);
    struct plena_gen_machine gm;
    plena_gen_machine_default(&gm);
    if (plena_gen_model_validate(&mdl, gm.mlen, &err)) return plena_cli_report("moe", &err);
    struct plena_moe_cfg cfg;
    plena_moe_cfg_from_model(&mdl, &gm, &cfg);
    if (!strcmp(routing, "device")) {
        /* the preset's own path (FIXED presets stay FIXED) */
    } else if (!strcmp(routing, "balanced") || !strcmp(routing, "random")) {
        if (cfg.routing != PLENA_ROUTING_NONE) cfg.routing = PLENA_ROUTING_FIXED;
    } else {
        /* TODO(gen): route-trace files (shape check against T x k) */
        fprintf(stderr, "plena moe: --routing FILE is not supported yet\n");
        return 2;
    }
    if (!no_run && !program_only) {
        /* TODO(gen): stage images and run through src/run/ once it exists,
         * then print the stage table; --check via src/ref/. */
        fprintf(stderr, "plena moe: running is not built in this version; use --no-run or "
                        "--program-only\n");
        return 2;
    }
    struct plena_prog prog;
    struct plena_moe_emit_info info;
    if (plena_moe_generate(&cfg, (uint32_t)tokens, &prog, &info, &err)) {
        plena_prog_free(&prog);
        return plena_cli_report("moe", &err);
    }
    int rc = 0;
    char path[4096];
    struct plena_buf asmb;
    plena_buf_init(&asmb);
    uint32_t *words = NULL;
    size_t n = 0;
    if (plena_mkdir_p(out, &err) || plena_prog_render_asm(&prog, &asmb) ||
        plena_prog_words(&prog, &words, &n)) {
        if (!plena_err_is_set(&err)) PLENA_FAIL(&err, PLENA_E_NOMEM, out, "out of memory");
        rc = plena_cli_report("moe", &err);
        goto done;
    }
    if (plena_path_join(path, sizeof path, out, "program.asm") ||
        plena_file_write_atomic(path, asmb.data, asmb.len, &err) ||
        plena_path_join(path, sizeof path, out, "program.mem") ||
        plena_program_write_mem(path, words, n, &err) ||
        plena_path_join(path, sizeof path, out, "layout.json") ||
        write_layout(path, &cfg, (uint32_t)tokens, &info, &err)) {
        if (!plena_err_is_set(&err)) PLENA_FAIL(&err, PLENA_E_OUTPUT, out, "path too long");
        rc = plena_cli_report("moe", &err);
        goto done;
    }
    printf("moe: %s T=%ld: %zu instructions (%llu executed), T_blk %u, pairs %s, topk %s -> %s\n",
           cfg.name, tokens, prog.n_insns, (unsigned long long)prog.dyn_total, info.map.t_blk,
           plena_pair_form_name(info.pair_form), plena_topk_encoding_name(info.topk_encoding), out);
    if (!program_only)
        printf("moe: memory images not staged (hbm.bin etc.: not implemented yet)\n");
done:
    plena_free(words);
    plena_buf_free(&asmb);
    plena_prog_free(&prog);
    return rc;
}

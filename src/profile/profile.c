/* Profile accumulator and the profile JSON v4 writer
 * (docs/profile.md).
 *
 * Picoseconds are summed per stage / pair / pair-stage / resource class and
 * turned into cycles exactly once per reported quantity (I2). The JSON is
 * built with jansson (insertion order = key order of the spec, 2-space
 * indent, reals with 17 significant digits) and written atomically. This
 * file does not know how the durations were obtained. */
#include "profile/profile.h"

#include "model/routing_json.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/fileio.h"
#include "isa/isa.h"
#include "profile/profile_json.h"

/* pc_op of a pc not executed yet (opcodes are 6 bits) */
#define PROFILE_OP_UNSET 0xFF

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

int plena_profile_init(struct plena_profile *p, const struct plena_labels *labels,
                       size_t n_instructions, uint64_t clock_period_ps, struct plena_err *err)
{
    memset(p, 0, sizeof *p);
    if (clock_period_ps == 0)
        return PLENA_FAIL(err, PLENA_E_INTERNAL, "profile", "clock period 0 ps");
    if (labels && labels->n != n_instructions)
        return PLENA_FAIL(err, PLENA_E_INPUT, "profile",
                          "label count %zu (assembly) does not match instruction count %zu "
                          "(program)",
                          labels->n, n_instructions);
    p->clock_period_ps = clock_period_ps;
    p->labels = labels;
    p->n_pc = n_instructions;
    for (unsigned op = 0; op < 64; op++)
        p->res_of_op[op] = (uint8_t)plena_resource_of(op);
    size_t n = n_instructions ? n_instructions : 1;
    p->pc_stage = plena_malloc(n);
    p->pc_pair = plena_calloc(n, sizeof *p->pc_pair);
    p->pcs = plena_calloc(n, sizeof *p->pcs);
    p->pc_op = plena_malloc(n);
    uint32_t *ids = plena_calloc(n, sizeof *ids);
    if (!p->pc_stage || !p->pc_pair || !p->pcs || !p->pc_op || !ids) {
        plena_free(ids);
        plena_profile_free(p);
        return PLENA_FAIL(err, PLENA_E_NOMEM, "profile", "out of memory for %zu labels",
                          n_instructions);
    }
    size_t n_ids = 0;
    for (size_t i = 0; i < n_instructions; i++) {
        unsigned st = labels ? labels->v[i].stage : PLENA_STAGE_OTHER;
        p->pc_stage[i] = (uint8_t)(st < PLENA_STAGE_COUNT ? st : PLENA_STAGE_OTHER);
        p->pc_pair[i] = -1;
        p->pc_op[i] = PROFILE_OP_UNSET;
        if (labels && labels->v[i].has_pair) ids[n_ids++] = labels->v[i].pair;
    }
    /* Distinct pair ids in ascending numeric order = the JSON order. */
    plena_qsort(ids, n_ids, sizeof *ids, cmp_u32);
    size_t n_distinct = 0;
    for (size_t i = 0; i < n_ids; i++)
        if (n_distinct == 0 || ids[n_distinct - 1] != ids[i]) ids[n_distinct++] = ids[i];
    if (n_distinct) {
        p->pairs = plena_calloc(n_distinct, sizeof *p->pairs);
        if (!p->pairs) {
            plena_free(ids);
            plena_profile_free(p);
            return PLENA_FAIL(err, PLENA_E_NOMEM, "profile", "out of memory for %zu pairs",
                              n_distinct);
        }
        for (size_t i = 0; i < n_distinct; i++)
            p->pairs[i].id = ids[i];
        p->n_pairs = n_distinct;
        for (size_t i = 0; i < n_instructions; i++) {
            if (!labels->v[i].has_pair) continue;
            uint32_t key = labels->v[i].pair;
            const uint32_t *hit = bsearch(&key, ids, n_distinct, sizeof *ids, cmp_u32);
            p->pc_pair[i] = (int32_t)(hit - ids);
        }
    }
    plena_free(ids);
    return 0;
}

void plena_profile_free(struct plena_profile *p)
{
    if (!p) return;
    plena_free(p->pc_stage);
    plena_free(p->pc_pair);
    plena_free(p->pairs);
    plena_free(p->pcs);
    plena_free(p->pc_op);
    p->pc_stage = NULL;
    p->pc_pair = NULL;
    p->pairs = NULL;
    p->pcs = NULL;
    p->pc_op = NULL;
    p->n_pairs = 0;
}

/* n executions of one resource class summing ps picoseconds and rd / wr
 * bytes (integer sums: added per instruction or per pc, the same figures) */
static inline void fig_add(struct plena_profile_figures *f, unsigned res, uint64_t n, uint64_t ps,
                           uint64_t rd, uint64_t wr)
{
    f->instructions += n;
    f->picos += ps;
    f->bytes_read += rd;
    f->bytes_written += wr;
    f->res_picos[res] += ps;
}

/* Bills n executions at pc of opcode straight into the figures. */
static void bill(struct plena_profile *p, uint32_t pc, unsigned opcode, uint64_t n, uint64_t picos,
                 uint64_t rd, uint64_t wr)
{
    unsigned res = p->res_of_op[opcode & 63];
    unsigned st = PLENA_STAGE_OTHER;
    int32_t pair = -1;
    if (pc < p->n_pc) {
        st = p->pc_stage[pc];
        pair = p->pc_pair[pc];
    }
    fig_add(&p->total, res, n, picos, rd, wr);
    fig_add(&p->stage[st], res, n, picos, rd, wr);
    if (pair >= 0) {
        fig_add(&p->pairs[pair].total, res, n, picos, rd, wr);
        fig_add(&p->pairs[pair].stage[st], res, n, picos, rd, wr);
    }
}

static inline void add_one(struct plena_profile *p, uint32_t pc, unsigned opcode, uint64_t picos,
                           uint64_t n_read_txn, uint64_t n_write_txn)
{
    if (pc < p->n_pc) {
        /* the usual case: the opcode this pc had before (a program does not
         * change), summed per pc; the first time, the pc takes it */
        if (p->pc_op[pc] == PROFILE_OP_UNSET) p->pc_op[pc] = (uint8_t)(opcode & 63);
        if (p->pc_op[pc] == (opcode & 63)) {
            struct plena_profile_pc *c = &p->pcs[pc];
            c->n++;
            c->picos += picos;
            c->rd_txn += n_read_txn;
            c->wr_txn += n_write_txn;
            p->pending++;
            return;
        }
    }
    bill(p, pc, opcode, 1, picos, 64 * n_read_txn, 64 * n_write_txn);
}

void plena_profile_add(struct plena_profile *p, uint32_t pc, unsigned opcode, uint64_t picos,
                       uint64_t n_read_txn, uint64_t n_write_txn)
{
    add_one(p, pc, opcode, picos, n_read_txn, n_write_txn);
}

void plena_profile_add_steps(struct plena_profile *p, const struct plena_timing_step *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        add_one(p, s[i].pc, s[i].op, s[i].dur_ps, s[i].rd_txn, s[i].wr_txn);
}

void plena_profile_flush(struct plena_profile *p)
{
    for (size_t pc = 0; p->pending && pc < p->n_pc; pc++) {
        struct plena_profile_pc *c = &p->pcs[pc];
        if (!c->n) continue;
        bill(p, (uint32_t)pc, p->pc_op[pc], c->n, c->picos, 64 * c->rd_txn, 64 * c->wr_txn);
        p->pending -= c->n;
        memset(c, 0, sizeof *c);
    }
}

static uint64_t ceil_div(uint64_t ps, uint64_t period)
{
    return ps / period + (ps % period != 0);
}

/* ---- split of docs/profile.md "Shared-vs-routed split" ---- */

void plena_profile_split_compute(const uint64_t w[PLENA_STAGE_COUNT], uint64_t period,
                                 struct plena_profile_split *o)
{
    memset(o, 0, sizeof *o);
    if (period == 0) period = 1;
    for (unsigned s = 0; s < PLENA_STAGE_COUNT; s++) {
        o->branch_picos[plena_stage_branch((enum plena_stage)s)] += w[s];
        o->total_picos += w[s];
        if (plena_stage_is_routing_tax((enum plena_stage)s)) o->routing_tax_picos += w[s];
    }
    o->shared_picos = o->branch_picos[PLENA_BRANCH_SHARED];
    o->routed_picos = o->branch_picos[PLENA_BRANCH_ROUTED];
    o->excluded_picos = o->branch_picos[PLENA_BRANCH_COMBINE] +
                        o->branch_picos[PLENA_BRANCH_RESIDUAL] +
                        o->branch_picos[PLENA_BRANCH_OTHER];
    o->shared_cycles = ceil_div(o->shared_picos, period);
    o->routed_cycles = ceil_div(o->routed_picos, period);
    o->routing_tax_cycles = ceil_div(o->routing_tax_picos, period);
    uint64_t sr = o->shared_picos + o->routed_picos;
    if (sr > 0) {
        o->has_shared_fraction = 1;
        o->shared_fraction = (double)o->shared_picos / (double)sr;
        o->routed_fraction = (double)o->routed_picos / (double)sr;
    }
    if (o->routed_picos > 0) {
        o->has_ratio = 1;
        o->shared_to_routed_ratio = (double)o->shared_picos / (double)o->routed_picos;
    }
}

enum plena_lowering plena_profile_lowering(const struct plena_profile *p)
{
    uint64_t routed = 0;
    for (unsigned s = 0; s < PLENA_STAGE_COUNT; s++)
        if (plena_stage_is_routed_expert((enum plena_stage)s)) routed += p->stage[s].instructions;
    if (routed == 0) return PLENA_LOWERING_UNSET;
    if (p->labels && p->labels->lowering == PLENA_LOWERING_EXPERT_MAJOR)
        return PLENA_LOWERING_EXPERT_MAJOR;
    return PLENA_LOWERING_PAIR_MAJOR;
}

const char *plena_profile_routed_lowering(const struct plena_profile *p)
{
    return plena_lowering_marker(plena_profile_lowering(p));
}

/* ---- JSON ---- */

/* Every set returns -1 on allocation failure; the caller checks once. */
struct jb {
    int failed;
};

static void put(struct jb *b, json_t *obj, const char *key, json_t *v)
{
    if (!v || json_object_set_new(obj, key, v) != 0) b->failed = 1;
}

/* An empty object; NULL (the builder marked failed) on allocation failure. */
static json_t *new_obj(struct jb *b)
{
    json_t *o = json_object();
    if (!o) b->failed = 1;
    return o;
}

static json_t *jint(uint64_t v)
{
    return json_integer((json_int_t)v);
}

static json_t *ratio(uint64_t a, uint64_t b)
{
    return json_real(b ? (double)a / (double)b : 0.0);
}

static json_t *resource_obj(struct jb *b, const uint64_t *res, uint64_t period)
{
    json_t *o = new_obj(b);
    if (!o) return NULL;
    for (unsigned r = 0; r < PLENA_RESOURCE_COUNT; r++)
        put(b, o, plena_resource_name((enum plena_resource)r),
            jint(period ? ceil_div(res[r], period) : res[r]));
    return o;
}

/* kind: 0 stage entry, 1 pair entry, 2 pair's per-stage entry (docs/profile.md "Profile JSON"). */
static json_t *entry(struct jb *b, const struct plena_profile *p,
                     const struct plena_profile_figures *f, int kind,
                     const struct plena_profile_pair *pair)
{
    uint64_t period = p->clock_period_ps;
    json_t *o = new_obj(b);
    if (!o) return NULL;
    put(b, o, "instructions", jint(f->instructions));
    put(b, o, "wall_picos", jint(f->picos));
    put(b, o, "wall_cycles", jint(ceil_div(f->picos, period)));
    put(b, o, "seconds", json_real((double)f->picos / 1e12));
    if (kind == 0) {
        put(b, o, "instruction_fraction", ratio(f->instructions, p->total.instructions));
        put(b, o, "time_fraction", ratio(f->picos, p->total.picos));
    }
    put(b, o, "logical_bytes_read", json_null());
    put(b, o, "logical_bytes_written", json_null());
    put(b, o, "physical_hbm_bytes_read", jint(f->bytes_read));
    put(b, o, "physical_hbm_bytes_written", jint(f->bytes_written));
    put(b, o, "hbm_bytes_read", jint(f->bytes_read));
    put(b, o, "hbm_bytes_written", jint(f->bytes_written));
    /* resource_obj with period 0 copies picos unrounded */
    put(b, o, "resource_proxy_picos", resource_obj(b, f->res_picos, 0));
    put(b, o, "resource_proxy_cycles", resource_obj(b, f->res_picos, period));
    if (kind == 1) {
        json_t *st = new_obj(b);
        for (unsigned s = 0; st && s < PLENA_STAGE_COUNT; s++)
            put(b, st, plena_stage_name((enum plena_stage)s),
                entry(b, p, &pair->stage[s], 2, NULL));
        put(b, o, "stages", st);
    }
    return o;
}

static json_t *trap_obj(struct jb *b, const struct plena_profile_trap *t)
{
    json_t *o = new_obj(b);
    if (!o) return NULL;
    put(b, o, "pc", jint(t->pc));
    put(b, o, "opcode", jint(t->opcode));
    put(b, o, "mnemonic", json_string(t->mnemonic ? t->mnemonic : "?"));
    put(b, o, "source_file", t->source_file ? json_string(t->source_file) : json_null());
    put(b, o, "source_line", t->source_line ? jint(t->source_line) : json_null());
    put(b, o, "message", json_string(t->message ? t->message : ""));
    return o;
}

json_t *plena_profile_overlap_json(const struct plena_overlap_report *r)
{
    struct jb b = {0};
    json_t *o = json_object();
    if (!o) return NULL;
    put(&b, o, "enabled", json_true());
    put(&b, o, "serial_picos", jint(r->serial_picos));
    put(&b, o, "serial_cycles", jint(r->serial_cycles));
    put(&b, o, "adjusted_picos", jint(r->adjusted_picos));
    put(&b, o, "adjusted_cycles", jint(r->adjusted_cycles));
    put(&b, o, "hidden_prefetch_picos", jint(r->hidden_prefetch_picos));
    put(&b, o, "hidden_prefetch_cycles", jint(r->hidden_prefetch_cycles));
    put(&b, o, "pending_prefetch_picos", jint(r->pending_prefetch_picos));
    put(&b, o, "pending_prefetch_cycles", jint(r->pending_prefetch_cycles));
    put(&b, o, "prefetch_ops", jint(r->prefetch_ops));
    put(&b, o, "compute_ops", jint(r->compute_ops));
    put(&b, o, "barrier_ops", jint(r->barrier_ops));
    put(&b, o, "dependent_prefetch_stalls", jint(r->dependent_prefetch_stalls));
    if (b.failed) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *classification(struct jb *b, const struct plena_profile *p)
{
    const struct plena_labels *l = p->labels;
    json_t *o = new_obj(b);
    if (!o) return NULL;
    int markers = l && l->mode == PLENA_ATTR_MARKERS;
    size_t label_count = l ? l->n : 0, unclassified = 0;
    for (size_t i = 0; i < label_count; i++)
        if (l->v[i].stage == PLENA_STAGE_OTHER) unclassified++;
    double frac = label_count ? (double)unclassified / (double)label_count : 0.0;
    int present = l ? l->routed_moe_markers_present != 0 : 0;
    put(b, o, "stage_attribution", json_string(markers ? "markers" : "legacy"));
    put(b, o, "stage_marker_count", jint(l ? l->stage_marker_count : 0));
    json_t *arr = json_array();
    if (!arr) b->failed = 1;
    for (size_t i = 0; arr && l && i < l->n_unresolved; i++) {
        json_t *u = new_obj(b);
        if (!u) break;
        put(b, u, "name", json_string(l->unresolved[i].name));
        put(b, u, "first_line", jint(l->unresolved[i].first_line));
        put(b, u, "occurrences", jint(l->unresolved[i].occurrences));
        if (json_array_append_new(arr, u) != 0) b->failed = 1;
    }
    put(b, o, "unresolved_stage_markers", arr);
    put(b, o, "label_count", jint(label_count));
    put(b, o, "unclassified_labels", jint(unclassified));
    put(b, o, "unclassified_fraction", json_real(frac));
    put(b, o, "routed_moe_markers_present", json_boolean(present));
    /* markers mode: the substring rules never ran, so there is nothing to drift */
    put(b, o, "vocabulary_drift_warning",
        markers ? json_null() : json_boolean(present && frac > 0.5));
    json_t *notes = new_obj(b);
    if (notes) {
        put(b, notes, "shared_vs_routed",
            json_string(plena_profile_shared_vs_routed_text(plena_profile_lowering(p))));
        put(b, notes, "routed_lowering", json_string(plena_profile_routed_lowering(p)));
    }
    put(b, o, "attribution_notes", notes);
    return o;
}

/* The profile JSON object of p and run into *out (the caller decrefs). */
static int profile_json(const struct plena_profile *p, const struct plena_profile_run *run,
                        json_t **out, struct plena_err *err)
{
    if (p->pending)
        return PLENA_FAIL(err, PLENA_E_INTERNAL, "profile",
                          "%llu instructions not folded into the figures "
                          "(plena_profile_flush was not called)",
                          (unsigned long long)p->pending);
    struct jb b = {0};
    uint64_t period = p->clock_period_ps;
    json_t *o = json_object();
    if (!o) return PLENA_FAIL(err, PLENA_E_NOMEM, "profile", "out of memory");
    uint64_t sim_cycles = ceil_div(run->total_simulation_picos, period);
    uint64_t prof_cycles = ceil_div(p->total.picos, period);
    put(&b, o, "schema_version", json_integer(4));
    put(&b, o, "run_status", json_string(run->trap ? "trapped" : "completed"));
    put(&b, o, "trap", run->trap ? trap_obj(&b, run->trap) : json_null());
    put(&b, o, "label_count", jint(p->labels ? p->labels->n : 0));
    put(&b, o, "program_instruction_count", jint(p->n_pc));
    put(&b, o, "total_instructions_executed", jint(run->instructions_executed));
    put(&b, o, "clock_period_ps", jint(period));
    put(&b, o, "total_simulation_picos", jint(run->total_simulation_picos));
    put(&b, o, "total_simulation_cycles", jint(sim_cycles));
    put(&b, o, "total_profiled_picos", jint(p->total.picos));
    put(&b, o, "total_profiled_cycles", jint(prof_cycles));
    put(&b, o, "total_unprofiled_cycles",
        jint(sim_cycles > prof_cycles ? sim_cycles - prof_cycles : 0));
    put(&b, o, "cycle_accounting_status",
        json_string(sim_cycles == prof_cycles ? "profiled_cycles_match_total"
                                              : "profiled_cycles_do_not_match_total"));
    put(&b, o, "total_profiled_seconds", json_real((double)p->total.picos / 1e12));
    put(&b, o, "total_hbm_bytes_read", jint(p->total.bytes_read));
    put(&b, o, "total_hbm_bytes_written", jint(p->total.bytes_written));
    put(&b, o, "total_resource_proxy_picos", resource_obj(&b, p->total.res_picos, 0));
    put(&b, o, "total_resource_proxy_cycles", resource_obj(&b, p->total.res_picos, period));
    put(&b, o, "logical_byte_status", json_string(plena_profile_text_logical));
    put(&b, o, "physical_byte_status", json_string(plena_profile_text_physical));
    put(&b, o, "resource_cycle_status", json_string(plena_profile_text_resource));
    put(&b, o, "classification", classification(&b, p));
    if (run->overlap) {
        json_t *ov = plena_profile_overlap_json(run->overlap);
        if (!ov) b.failed = 1;
        put(&b, o, "overlap", ov);
    } else {
        put(&b, o, "overlap", json_null());
    }
    json_t *stages = new_obj(&b);
    for (unsigned s = 0; stages && s < PLENA_STAGE_COUNT; s++)
        put(&b, stages, plena_stage_name((enum plena_stage)s), entry(&b, p, &p->stage[s], 0, NULL));
    put(&b, o, "stages", stages);
    json_t *pairs = new_obj(&b);
    for (size_t i = 0; pairs && i < p->n_pairs; i++) {
        if (p->pairs[i].total.instructions == 0) continue;
        char key[16];
        snprintf(key, sizeof key, "%u", (unsigned)p->pairs[i].id);
        put(&b, pairs, key, entry(&b, p, &p->pairs[i].total, 1, &p->pairs[i]));
    }
    put(&b, o, "pairs", pairs);
    if (run->routing && run->routing->valid)
        put(&b, o, "routing_stats", plena_routing_stats_json(run->routing));
    put(&b, o, "caveat", json_string(plena_profile_text_caveat));
    if (b.failed) {
        json_decref(o);
        return PLENA_FAIL(err, PLENA_E_NOMEM, "profile", "out of memory building the profile JSON");
    }
    *out = o;
    return 0;
}

int plena_profile_render(const struct plena_profile *p, const struct plena_profile_run *run,
                         char **text, size_t *len, struct plena_err *err)
{
    json_t *o = NULL;
    int rc = profile_json(p, run, &o, err);
    if (rc) return rc;
    rc = plena_json_render(o, PLENA_JSON_PROFILE_FORM, text, len, err);
    json_decref(o);
    return rc;
}

int plena_profile_write(const struct plena_profile *p, const struct plena_profile_run *run,
                        const char *path, struct plena_err *err)
{
    json_t *o = NULL;
    int rc = profile_json(p, run, &o, err);
    if (rc) return rc;
    rc = plena_json_write_file(o, PLENA_JSON_PROFILE_FORM, path, err);
    json_decref(o);
    return rc;
}

/* The run session (docs/timing.md, docs/machine.md "After a trap"): loads
 * settings, program, labels and inputs; runs the emulator with the timing
 * model, the optional overlap overlay and the stage profiler observing each
 * executed instruction; writes dumps, the profile and run-stats v2. It never
 * prints and never chooses how to present results (src/cli/ does). */
#include "run/run.h"

#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/fileio.h"
#include "common/proc.h"
#include "isa/asm.h"
#include "isa/stages.h"
#include "profile/profile.h"
#include "profile/profile_json.h"

/* ---- formatting helpers (docs/timing.md "Summary lines") ---- */

void plena_run_format_ns(uint64_t ps, char *buf, size_t n)
{
    snprintf(buf, n, "%llu.%03lluns", (unsigned long long)(ps / 1000),
             (unsigned long long)(ps % 1000));
}

double plena_run_utilization(uint64_t rd, uint64_t wr, uint64_t ps)
{
    if (ps == 0) return 0.0;
    return (double)(rd + wr) / ((double)ps * 1e-12);
}

void plena_run_format_topology(const struct plena_settings *s, char *buf, size_t n)
{
    snprintf(buf, n, "Topology mlen=%u vlen=%u hlen=%u blen=%u broadcast_amount=%u\n", s->mlen,
             s->vlen, s->hlen, s->blen, s->broadcast_amount);
}

void plena_run_format_summary(const struct plena_run_outcome *o, char *buf, size_t n)
{
    char ns[64];
    size_t at = 0;
    buf[0] = 0;
#define APPEND(...)                                                                                \
    do {                                                                                           \
        if (at < n) {                                                                              \
            int w_ = snprintf(buf + at, n - at, __VA_ARGS__);                                      \
            if (w_ > 0) at += (size_t)w_;                                                          \
        }                                                                                          \
    } while (0)
    if (o->status == PLENA_RUN_OUT_ERROR) return;
    if (o->overlap_on) {
        const struct plena_overlap_report *r = &o->overlap;
        plena_run_format_ns(o->serial_picos, ns, sizeof ns);
        APPEND(
            "Experimental overlap: serial latency %s cycles %llu | adjusted cycles %llu | hidden "
            "prefetch cycles %llu | pending prefetch cycles %llu | prefetch ops %llu | compute "
            "ops %llu | dependent prefetch stalls %llu\n",
            ns, (unsigned long long)r->serial_cycles, (unsigned long long)r->adjusted_cycles,
            (unsigned long long)r->hidden_prefetch_cycles,
            (unsigned long long)r->pending_prefetch_cycles, (unsigned long long)r->prefetch_ops,
            (unsigned long long)r->compute_ops, (unsigned long long)r->dependent_prefetch_stalls);
    }
    if (o->status == PLENA_RUN_OUT_COMPLETED) {
        plena_run_format_ns(o->reported_picos, ns, sizeof ns);
        APPEND("Simulation completed. Latency %s cycles %llu\n", ns,
               (unsigned long long)o->reported_cycles);
    } else {
        plena_run_format_ns(o->serial_picos, ns, sizeof ns);
        APPEND("Simulation trapped at pc %u. Latency %s cycles %llu\n", (unsigned)o->trap.pc, ns,
               (unsigned long long)o->serial_cycles);
    }
    APPEND("HBM Statistics - Bytes read: %llu | Bytes written: %llu | Utilization: %.2e "
           "bytes/sec\n",
           (unsigned long long)o->bytes_read, (unsigned long long)o->bytes_written,
           plena_run_utilization(o->bytes_read, o->bytes_written, o->serial_picos));
#undef APPEND
}

int plena_run_parse_dump_list(const char *s, unsigned *mask)
{
    static const struct {
        const char *name;
        unsigned bit;
    } names[] = {{"vram", PLENA_DUMP_VRAM},
                 {"mram", PLENA_DUMP_MRAM},
                 {"fpsram", PLENA_DUMP_FPSRAM},
                 {"intsram", PLENA_DUMP_INTSRAM},
                 {"hbm", PLENA_DUMP_HBM},
                 {"all", PLENA_DUMP_DEFAULT | PLENA_DUMP_HBM},
                 {"none", 0}};
    unsigned m = 0;
    const char *p = s;
    if (!s || !*s) return -1;
    while (*p) {
        size_t len = strcspn(p, ",");
        size_t i;
        for (i = 0; i < sizeof names / sizeof names[0]; i++)
            if (strlen(names[i].name) == len && !strncmp(p, names[i].name, len)) break;
        if (i == sizeof names / sizeof names[0]) return -1;
        m |= names[i].bit;
        p += len;
        if (*p == ',') {
            p++;
            if (!*p) return -1;
        }
    }
    *mask = m;
    return 0;
}

/* ---- observer ---- */

struct observer {
    struct plena_timing *timing;
    struct plena_overlap *overlap;
    struct plena_profile *profile;
    struct plena_timeline *timeline; /* NULL without --timeline: no record is built */
    void (*progress)(void *ctx, uint64_t executed);
    void *progress_ctx;
    uint64_t executed;
    /* the instructions as steps (timing.h), handed over in batches to the
     * profile and to the timeline without the overlay; 4 KiB: a small part
     * of the first-level cache, which the emulator needs (512 steps measured
     * slower) */
    int steps_on; /* a profile, or a timeline without the overlay */
    int tl_steps; /* the timeline takes the steps (no overlay) */
    /* the timing's transaction totals at the last flush: unchanged, the
     * batch moved no data (plena_timeline_add_steps_no_txn) */
    uint64_t flushed_rd, flushed_wr;
    size_t n_steps;
    struct plena_timing_step steps[128];
};
#define STEP_BATCH (sizeof((struct observer *)0)->steps / sizeof(struct plena_timing_step))

static void steps_flush(struct observer *o)
{
    if (o->n_steps) {
        if (o->profile) plena_profile_add_steps(o->profile, o->steps, o->n_steps);
        if (o->tl_steps) {
            const uint64_t rd = plena_timing_bytes_read(o->timing);
            const uint64_t wr = plena_timing_bytes_written(o->timing);
            if (rd == o->flushed_rd && wr == o->flushed_wr)
                plena_timeline_add_steps_no_txn(o->timeline, o->steps, o->n_steps);
            else
                plena_timeline_add_steps(o->timeline, o->steps, o->n_steps);
            o->flushed_rd = rd;
            o->flushed_wr = wr;
        }
    }
    o->n_steps = 0;
}

/* The observer of a run whose consumers all take steps (a profile, a
 * timeline without the overlay): one call that accounts the instruction
 * and writes its step, the consumers' work in batches. Its own function, so
 * the run that takes steps pays for none of observe()'s other branches. */
static void observe_steps(void *ctx, const struct plena_emu_event *ev)
{
    struct observer *o = ctx;
    plena_timing_account_step(o->timing, ev, &o->steps[o->n_steps]);
    if (++o->n_steps == STEP_BATCH) steps_flush(o);
    if (o->progress && (++o->executed & 0xffff) == 0) o->progress(o->progress_ctx, o->executed);
}

static void observe(void *ctx, const struct plena_emu_event *ev)
{
    struct observer *o = ctx;
    uint64_t d;
    if (o->steps_on) {
        d = plena_timing_account_step(o->timing, ev, &o->steps[o->n_steps]);
        if (++o->n_steps == STEP_BATCH) steps_flush(o);
    } else {
        d = plena_timing_account(o->timing, ev);
    }
    if (o->overlap) plena_overlap_observe(o->overlap, ev, d);
    if (o->timeline && o->overlap) {
        struct plena_timing_record r;
        plena_timing_record_last(o->timing, ev, d, &r);
        plena_overlap_last(o->overlap, &r.hidden_ps, &r.pending_prefetches);
        plena_timeline_add(o->timeline, &r);
    }
    if (o->progress && (++o->executed & 0xffff) == 0) o->progress(o->progress_ctx, o->executed);
}

/* ---- run-stats v2 (docs/formats.md "Run-stats JSON") ---- */

struct session {
    const struct plena_run_opts *o;
    struct plena_run_outcome *out;
    char started[32], ended[32];
    double wall;
    const struct plena_program *prog;
    size_t asm_bytes, asm_lines;
    int has_asm;
    uint64_t hbm_preload_bytes;
    const struct plena_profile_trap *trap;
    struct plena_err run_err; /* the error behind status "error" */
    int profile_requested;
};

static void iso_now(char *buf, size_t n)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static json_t *str_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

static json_t *u64(uint64_t v)
{
    return json_integer((json_int_t)v);
}

static json_t *abs_path_json(const char *p, int dir_only)
{
    if (!p) return json_null();
    char buf[PATH_MAX];
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", p);
    if (dir_only) {
        char *slash = strrchr(tmp, '/');
        if (slash == tmp)
            tmp[1] = 0;
        else if (slash)
            *slash = 0;
        else
            snprintf(tmp, sizeof tmp, ".");
    }
    if (realpath(tmp, buf)) return json_string(buf);
    if (tmp[0] == '/') return json_string(tmp);
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) return json_string(tmp);
    char joined[2 * PATH_MAX + 2];
    snprintf(joined, sizeof joined, "%s/%s", cwd, tmp);
    return json_string(joined);
}

static void set(json_t *o, const char *k, json_t *v, int *failed)
{
    if (!v || json_object_set_new(o, k, v)) *failed = 1;
}

static json_t *trap_json(const struct plena_profile_trap *t, int *failed)
{
    json_t *o = json_object();
    if (!o) {
        *failed = 1;
        return NULL;
    }
    set(o, "pc", u64(t->pc), failed);
    set(o, "opcode", u64(t->opcode), failed);
    set(o, "mnemonic", json_string(t->mnemonic ? t->mnemonic : "?"), failed);
    set(o, "source_file", str_or_null(t->source_file), failed);
    set(o, "source_line", t->source_line ? u64(t->source_line) : json_null(), failed);
    set(o, "message", json_string(t->message ? t->message : ""), failed);
    return o;
}

static json_t *error_json(const struct plena_err *e, int *failed)
{
    json_t *o = json_object();
    if (!o) {
        *failed = 1;
        return NULL;
    }
    char msg[1200];
    plena_err_format(e, msg, sizeof msg);
    set(o, "message", json_string(msg), failed);
    /* key: a dotted settings key named in the message, if any */
    const char *k = strstr(msg, "TRANSACTIONAL.");
    if (k) {
        size_t n = strcspn(k, ": ,");
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)(n < 255 ? n : 255), k);
        set(o, "key", json_string(key), failed);
    } else {
        set(o, "key", json_null(), failed);
    }
    /* file[:line[:col]] from the error's user position */
    char file[256] = "";
    long line = 0;
    if (e->where[0]) {
        size_t n = strcspn(e->where, ":");
        snprintf(file, sizeof file, "%.*s", (int)(n < 255 ? n : 255), e->where);
        if (e->where[n] == ':') line = strtol(e->where + n + 1, NULL, 10);
    }
    set(o, "file", file[0] ? json_string(file) : json_null(), failed);
    set(o, "line", line > 0 ? json_integer(line) : json_null(), failed);
    return o;
}

static int write_stats(struct session *ss, struct plena_err *err)
{
    const struct plena_run_opts *o = ss->o;
    struct plena_run_outcome *out = ss->out;
    const struct plena_settings *s = out->settings_loaded ? &out->settings : NULL;
    int failed = 0;
    json_t *j = json_object();
    if (!j) return PLENA_FAIL(err, PLENA_E_NOMEM, o->stats_path, "out of memory");
    set(j, "schema_version", json_integer(2), &failed);
    set(j, "producer", json_string("plena"), &failed);
    set(j, "producer_version", json_string(PLENA_VERSION), &failed);
    set(j, "started_at_utc", json_string(ss->started), &failed);
    set(j, "ended_at_utc", json_string(ss->ended), &failed);
    set(j, "host_wall_time_seconds", json_real(ss->wall), &failed);
    const char *prog_file =
        o->program ? (o->program->source_path ? o->program->source_path : NULL) : o->program_path;
    set(j, "build_dir", abs_path_json(prog_file, 1), &failed);
    json_t *cmd = json_array();
    for (int i = 0; cmd && i < o->argc; i++)
        if (json_array_append_new(cmd, json_string(o->argv[i] ? o->argv[i] : ""))) failed = 1;
    set(j, "command", cmd, &failed);
    char cwd[PATH_MAX];
    set(j, "cwd", getcwd(cwd, sizeof cwd) ? json_string(cwd) : json_null(), &failed);
    set(j, "config_path", s && s->config_path[0] ? json_string(s->config_path) : json_null(),
        &failed);
    set(j, "run_label", str_or_null(o->label), &failed);
    if (s) {
        json_t *b = json_object();
        if (!b) failed = 1;
        if (b) {
            set(b, "BLEN", u64(s->blen), &failed);
            set(b, "HLEN", u64(s->hlen), &failed);
            set(b, "MLEN", u64(s->mlen), &failed);
            set(b, "VLEN", u64(s->vlen), &failed);
            set(b, "BROADCAST_AMOUNT", u64(s->broadcast_amount), &failed);
            set(b, "HBM_M_Prefetch_Amount", u64(s->hbm_m_prefetch_amount), &failed);
            set(b, "HBM_V_Prefetch_Amount", u64(s->hbm_v_prefetch_amount), &failed);
            set(b, "HBM_V_Writeback_Amount", u64(s->hbm_v_writeback_amount), &failed);
            set(b, "MATRIX_SRAM_SIZE", u64(s->matrix_sram_size), &failed);
            set(b, "VECTOR_SRAM_SIZE", u64(s->vector_sram_size), &failed);
            set(b, "HBM_SIZE", u64(out->hbm_size), &failed);
        }
        set(j, "behavior_config", b, &failed);
        json_t *t = json_object(), *lat = json_object(), *h = json_object();
        if (!t || !lat || !h) failed = 1;
        if (t && lat && h) {
            set(t, "CLOCK_PERIOD_PS", u64(s->clock_period_ps), &failed);
            set(t, "DC_EN", json_integer((json_int_t)s->dc_en), &failed);
            set(t, "latency_column", json_string(s->dc_en ? "dc_lib_en" : "dc_lib_dis"), &failed);
            for (unsigned k = 0; k < PLENA_LAT_COUNT; k++)
                set(lat, plena_latency_name((enum plena_latency)k), u64(s->latency[k]), &failed);
            set(t, "latencies", lat, &failed);
            /* one list of HBM keys: the settings module's, in its order */
            set(h, "MODEL", json_string(plena_settings_hbm_model_name(s->hbm.model)), &failed);
            const char *names[64];
            uint64_t values[64];
            size_t nh = plena_settings_hbm_params(s, names, values, 64);
            for (size_t k = 0; k < nh && k < 64; k++)
                set(h, names[k], u64(values[k]), &failed);
            set(t, "hbm", h, &failed);
        } else {
            json_decref(lat);
            json_decref(h);
        }
        set(j, "timing_config", t, &failed);
        set(j, "hbm_size_bytes", u64(out->hbm_size), &failed);
    } else {
        set(j, "behavior_config", json_null(), &failed);
        set(j, "timing_config", json_null(), &failed);
        set(j, "hbm_size_bytes", json_null(), &failed);
    }
    json_t *a = json_object();
    if (!a) failed = 1;
    if (a) {
        set(a, "asm_source_bytes", ss->has_asm ? u64(ss->asm_bytes) : json_null(), &failed);
        set(a, "asm_source_lines", ss->has_asm ? u64(ss->asm_lines) : json_null(), &failed);
        uint64_t mb = 0, ml = 0;
        if (ss->prog) {
            mb = ss->prog->machine_code_bytes;
            ml = ss->prog->machine_code_lines;
            if (mb == 0 && ml == 0) {
                /* assembled in-process: the size of its .mem rendering */
                mb = 11 * (uint64_t)ss->prog->n;
                ml = ss->prog->n;
            }
        }
        set(a, "machine_code_bytes", u64(mb), &failed);
        set(a, "machine_code_lines", u64(ml), &failed);
        set(a, "hbm_preload_bytes", u64(ss->hbm_preload_bytes), &failed);
    }
    set(j, "artifacts", a, &failed);
    set(j, "log_path", str_or_null(o->log_path), &failed);
    set(j, "stage_profile_requested", json_boolean(ss->profile_requested), &failed);
    set(j, "stage_profile_path", str_or_null(o->profile_path), &failed);
    struct stat st;
    int exists = o->profile_path && out->profile_written && stat(o->profile_path, &st) == 0;
    set(j, "stage_profile_exists", json_boolean(exists), &failed);
    set(j, "stage_profile_size_bytes", exists ? u64((uint64_t)st.st_size) : json_null(), &failed);
    set(j, "experimental_overlap_prefetch_compute", json_boolean(o->overlap != 0), &failed);
    set(j, "threads", u64(o->threads ? o->threads : 1), &failed);
    set(j, "instructions_executed", u64(out->instructions_executed), &failed);
    set(j, "sim_latency_picos", u64(out->reported_picos), &failed);
    set(j, "sim_latency_ns", json_real((double)out->reported_picos / 1000.0), &failed);
    set(j, "sim_latency_ms", json_real((double)out->reported_picos / 1e9), &failed);
    set(j, "sim_latency_cycles", u64(out->reported_cycles), &failed);
    set(j, "serial_latency_picos", u64(out->serial_picos), &failed);
    set(j, "serial_latency_cycles", u64(out->serial_cycles), &failed);
    set(j, "overlap", out->overlap_on ? plena_profile_overlap_json(&out->overlap) : json_null(),
        &failed);
    set(j, "emu_mlen", s ? u64(s->mlen) : json_null(), &failed);
    set(j, "emu_vlen", s ? u64(s->vlen) : json_null(), &failed);
    set(j, "emu_blen", s ? u64(s->blen) : json_null(), &failed);
    set(j, "hbm_bytes_read", u64(out->bytes_read), &failed);
    set(j, "hbm_bytes_written", u64(out->bytes_written), &failed);
    set(j, "hbm_utilization_bytes_per_sec",
        json_real(plena_run_utilization(out->bytes_read, out->bytes_written, out->serial_picos)),
        &failed);
    set(j, "return_code", json_integer(plena_status_exit_code(out->code)), &failed);
    set(j, "status",
        json_string(out->status == PLENA_RUN_OUT_COMPLETED ? "completed"
                    : out->status == PLENA_RUN_OUT_TRAPPED ? "trapped"
                                                           : "error"),
        &failed);
    set(j, "trap",
        out->status == PLENA_RUN_OUT_TRAPPED && ss->trap ? trap_json(ss->trap, &failed)
                                                         : json_null(),
        &failed);
    set(j, "error",
        out->status == PLENA_RUN_OUT_ERROR ? error_json(&ss->run_err, &failed) : json_null(),
        &failed);
    set(j, "stats_path", abs_path_json(o->stats_path, 0), &failed);
    int rc;
    if (failed)
        rc = PLENA_FAIL(err, PLENA_E_NOMEM, o->stats_path, "out of memory building run-stats");
    else
        rc = plena_json_write_file(j, PLENA_JSON_PROFILE_FORM, o->stats_path, err);
    json_decref(j);
    return rc;
}

/* ---- the session ---- */

/* PC -> 1-based line of each instruction line of an assembly text, using
 * the assembler's own line scanner (so it agrees with the label pass). */
static int pc_lines_from_asm(const char *text, size_t len, size_t n_pc, uint32_t **out,
                             struct plena_err *err)
{
    uint32_t *lines = plena_calloc(n_pc ? n_pc : 1, sizeof *lines);
    if (!lines) return PLENA_FAIL(err, PLENA_E_NOMEM, "run", "out of memory");
    size_t pos = 0, pc = 0;
    uint32_t no = 0;
    struct plena_asm_line ln;
    while (plena_asm_next_line(text, len, &pos, &no, &ln))
        if (ln.kind == PLENA_ASM_LINE_INSN) {
            if (pc < n_pc) lines[pc] = ln.no;
            pc++;
        }
    *out = lines;
    return 0;
}

/* Upstream's stage profiler with a label count that differs from the
 * program: a pc without a label is 'other' with no pair, extra labels are
 * never looked up (stage_profile.rs, labels.get(pc)). */
static int fit_labels(struct plena_labels *l, size_t n, struct plena_err *err)
{
    if (n > l->n) {
        struct plena_label *v = plena_realloc(l->v, n * sizeof *v);
        if (!v) return PLENA_FAIL(err, PLENA_E_NOMEM, "run", "out of memory for %zu labels", n);
        for (size_t i = l->n; i < n; i++)
            v[i] = (struct plena_label){PLENA_STAGE_OTHER, 0, 0};
        l->v = v;
    }
    l->n = n;
    return 0;
}

static size_t count_lines(const char *t, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += t[i] == '\n';
    if (len && t[len - 1] != '\n') n++;
    return n;
}

/* The dumps of a finished run, as one unit of work that may run on its own
 * thread (it only reads the machine state). */
struct dump_job {
    struct plena_emu *emu;
    const char *dir;
    unsigned mask;
    struct plena_err err;
    int rc;
};

static void *dump_thread(void *arg)
{
    struct dump_job *j = arg;
    j->rc = plena_mkdir_p(j->dir, &j->err);
    if (!j->rc) j->rc = plena_emu_write_dumps(j->emu, j->dir, j->mask, &j->err);
    return NULL;
}

int plena_run_execute(const struct plena_run_opts *o, struct plena_run_outcome *out,
                      struct plena_err *err)
{
    struct session ss;
    memset(&ss, 0, sizeof ss);
    memset(out, 0, sizeof *out);
    ss.o = o;
    ss.out = out;
    ss.profile_requested = o->profile_path != NULL;
    iso_now(ss.started, sizeof ss.started);
    double t0 = plena_proc_now();

    struct plena_program owned_prog;
    memset(&owned_prog, 0, sizeof owned_prog);
    int own_prog = 0;
    struct plena_program view; /* shallow copy carrying source lines from --asm */
    struct plena_labels asm_labels;
    memset(&asm_labels, 0, sizeof asm_labels);
    int own_labels = 0;
    uint32_t *asm_pc_lines = NULL;
    char *asm_text = NULL;
    size_t asm_len = 0;
    const struct plena_labels *labels = NULL;
    struct plena_emu *emu = NULL;
    struct plena_timing *timing = NULL;
    struct plena_overlap *overlap = NULL;
    struct plena_profile profile;
    int have_profile = 0;
    struct plena_timeline *timeline = NULL;
    struct plena_profile_trap ptrap;
    int rc = 0;
    struct plena_err *e = &ss.run_err;
    plena_err_clear(e);

    /* settings */
    if (o->settings) {
        out->settings = *o->settings;
    } else if ((rc = plena_settings_load(o->settings_path, &out->settings, e)) != 0) {
        goto fail;
    }
    if (o->hbm_model >= 0) out->settings.hbm.model = (enum plena_hbm_model_kind)o->hbm_model;
    if (o->hbm_size) {
        if (o->hbm_size % 64 || o->hbm_size > ((uint64_t)1 << 48)) {
            rc = PLENA_FAIL(e, PLENA_E_USAGE, "--hbm-size",
                            "expected a positive multiple of 64 up to 2^48, found %llu",
                            (unsigned long long)o->hbm_size);
            goto fail;
        }
        out->settings.hbm_size = o->hbm_size;
    }
    out->hbm_size = out->settings.hbm_size;
    out->settings_loaded = 1;

    /* program */
    if (o->program) {
        ss.prog = o->program;
    } else if (o->program_path) {
        if ((rc = plena_program_load(o->program_path, o->asm_warnings, &owned_prog, e)) != 0)
            goto fail;
        own_prog = 1;
        ss.prog = &owned_prog;
    } else {
        rc = PLENA_FAIL(e, PLENA_E_USAGE, "run", "no program given");
        goto fail;
    }
    out->program_instructions = ss.prog->n;
    if (ss.prog->asm_source_bytes || ss.prog->asm_source_lines) {
        ss.has_asm = 1;
        ss.asm_bytes = ss.prog->asm_source_bytes;
        ss.asm_lines = ss.prog->asm_source_lines;
    }

    /* labels: --asm for a .mem program, else the program's own */
    if (o->asm_path) {
        if ((rc = plena_file_read_all(o->asm_path, &asm_text, &asm_len, e)) != 0) goto fail;
        if ((rc = plena_labels_from_asm(asm_text, asm_len, o->asm_path, &asm_labels, e)) != 0)
            goto fail;
        own_labels = 1;
        out->asm_label_count = asm_labels.n;
        if (asm_labels.n != ss.prog->n && o->asm_count_mismatch_ok) {
            if ((rc = fit_labels(&asm_labels, ss.prog->n, e)) != 0) goto fail;
            out->asm_label_mismatch = 1;
        }
        if (asm_labels.n != ss.prog->n) {
            rc = PLENA_FAIL(e, PLENA_E_INPUT, o->asm_path,
                            "label count %zu (from the assembly) does not match the instruction "
                            "count %zu (of the program)",
                            asm_labels.n, ss.prog->n);
            goto fail;
        }
        labels = &asm_labels;
        ss.has_asm = 1;
        ss.asm_bytes = asm_len;
        ss.asm_lines = count_lines(asm_text, asm_len);
        if (!ss.prog->src_line) {
            if ((rc = pc_lines_from_asm(asm_text, asm_len, ss.prog->n, &asm_pc_lines, e)) != 0)
                goto fail;
            view = *ss.prog;
            view.src_line = asm_pc_lines;
            view.source_path = (char *)o->asm_path;
            ss.prog = &view;
        }
    } else if (ss.prog->has_labels) {
        labels = &ss.prog->labels;
    }
    if (o->profile_path && !labels) {
        rc = PLENA_FAIL(e, PLENA_E_USAGE, "--profile",
                        "a profile needs stage labels: give the assembly source with --asm");
        goto fail;
    }

    /* machine and inputs */
    if ((rc = plena_emu_new(&out->settings, out->hbm_size, &emu, e)) != 0) goto fail;
    plena_emu_set_limits(emu, o->max_instructions, o->max_seconds, o->stop);
    if (o->hbm_path) {
        struct stat st;
        if (stat(o->hbm_path, &st) == 0) ss.hbm_preload_bytes = (uint64_t)st.st_size;
        if ((rc = plena_emu_load_hbm_file(emu, o->hbm_path, e)) != 0) goto fail;
    }
    if (o->fpsram_path && (rc = plena_emu_load_fpsram_file(emu, o->fpsram_path, e)) != 0) goto fail;
    if (o->intsram_path && (rc = plena_emu_load_intsram_file(emu, o->intsram_path, e)) != 0)
        goto fail;
    if (o->vram_path && (rc = plena_emu_load_vram_file(emu, o->vram_path, e)) != 0) goto fail;

    /* observers */
    if ((rc = plena_timing_new(&out->settings, &timing, e)) != 0) goto fail;
    if (o->hbm_exhaustive) plena_hbm_set_exhaustive(plena_timing_hbm(timing), 1);
    if (o->hbm_memo_off) plena_hbm_set_memo(plena_timing_hbm(timing), 0);
    if (o->overlap && (rc = plena_overlap_new(&out->settings, &overlap, e)) != 0) goto fail;
    if (o->profile_path) {
        if ((rc = plena_profile_init(&profile, labels, ss.prog->n, out->settings.clock_period_ps,
                                     e)) != 0)
            goto fail;
        have_profile = 1;
    }
    if (o->timeline_path) {
        struct plena_timeline_opts to = {
            o->timeline_detail, 0, o->overlap != 0, out->settings.clock_period_ps, o->label, 0};
        if ((rc = plena_timeline_new(&to, labels, ss.prog->n, &timeline, e)) != 0) goto fail;
    }
    if (o->on_start) o->on_start(o->on_start_ctx, &out->settings);

    /* execute */
    struct observer obs = {.timing = timing,
                           .overlap = overlap,
                           .profile = have_profile ? &profile : NULL,
                           .timeline = timeline,
                           .progress = o->on_progress,
                           .progress_ctx = o->on_progress_ctx,
                           .steps_on = have_profile || (timeline && !overlap),
                           .tl_steps = timeline && !overlap};
    struct plena_emu_result res;
    memset(&res, 0, sizeof res);
    rc = plena_emu_run(emu, ss.prog, obs.steps_on && !overlap ? observe_steps : observe, &obs, &res,
                       e);
    steps_flush(&obs); /* the last steps, also of a trapped run */
    if (rc != 0) goto fail;
    if ((rc = plena_timing_status(timing, e)) != 0) goto fail;

    uint64_t period = out->settings.clock_period_ps;
    out->instructions_executed = res.instructions_executed;
    out->serial_picos = plena_timing_now_ps(timing);
    out->serial_cycles = plena_ps_to_cycles(out->serial_picos, period);
    out->reported_picos = out->serial_picos;
    out->reported_cycles = out->serial_cycles;
    out->bytes_read = plena_timing_bytes_read(timing);
    out->bytes_written = plena_timing_bytes_written(timing);
    if (overlap) {
        plena_overlap_report(overlap, out->serial_picos, period, &out->overlap);
        out->overlap_on = 1;
        out->reported_picos = out->overlap.adjusted_picos;
        out->reported_cycles = out->overlap.adjusted_cycles;
    }
    if (res.status == PLENA_RUN_TRAPPED) {
        out->status = PLENA_RUN_OUT_TRAPPED;
        out->code = res.trap.kind == PLENA_TRAP_INTERRUPTED ? PLENA_E_INTERRUPTED : PLENA_E_FAILED;
        out->trap = res.trap;
        plena_emu_format_trap(&res.trap, ss.prog, out->trap_message, sizeof out->trap_message);
        const struct plena_op_info *info = plena_isa_info(res.trap.opcode & 63);
        ptrap.pc = res.trap.pc;
        ptrap.opcode = res.trap.opcode;
        ptrap.mnemonic = info->name;
        int known = ss.prog->src_line && ss.prog->source_path && res.trap.pc < ss.prog->n &&
                    ss.prog->src_line[res.trap.pc];
        ptrap.source_file = known ? ss.prog->source_path : NULL;
        ptrap.source_line = known ? ss.prog->src_line[res.trap.pc] : 0;
        ptrap.message = out->trap_message;
        ss.trap = &ptrap;
    } else {
        out->status = PLENA_RUN_OUT_COMPLETED;
        out->code = PLENA_OK;
    }

    if (o->on_finish) o->on_finish(o->on_finish_ctx, emu, &res, ss.prog);

    /* outputs: each is attempted; the first failure is reported (exit 4).
     * With --threads >= 2 the dumps are written on a second thread while the
     * profile is rendered and written here: the same bytes, and the dumps'
     * error (their own record) still comes first. */
    int out_rc = 0;
    struct dump_job dj = {emu, o->dump_dir, o->dump_mask, {0}, 0};
    pthread_t dump_tid;
    int dump_threaded = 0;
    if (o->dump_dir && o->dump_mask) {
        if (o->threads >= 2 && have_profile)
            dump_threaded = pthread_create(&dump_tid, NULL, dump_thread, &dj) == 0;
        if (!dump_threaded) dump_thread(&dj);
    }
    struct plena_err perr = {0};
    if (have_profile) {
        plena_profile_flush(&profile);
        for (unsigned s = 0; s < PLENA_STAGE_COUNT; s++)
            out->stage_wall_picos[s] = profile.stage[s].picos;
        struct plena_profile_run pr = {ss.trap, res.instructions_executed, out->serial_picos,
                                       overlap ? &out->overlap : NULL, o->routing};
        char *text = NULL;
        size_t len = 0;
        int r = plena_profile_render(&profile, &pr, &text, &len, &perr);
        if (!r) r = plena_file_write_atomic(o->profile_path, text, len, &perr);
        if (!r) {
            out->profile_written = 1;
            out->profile_bytes = len;
        }
        plena_free(text);
        if (r) out_rc = r;
    }
    if (timeline) {
        struct plena_timeline_run tr = {res.status == PLENA_RUN_TRAPPED ? "trapped" : "completed",
                                        out->serial_picos,
                                        out->reported_picos,
                                        out->bytes_read,
                                        out->bytes_written,
                                        res.instructions_executed};
        struct plena_err terr = {0};
        int r = plena_timeline_write(timeline, &tr, o->timeline_path, &out->timeline_bytes, &terr);
        if (!r) out->timeline_written = 1;
        if (r && !out_rc) {
            out_rc = r;
            perr = terr;
        }
    }
    if (dump_threaded) pthread_join(dump_tid, NULL);
    if (dj.rc) {
        out_rc = dj.rc;
        if (err && !plena_err_is_set(err)) *err = dj.err;
    } else if (out_rc && err && !plena_err_is_set(err)) {
        *err = perr;
    }
    if (out_rc) out->code = (enum plena_status)out_rc;
    out->host_wall_seconds = plena_proc_now() - t0;
    ss.wall = out->host_wall_seconds;
    iso_now(ss.ended, sizeof ss.ended);
    if (o->stats_path) {
        int r = write_stats(&ss, err);
        if (r && !out_rc) {
            out_rc = r;
            out->code = (enum plena_status)r;
        }
    }
    rc = out_rc;
    goto done;

fail:
    out->status = PLENA_RUN_OUT_ERROR;
    out->code = (enum plena_status)rc;
    if (err && !plena_err_is_set(err)) *err = *e;
    out->host_wall_seconds = plena_proc_now() - t0;
    ss.wall = out->host_wall_seconds;
    iso_now(ss.ended, sizeof ss.ended);
    if (o->stats_path) write_stats(&ss, NULL); /* best effort: the input error stays primary */

done:
    if (timing) out->hbm_memo_hits = plena_hbm_memo_hits(plena_timing_hbm(timing));
    if (have_profile) plena_profile_free(&profile);
    plena_timeline_free(timeline);
    plena_overlap_free(overlap);
    plena_timing_free(timing);
    plena_emu_free(emu);
    if (own_labels) plena_labels_free(&asm_labels);
    plena_free(asm_pc_lines);
    plena_free(asm_text);
    if (own_prog) plena_program_free(&owned_prog);
    return rc;
}

/*
 * cmd_quantize.c - `winml quantize -m IN.onnx -o OUT.onnx -p fp16|int8|int8-dynamic|w8a16|int4 ...`:
 * precision conversion with the recipe's quant fields as flags; large models
 * are streamed tensor by tensor (mmap'd weights in, quantized bytes out).
 */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/error.h"
#include "core/file.h"
#include "onnx/dtype.h"
#include "onnx/onnx_model.h"
#include "onnx/onnx_out.h"
#include "opt/quant.h"
#include "opt/quant_calib.h"
#include "opt/quant_calib_run.h"

static void help(void) {
    printf("usage: winml quantize -m IN.onnx [-o OUT.onnx] -p fp16|int8|w8a8|w8a16|int16|int8-dynamic|int4 [-p fp16] [options]\n\n"
           "-p int4 -p fp16 (either order) composes the two as the reference does: int4 weights (MatMulNBits),\n"
           "then fp16 for the rest; any other pair of -p is refused (exit 2) naming both.\n"
           "Without -o the output is IN_quantized.onnx beside the input (the reference's default); an existing\n"
           "file there (or at -o) is replaced only when winml wrote it, or with --overwrite.\n"
           "  -p fp16          weights and compute in float16; float32 model inputs and outputs stay float32\n"
           "                   (the reference's fp16_keep_io_types default; --fp16-io makes them float16),\n"
           "                   --op-block-list A,B keeps those op types in float32\n"
           "  -p int8          static QDQ (the reference's int8; also w8a8, int8-static): uint8 activations\n"
           "                   from calibrated ranges, int8 weights\n"
           "  -p w8a16         QDQ with uint16 activations (NPUs)\n"
           "  -p int8-dynamic  ours: DynamicQuantizeLinear + MatMulInteger, int8 weights\n"
           "  -p int16         QDQ with uint16 activations and uint16 asymmetric weights per tensor (the\n"
           "                   reference's int16, also w16a16): closer to float than w8a16\n"
           "  -p int4          weight-only RTN blocks -> MatMulNBits (--block-size 32|64|128, --bits 4|8)\n"
           "options:\n"
           "  --block-size N   int4 block (power of two from 16 to 65536, default 32)\n"
           "  --symmetric / --asymmetric   weights (default: symmetric int8, asymmetric int4)\n"
           "  --per-channel    int8 weight scales per output channel\n"
           "  --reduce-range / --no-reduce-range   7-bit int8 weights ([-64, 64]); default: on where integer\n"
           "                   kernels multiply int8 weights with 8-bit activations (-p int8, int8-dynamic):\n"
           "                   onnxruntime's u8s8 kernels on x86 without VNNI sum pairs of products in int16,\n"
           "                   which full-range weights overflow (wrong results, e.g. perplexity 2.3e7 where\n"
           "                   fp32 gives 38); --no-reduce-range keeps 8 bits for runtimes known not to\n"
           "                   (winml's engine computes either exactly)\n"
           "  --weight-type int8|uint8 (static also uint16|int16), --activation-type uint8|int8|uint16|int16\n"
           "  --ranges FILE    static: activation ranges as JSON {\"value\": [min, max], ...}\n"
           "  --calib-data DIR static: collected activations (DIR/manifest.json: {\"value\": [\"file.f32\", ...]})\n"
           "  --method minmax|entropy|percentile  --percentile P  --samples N   calibration of --calib-data;\n"
           "                   static without --ranges or --calib-data: winml's engine runs the model on N\n"
           "                   seeded batches (default 10; token ids within the vocabulary, masks of ones,\n"
           "                   pixels in [0, 1)) and calibrates every quantized activation by the method\n"
           "  --op-types A,B   op types to quantize (default MatMul[,Gemm]; int4: Gather turns embedding\n"
           "                   tables into GatherBlockQuantized, sharing a tied Gemm's codes); --exclude NODE,...\n"
           "  --int8-nodes N,...  MatMuls and Gathers (node or weight names) kept at 8 bits in int4 mode (lm_head)\n"
           "  --int8-weights P,...  int4: weights whose name contains one of P kept at 8 bits (recipe\n"
           "                   quant.rtn_8bit_weights); --int8-layer-weights P,...: the same in llama.cpp Q4_K_M's\n"
           "                   \"more bits\" layers only (first and last eighth, every third between; the layer is\n"
           "                   the name's first all-digit part; recipe quant.rtn_8bit_layer_weights)\n"
           "  --accuracy-level N  MatMulNBits accuracy_level (0: omitted)\n"
           "  --half-scales    int4: float32 scales rounded to the nearest half (still exact float32; winml's\n"
           "                   engine streams them as 2 bytes); default: onnxruntime's quantizer's values\n"
           "  --scale-search   int4: each block's scale (and zero point) searched for the least weighted error\n"
           "                   (never more than RTN's; slower; recipe quant.rtn_scale_search)\n"
           "  --stream auto|on|off  compute quantized weights while writing (auto: weights over 100 MiB)\n"
           "  --overwrite      replace an OUT.onnx that another program wrote (one winml wrote is replaced)\n"
           "  -f json, --report FILE (JSON report), -q\n"
           "The model must be a valid ONNX file; weights over 1 KiB go to OUT.onnx.data when streaming or\n"
           "when the model is over 100 MiB (OUT.onnx.1.data while replacing an output that uses that name:\n"
           "the model and its data switch in one step).\n");
}

typedef struct list {
    const char *v[256];
    size_t n;
    char *buf;
} list;

/* Splits s on commas into l (s copied); -1 when more than 256 items or OOM. */
/* Splits "a,b" into l (which owns the copy). Returns 0; -1 past 256 names or out of memory; -2 on an empty name
   ("", "a,,b", "a,"); -3 when l was filled by an earlier flag (a repeat would drop those names silently). */
static int split(list *l, const char *s) {
    if (l->buf) return -3;
    l->n = 0;
    if (!(l->buf = strdup(s))) return -1;
    for (char *p = l->buf, *tok; (tok = strsep(&p, ","));) {
        if (!*tok) return -2;
        if (l->n == 256) return -1;
        l->v[l->n++] = tok;
    }
    return 0;
}

static int32_t dtype_arg(const char *s) {
    if (!strcmp(s, "int8")) return WM_DT_INT8;
    if (!strcmp(s, "uint8")) return WM_DT_UINT8;
    if (!strcmp(s, "uint16")) return WM_DT_UINT16;
    if (!strcmp(s, "int16")) return WM_DT_INT16;
    return 0;
}

static uint64_t model_bytes(const wm_onnx_model *m) {
    uint64_t n = m->file.size;
    for (size_t i = 0; i < m->n_ext; i++) n += m->ext[i].map.size;
    return n;
}

enum {
    O_BLOCK = 256, O_SYM, O_ASYM, O_PERCH, O_WTYPE, O_ATYPE, O_RANGES, O_CALIB, O_METHOD, O_PCT, O_SAMPLES,
    O_OPTYPES, O_EXCLUDE, O_INT8, O_ACC, O_STREAM, O_KEEPIO, O_FP16IO, O_BLOCKLIST, O_BITS, O_REPORT, O_REDUCE, O_NOREDUCE, O_W8, O_W8L, O_HALF, O_OVERWRITE, O_SEARCH
};

int wm_cmd_quantize(int argc, char **argv) {
    wm_cli c;
    wm_cli_init(&c, "winml quantize");
    static const struct option longs[] = {
        WM_CLI_COMMON_LONG,
        {"precision", required_argument, 0, 'p'},     {"block-size", required_argument, 0, O_BLOCK},
        {"symmetric", no_argument, 0, O_SYM},         {"asymmetric", no_argument, 0, O_ASYM},
        {"per-channel", no_argument, 0, O_PERCH},     {"weight-type", required_argument, 0, O_WTYPE},
        {"activation-type", required_argument, 0, O_ATYPE}, {"ranges", required_argument, 0, O_RANGES},
        {"calib-data", required_argument, 0, O_CALIB}, {"method", required_argument, 0, O_METHOD},
        {"percentile", required_argument, 0, O_PCT},  {"samples", required_argument, 0, O_SAMPLES},
        {"op-types", required_argument, 0, O_OPTYPES}, {"exclude", required_argument, 0, O_EXCLUDE},
        {"int8-nodes", required_argument, 0, O_INT8},
        {"int8-weights", required_argument, 0, O_W8}, {"int8-layer-weights", required_argument, 0, O_W8L}, {"accuracy-level", required_argument, 0, O_ACC},
        {"stream", required_argument, 0, O_STREAM},   {"keep-io-types", no_argument, 0, O_KEEPIO}, {"fp16-io", no_argument, 0, O_FP16IO},
        {"op-block-list", required_argument, 0, O_BLOCKLIST}, {"bits", required_argument, 0, O_BITS},
        {"report", required_argument, 0, O_REPORT},   {"reduce-range", no_argument, 0, O_REDUCE},
        {"no-reduce-range", no_argument, 0, O_NOREDUCE},
        {"half-scales", no_argument, 0, O_HALF},     {"scale-search", no_argument, 0, O_SEARCH},     {"overwrite", no_argument, 0, O_OVERWRITE},
        {0, 0, 0, 0}};
    const char *prec = NULL, *prec2 = NULL, *ranges_path = NULL, *calib_dir = NULL, *report = NULL, *stream = "auto";
    const char *method = "minmax";
    int sym = -1, perch = 0, keep_io = 1, bits = 4, samples = 0, reduce = -1;
    double pct = 99.999;
    int64_t block = 32, acc = 0;
    int half = 0, overwrite = 0, search = 0;
    int32_t wtype = 0, atype = 0; /* 0: the mode's default */
    list optypes = {{0}, 0, NULL}, exclude = {{0}, 0, NULL}, int8n = {{0}, 0, NULL}, blocklist = {{0}, 0, NULL};
    list w8 = {{0}, 0, NULL}, w8l = {{0}, 0, NULL};
    int have_blocklist = 0, rc = WM_EXIT_ERROR, opt, seen_pair[3] = {0, 0, 0};
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":" WM_CLI_COMMON_SHORT "p:", longs, NULL)) != -1) {
        switch (opt) {
        case 'h': help(); rc = WM_EXIT_OK; goto out;
        case 'p': /* -p twice: the reference composes a weight precision with fp16 ("-p int4 -p fp16") */
            if (!prec || !strcmp(prec, optarg)) prec = optarg;
            else if (!prec2 || !strcmp(prec2, optarg)) prec2 = optarg;
            else {
                wm_cli_usage_error(&c, "-p: at most two precisions (a weight precision and fp16), got '%s', '%s' and "
                                   "'%s'", prec, prec2, optarg);
                goto out;
            }
            break;
        case O_BLOCK: {
            long v;
            if (wm_cli_int_arg(&c, "--block-size", optarg, 16, WM_QUANT_MAX_BLOCK, &v)) goto out;
            if (v & (v - 1)) {
                wm_cli_usage_error(&c, "--block-size: '%s' is not a power of two from 16 to %d", optarg,
                                   WM_QUANT_MAX_BLOCK);
                goto out;
            }
            block = v;
            break;
        }
        case O_BITS: {
            long v;
            if (wm_cli_int_arg(&c, "--bits", optarg, 4, 8, &v)) goto out;
            if (v != 4 && v != 8) {
                wm_cli_usage_error(&c, "--bits: 4 or 8, not '%s'", optarg);
                goto out;
            }
            bits = (int)v;
            break;
        }
        case O_SYM: case O_ASYM: case O_REDUCE: case O_NOREDUCE: case O_KEEPIO: case O_FP16IO: {
            /* the pairs that say opposite things: the second one of a pair is refused, never silently the winner */
            int *var = opt == O_SYM || opt == O_ASYM ? &sym : opt == O_REDUCE || opt == O_NOREDUCE ? &reduce : &keep_io;
            int val = opt == O_SYM || opt == O_REDUCE || opt == O_KEEPIO;
            int *seen = var == &sym ? &seen_pair[0] : var == &reduce ? &seen_pair[1] : &seen_pair[2];
            if (*seen && *var != val) {
                static const char *const pair[3] = {"--symmetric and --asymmetric", "--reduce-range and --no-reduce-range",
                                                    "--keep-io-types and --fp16-io"};
                wm_cli_usage_error(&c, "%s contradict each other: give one", pair[seen - seen_pair]);
                goto out;
            }
            *seen = 1;
            *var = val;
            break;
        }
        case O_PERCH: perch = 1; break;
        case O_WTYPE:
        case O_ATYPE: {
            int32_t dt = dtype_arg(optarg);
            if (!dt) {
                wm_cli_usage_error(&c, "%s: unknown type '%s'", opt == O_WTYPE ? "--weight-type" : "--activation-type",
                                   optarg);
                goto out;
            }
            if (opt == O_WTYPE) wtype = dt;
            else atype = dt;
            break;
        }
        case O_RANGES: ranges_path = optarg; break;
        case O_CALIB: calib_dir = optarg; break;
        case O_METHOD:
            if (strcmp(optarg, "minmax") && strcmp(optarg, "entropy") && strcmp(optarg, "percentile")) {
                wm_cli_usage_error(&c, "--method: minmax, entropy or percentile, not '%s'", optarg);
                goto out;
            }
            method = optarg;
            break;
        case O_PCT:
            if (wm_cli_num_arg(&c, "--percentile", optarg, 0, 1, 100, &pct)) goto out;
            break;
        case O_SAMPLES: { /* each sample is a forward pass: bounded */
            long v;
            if (wm_cli_int_arg(&c, "--samples", optarg, 0, 10000, &v)) goto out;
            samples = (int)v;
            break;
        }
        case O_HALF: half = 1; break;
        case O_SEARCH: search = 1; break;
        case O_OVERWRITE: overwrite = 1; break;
        case O_ACC: {
            long v;
            if (wm_cli_int_arg(&c, "--accuracy-level", optarg, 0, 4, &v)) goto out;
            acc = v;
            break;
        }
        case O_STREAM:
            if (strcmp(optarg, "auto") && strcmp(optarg, "on") && strcmp(optarg, "off")) {
                wm_cli_usage_error(&c, "--stream: auto, on or off, not '%s'", optarg);
                goto out;
            }
            stream = optarg;
            break;
        case O_OPTYPES:
        case O_EXCLUDE:
        case O_INT8:
        case O_W8:
        case O_W8L:
        case O_BLOCKLIST: {
            list *l = opt == O_OPTYPES ? &optypes : opt == O_EXCLUDE ? &exclude : opt == O_INT8 ? &int8n
                      : opt == O_W8 ? &w8 : opt == O_W8L ? &w8l : &blocklist;
            if (opt == O_BLOCKLIST) have_blocklist = 1;
            int sr = split(l, optarg);
            if (sr) {
                const char *name = wm_cli_long_name(longs, opt);
                if (sr == -3)
                    wm_cli_usage_error(&c, "--%s given twice: list the names in one comma-separated value", name);
                else
                    wm_cli_usage_error(&c, "--%s: %s in '%s'", name, sr == -2 ? "an empty name" : "too many names",
                                       optarg);
                goto out;
            }
            break;
        }
        case O_REPORT: report = optarg; break;
        default:
            if ((rc = wm_cli_other_opt(&c, opt, optarg, argv))) goto out;
            rc = WM_EXIT_ERROR;
        }
    }
    if (optind < argc) {
        wm_cli_usage_error(&c, "unexpected argument '%s'", argv[optind]);
        goto out;
    }
    const char *out = c.out;
    c.out = report;
    wm_quant_mode mode = wm_quant_mode_parse(prec);
    if (!prec || !mode || mode == WM_QUANT_CARRY) { /* gguf carries a GGUF's blocks: winml build only */
        wm_cli_usage_error(&c, "-p: one of fp16, int8 (w8a8), w8a16, int16 (w16a16), int8-dynamic, int4 is required%s%s%s", prec ? " (got '" : "",
                           prec ? prec : "", prec ? "')" : "");
        goto out;
    }
    /* two -p: int4 weights (MatMulNBits) then fp16 for the rest; other pairs the quantizer cannot chain */
    int with_fp16 = 0;
    if (prec2) {
        wm_quant_mode m2 = wm_quant_mode_parse(prec2);
        if (mode == WM_QUANT_FP16 && m2 == WM_QUANT_INT4) {
            mode = WM_QUANT_INT4;
            const char *t = prec;
            prec = prec2, prec2 = t;
            m2 = WM_QUANT_FP16;
        }
        if (mode != WM_QUANT_INT4 || m2 != WM_QUANT_FP16) {
            wm_cli_usage_error(&c, "-p %s -p %s: these two precisions cannot be composed (int4 with fp16 can: int4 "
                               "weights, fp16 for the rest); give one", prec, prec2);
            goto out;
        }
        if (!strcmp(stream, "on")) {
            wm_cli_usage_error(&c, "--stream on: not with two precisions (-p %s -p %s)", prec, prec2);
            goto out;
        }
        with_fp16 = 1;
    }
    if (!c.model) {
        wm_cli_usage_error(&c, "-m IN.onnx is required");
        goto out;
    }
    char def_out[4096];
    if (!out) { /* the reference's default: IN_quantized.onnx beside the input */
        if (wm_cli_default_out(&c, c.model, "_quantized.onnx", def_out, sizeof def_out)) goto out;
        out = def_out;
    }
    if (wm_cli_report_check(&c, report, out)) goto out;
    int is_static = wm_quant_mode_static(mode);
    if (ranges_path && calib_dir) {
        wm_cli_usage_error(&c, "--ranges and --calib-data: give one source of activation ranges");
        goto out;
    }
    wm_quant_config cfg;
    wm_quant_config_default(&cfg, mode);
    if (sym >= 0) cfg.symmetric = sym;
    cfg.per_channel = perch;
    cfg.reduce_range = reduce;
    cfg.keep_io_types = keep_io;
    cfg.bits = bits;
    cfg.block_size = block;
    cfg.accuracy_level = acc;
    cfg.half_scales = half;
    cfg.scale_search = search;
    if (wtype) cfg.weight_type = wtype;
    if (atype) cfg.activation_type = atype;
    cfg.op_types = optypes.v;
    cfg.n_op_types = optypes.n;
    {
        wm_error oe = {0}; /* before the model is read: a name the mode never quantizes would write a no-op */
        if (wm_quant_check_op_types(mode, cfg.op_types, cfg.n_op_types, "--op-types", &oe)) {
            rc = wm_cli_fail(&c, &oe);
            goto out;
        }
    }
    cfg.exclude = exclude.v;
    cfg.n_exclude = exclude.n;
    cfg.int8_nodes = int8n.v;
    cfg.n_int8_nodes = int8n.n;
    cfg.int8_weights = w8.v;
    cfg.n_int8_weights = w8.n;
    cfg.int8_layer_weights = w8l.v;
    cfg.n_int8_layer_weights = w8l.n;
    cfg.op_block = blocklist.v;
    cfg.n_op_block = blocklist.n;
    cfg.op_block_given = have_blocklist;

    wm_error err = {0};
    wm_onnx_model *m = NULL;
    wm_graph *g = NULL;
    wm_quant_plan *plan = NULL;
    wm_calib_ranges rg = {0};
    wm_quant_report rep;
    memset(&rep, 0, sizeof rep);
    wm_lockfile lock = WM_LOCKFILE_INIT;
    if (ranges_path && wm_calib_ranges_load(ranges_path, &rg, &err)) goto fail;
    if (calib_dir && wm_calib_from_dir(calib_dir, method, pct, samples, &rg, &err)) goto fail;
    cfg.ranges = rg.v;
    cfg.n_ranges = rg.n;
    if (wm_onnx_load(c.model, &m, &err) || wm_graph_open(m, m->proto->graph, &g, &err)) goto fail;
    size_t unpacked = 0; /* before calibration: the unpacked QKV projections' input is then calibrated */
    if (wm_quant_unpack_attention(g, &cfg, &unpacked, &err)) goto fail;
    size_t calibrated = 0; /* static without given ranges: our engine calibrates (the path winml build takes) */
    if (is_static && !ranges_path && !calib_dir) {
        wm_calib_run_opts co;
        memset(&co, 0, sizeof co);
        wm_calib_opts_default(&co.calib, (wm_calib_method)wm_calib_method_parse(method));
        if (co.calib.method == WM_CALIB_PERCENTILE) co.calib.percentile = pct;
        co.samples = samples > 0 ? samples : 10;
        co.seed = 1;
        if (wm_calib_collect(c.model, g, &cfg, &co, &rg, &err)) goto fail;
        cfg.ranges = rg.v;
        cfg.n_ranges = rg.n;
        calibrated = rg.n;
    }
    if (wm_onnx_out_begin(out, m, overwrite, model_bytes(m), &lock, &err)) goto fail;
    int streamed = !with_fp16 && (!strcmp(stream, "on") || (!strcmp(stream, "auto") && model_bytes(m) > (100ull << 20)));
    if (wm_quant_run(g, &cfg, &rep, streamed ? &plan : NULL, &err)) goto fail;
    rep.attention_unpacked += unpacked;
    if (with_fp16) { /* the second pass: fp16 over what int4 left in float (its fp16 options apply) */
        wm_quant_config c16;
        wm_quant_config_default(&c16, WM_QUANT_FP16);
        c16.keep_io_types = keep_io;
        c16.op_block = blocklist.v;
        c16.n_op_block = blocklist.n;
        c16.op_block_given = have_blocklist;
        c16.exclude = exclude.v;
        c16.n_exclude = exclude.n;
        wm_quant_report r16;
        memset(&r16, 0, sizeof r16);
        wm_status s16 = wm_quant_run(g, &c16, &r16, NULL, &err);
        rep.nodes_after = r16.nodes_after;
        rep.quantized += r16.quantized;
        rep.casts += r16.casts;
        rep.weight_bytes_after = r16.weight_bytes_after;
        wm_quant_report_free(&r16);
        if (s16) goto fail;
    }
    char prec_name[64];
    snprintf(prec_name, sizeof prec_name, "%s%s", wm_quant_mode_name(mode), with_fp16 ? "+fp16" : "");
    if (wm_graph_check(g, &err)) {
        err.status = WM_ERR_INTERNAL;
        goto fail;
    }
    if (wm_onnx_set_producer(m, &err)) goto fail;
    if (streamed ? wm_quant_save(g, plan, out, NULL, &err) : wm_onnx_save(m, out, NULL, &err)) goto fail;
    wm_json j;
    wm_json_init(&j);
    wm_json_obj(&j, NULL);
    wm_json_str(&j, "model", c.model);
    wm_json_str(&j, "output", out);
    wm_json_str(&j, "precision", prec_name);
    wm_json_bool(&j, "streamed", streamed);
    if (calibrated) { /* what calibrated the activations */
        wm_json_obj(&j, "calibration");
        wm_json_str(&j, "method", method);
        wm_json_int(&j, "samples", samples > 0 ? samples : 10);
        wm_json_str(&j, "data", "seeded");
        wm_json_uint(&j, "values", calibrated);
        wm_json_obj_end(&j);
    }
    wm_json_obj(&j, "report");
    wm_json_uint(&j, "nodes_before", rep.nodes_before);
    wm_json_uint(&j, "nodes_after", rep.nodes_after);
    wm_json_uint(&j, "quantized", rep.quantized);
    wm_json_uint(&j, "attention_unpacked", rep.attention_unpacked);
    wm_json_uint(&j, "skipped", rep.skipped);
    wm_json_uint(&j, "casts", rep.casts);
    wm_json_uint(&j, "weight_bytes_before", rep.weight_bytes_before);
    wm_json_uint(&j, "weight_bytes_after", rep.weight_bytes_after);
    wm_json_uint(&j, "peak_rss_bytes", wm_peak_rss_bytes());
    wm_json_arr(&j, "tables"); /* embedding tables: the block each got (null: kept float32) */
    for (size_t i = 0; i < rep.n_tables; i++) {
        const wm_quant_table_note *t = &rep.tables[i];
        wm_json_obj(&j, NULL);
        wm_json_str(&j, "tensor", t->tensor);
        wm_json_str(&j, "op", t->op);
        wm_json_int(&j, "width", t->width);
        if (t->block) wm_json_int(&j, "block", t->block);
        else wm_json_null(&j, "block");
        wm_json_obj_end(&j);
        if (c.quiet) continue;
        if (!t->block)
            fprintf(stderr, "%s: note: '%s' (width %lld) stays float32: no block of 16 to %lld divides its width\n",
                    c.prog, t->tensor, (long long)t->width, (long long)cfg.block_size);
        else if (t->block != cfg.block_size)
            fprintf(stderr, "%s: note: '%s' (%s, width %lld) uses block %lld: %lld does not divide its width\n", c.prog,
                    t->tensor, t->op, (long long)t->width, (long long)t->block, (long long)cfg.block_size);
    }
    wm_json_arr_end(&j);
    wm_json_obj_end(&j);
    wm_json_obj_end(&j);
    if (c.json) rc = wm_cli_emit(&c, NULL, &j);
    else {
        rc = wm_cli_opt_write_json(&c, &j);
        if (rc == WM_EXIT_OK && !c.quiet)
            printf("%s -> %s (%s%s): %zu nodes quantized, %zu skipped, %zu casts; nodes %zu -> %zu; weights %.1f -> "
                   "%.1f MiB; peak RSS %.1f MiB\n",
                   c.model, out, prec_name, streamed ? ", streamed" : "", rep.quantized, rep.skipped,
                   rep.casts, rep.nodes_before, rep.nodes_after, rep.weight_bytes_before / 1048576.0,
                   rep.weight_bytes_after / 1048576.0, wm_peak_rss_bytes() / 1048576.0);
    }
    wm_json_free(&j);
    goto done;
fail:
    rc = wm_cli_fail(&c, &err);
done:
    wm_unlock_output(&lock);
    wm_quant_report_free(&rep);
    wm_calib_ranges_free(&rg);
    wm_quant_plan_free(plan);
    wm_graph_free(g);
    wm_onnx_free(m);
out:
    free(optypes.buf);
    free(exclude.buf);
    free(int8n.buf);
    free(w8.buf);
    free(w8l.buf);
    free(blocklist.buf);
    return rc;
}

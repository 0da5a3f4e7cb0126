/*
 * cmd_build.c - `winml build` (export -> optim -> quant -> compile, one
 * folder) and `winml export` (the export stage alone), for checkpoints.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "builder/arch.h"
#include "builder/build.h"
#include "builder/recipe.h"
#include "cli/analyze_view.h"
#include "cli/cli.h"
#include "core/sysmem.h"
#include "core/file.h"

static void help(int export_only) {
    if (export_only)
        printf("usage: winml export -m CHECKPOINT|MODEL.gguf -o DIR|FILE.onnx [-c RECIPE] [-t TASK] [--rebuild] [--sync]\n"
               "                    [--random-weights [--seed N]] [--external-threshold BYTES] [-f json] [-q]\n\n"
               "The export stage alone: builds DIR/model.onnx (+ model.onnx.data when the model is\n"
               ">= 100 MiB or --external-threshold) and build_manifest.json straight from the safetensors\n"
               "weights: a plain float32 standard-ONNX graph (opset 17 unless the recipe says otherwise),\n"
               "no fusions. --random-weights builds the architecture from config.json alone with seeded\n"
               "random values. An existing DIR is replaced only as by build --rebuild. CHECKPOINT may be a\n"
               "GGUF as for build.\n"
               "-o NAME.onnx (a path ending .onnx) writes that model file instead, with NAME.onnx.data beside it when\n"
               "external, and no manifest; an existing NAME.onnx (or NAME.onnx.data) is replaced only with --overwrite.\n"
               "--output-dir DIR is -o DIR and --overwrite is --rebuild, as the reference names them. --ep auto|cpu\n"
               "and -d/--device auto|cpu are taken as the reference's (this build exports for cpu; another EP or\n"
               "device exits 2 naming it).\n");
    else
        printf("usage: winml build -m CHECKPOINT|MODEL.gguf -o|--output-dir DIR [-c RECIPE] [-t TASK]\n"
               "                   [-p auto|fp32|fp16|int8|w8a8|w8a16|int16|int4|int8-rtn|int8-dynamic|gguf] [--ep EP] [-d auto|cpu|gpu|npu] [--no-compile] [--rebuild|--overwrite] [--sync]\n"
               "                   [--random-weights [--seed N]] [--external-threshold BYTES] [--analyze] [-f json] [-q]\n\n"
               WM_CLI_BUILD_TARGET_HELP
               "--analyze: the built model is analyzed for the target EP/device (--ep/--device, else the recipe's\n"
               "compile target, else cpu) as winml analyze does, into DIR/analyze_result.json, and the manifest gets\n"
               "the reference's analyze_* keys (docs/json/build_manifest.md).\n"
               "Writes DIR/model.onnx (+ model.onnx.data from 100 MiB or --external-threshold),\n"
               "winml_build_config.json (the resolved recipe), build_manifest.json (stages, times, node\n"
               "and op counts, parameter bytes, sha256 of every artifact), the tokenizer files, and for\n"
               "decoders genai_config.json\n"
               "(onnxruntime-genai). The folder appears only when complete; missing folders above DIR are\n"
               "created. An existing DIR that a winml build wrote from the same recipe and inputs (its manifest's\n"
               "cache_key: the recipe, the checkpoint's file names, sizes and times, the seed, winml's version) is\n"
               "reused as it is, the manifest printed with \"reused\": true, as the reference's build cache does; any\n"
               "other DIR is replaced only with --rebuild (or --overwrite, the reference's name) and only when it is\n"
               "a winml build as written (its build_manifest.json lists every file in it); -o may not be or hold the\n"
               "input.\n"
               "RECIPE may be one of the reference system's (winml config -c RECIPE says what is kept and\n"
               "whether it builds); a model_type or task the builder does not serve is refused before any\n"
               "work, naming the field; with its quant section null, -p adds ours.\n"
               "-p (the reference's meanings): auto (the default) takes the recipe's quant section, else the\n"
               "target device's (above; fp32 on cpu, gguf for a GGUF); int8 (= w8a8)\n"
               "is static QDQ: uint8 asymmetric weights per tensor, uint8 activations whose ranges our engine\n"
               "calibrates on quant.samples (default 10) seeded batches in the export inputs' value_range with\n"
               "quant.calibration_method (minmax, entropy, percentile; default minmax), since the recipe's\n"
               "datasets are not reachable here (the manifest's quant stage \"calibration\" says what\n"
               "calibrated); w8a16 the same with uint16 activations (the reference's NPU recipes); int16\n"
               "(w16a16) with uint16 activations and uint16 asymmetric weights. Ours under their own names:\n"
               "int8-rtn (8-bit weights in blocks, float activations: what -p int8 built before) and\n"
               "int8-dynamic (DynamicQuantizeLinear + MatMulInteger).\n"
               "Stages: export (from the weights), optim (fusions at level extended;\n"
               "decoders not built in fp16 at level all: GroupQueryAttention (a sliding window as its\n"
               "local_window_size, soft-capped scores as its softcap), whose KV cache is appended in place,\n"
               "for unpadded or right-padded batches as in\n"
               "onnxruntime-genai; recipe \"gqa\": false keeps the graph's own mask for left padding),\n"
               "quant (-p fp16: weights and compute in half; int8-rtn: int8 weights in blocks of 32\n"
               "(MatMulNBits bits 8, float activations; embedding tables as GatherBlockQuantized); int4:\n"
               "MatMulNBits, recipe quant.rtn_block_size (default 32), symmetric (default false: zero\n"
               "points, uint8: onnxruntime's fast path), rtn_float_zero_points (default false; true: a float\n"
               "offset per 4-bit block, each block's scale and offset fitted by a weighted least-squares\n"
               "search, float activations for them; onnxruntime runs them ~10x slower)\n"
               "and rtn_accuracy_level (default 4: int8 activations); a table of weights kept at 8\n"
               "bits as llama.cpp's Q4_K_M does: rtn_8bit_weights (default the token tables, lm_head and\n"
               "learned position tables)\n"
               "everywhere, rtn_8bit_layer_weights (default attn v_proj, mlp down_proj) in Q4_K_M's \"more\n"
               "bits\" layers; the token embedding as GatherBlockQuantized with the largest block\n"
               "that divides its width, or float32 when none does, said on stderr and in the manifest's\n"
               "quant stage \"tables\"; recipe quant.rtn_scale_search: true searches each block's scale for\n"
               "the least weighted error, never above RTN's; quant.rtn_gptq: true quantizes with GPTQ, from\n"
               "X^T X of each MatMul input over our engine's run of quant.calibration_text (a text file, the\n"
               "checkpoint's tokenizer; quant.samples sequences of 512 tokens, default 4) or of seeded random\n"
               "tokens; quant.rtn_gptq_damp: the damping, default 0.01; quant.rtn_gptq_act_order: true takes\n"
               "the rows by decreasing X^T X diagonal, each block's scale fixed first; quant.rtn_gptq_tied_head:\n"
               "true quantizes a tied lm_head by GPTQ too, the token table sharing its codes);\n"
               "quant.rtn_importance:\n"
               "true weights each block's search by its input columns' mean\n"
               "x^2 over the same run (llama.cpp's imatrix idea; with rtn_gptq too, the search picks each\n"
               "block's scale and zero point and GPTQ the codes), and quant.rtn_8bit_percent: P then keeps at\n"
               "8 bits the matrices whose 4-bit copy has the largest relative output error per weight on that\n"
               "run, up to P%% of the 4-bit matrices' weights (the manifest's \"sensitive_8bit\");\n"
               "quant.rtn_8bit_block_size and\n"
               "quant.rtn_table_block_size: the block of the 8-bit weights (one K it does not divide: the\n"
               "largest power of two that does) and of the token table), compile (reported as not run: the CPU engine needs no EP compile\n"
               "step). sentence-transformers' files (modules.json, sentence_bert_config.json, the Pooling\n"
               "module's folder) travel with the model for winml run.\n"
               "Files are written under temporary names and renamed when complete (atomic for readers and\n"
               "against a failed run); --sync also fsyncs each one first, so the folder survives a power\n"
               "loss, at the cost of waiting for the disk.\n"
               "CHECKPOINT may also be a GGUF (a .gguf file, a split set NAME-00001-of-0000N.gguf, or a folder\n"
               "holding one): its metadata becomes config.json, tokenizer.json, tokenizer_config.json (chat\n"
               "template) and generation_config.json in DIR, and its tensors (F32, F16, BF16, Q8_0, Q4_0, Q4_1,\n"
               "Q5_0, Q5_1, Q4_K, Q5_K, Q6_K) are dequantized into the float32 export (architectures llama,\n"
               "qwen2, qwen3, phi3, gemma3; winml inspect -m FILE.gguf shows the mapping). A GGUF builds by\n"
               "default at -p gguf: the quant stage carries its quantized blocks into MatMulNBits (and the\n"
               "token embedding into GatherBlockQuantized) without requantizing, so the model computes the\n"
               "GGUF's weights: Q4_0 / Q4_1 / Q4_K as 4-bit block 32 (Q4_1 / Q4_K with float zero points),\n"
               "Q8_0 / Q5_0 as 8-bit block 32, Q6_K as 8-bit block 16; Q5_1 / Q5_K are requantized to 8 bits\n"
               "(onnxruntime's CPU MatMulNBits takes no float zero points at 8 bits), a table with float zero\n"
               "points stays a float32 Gather, and float tensors stay float32; the manifest's quant stage\n"
               "\"carried\" lists each tensor's GGUF type and what it became. -p fp32|fp16 dequantize;\n"
               "-p int4, int8 and the other 8-bit modes requantize from the dequantized floats.\n");
}

static int run(int argc, char **argv, int export_only) {
    wm_cli c;
    wm_cli_init(&c, export_only ? "winml export" : "winml build");
    enum { O_EP = 1000, O_DEVICE, O_NO_COMPILE, O_REBUILD, O_RANDOM, O_SEED, O_SYNC, O_EXT, O_ANALYZE };
    static const struct option longs[] = {WM_CLI_COMMON_LONG,
                                          {"config", required_argument, 0, 'c'},
                                          {"recipe", required_argument, 0, 'c'},
                                          {"task", required_argument, 0, 't'},
                                          {"precision", required_argument, 0, 'p'},
                                          {"ep", required_argument, 0, O_EP},
                                          {"device", required_argument, 0, O_DEVICE},
                                          {"no-compile", no_argument, 0, O_NO_COMPILE},
                                          {"rebuild", no_argument, 0, O_REBUILD},
                                          {"overwrite", no_argument, 0, O_REBUILD}, /* the reference's name */
                                          {"output-dir", required_argument, 0, 'o'}, /* the reference's name of -o */
                                          {"random-weights", no_argument, 0, O_RANDOM},
                                          {"seed", required_argument, 0, O_SEED},
                                          {"sync", no_argument, 0, O_SYNC},
                                          {"external-threshold", required_argument, 0, O_EXT},
                                          {"analyze", no_argument, 0, O_ANALYZE},
                                          {0, 0, 0, 0}};
    wm_build_opts o;
    memset(&o, 0, sizeof o);
    o.task = o.precision = -1;
    o.export_only = export_only;
    int opt, seed_set = 0;
    char rules_dir[4096];
    const char *p_given = NULL; /* the -p seen first: a different second one is refused */
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":" WM_CLI_COMMON_SHORT "c:t:p:d:", longs, NULL)) != -1) {
        switch (opt) {
        case 'h': help(export_only); return WM_EXIT_OK;
        case 'c': o.recipe = optarg; break;
        case 't':
            if ((o.task = wm_task_from_name(optarg)) < 0) return wm_cli_usage_error(&c, "-t: unknown task '%s'", optarg);
            break;
        case 'p':
            if (wm_cli_precision_arg(&c, optarg, &p_given, &o.precision)) return WM_EXIT_ERROR;
            break;
        case O_EP:
            if (wm_cli_ep_arg(&c, optarg, export_only, &o.ep)) return WM_EXIT_ERROR;
            break;
        case 'd': case O_DEVICE: /* auto: the EP's default device (wm_cli_build_target) */
            o.device = NULL;
            if (strcasecmp(optarg, "auto") && wm_cli_device_arg(&c, optarg, export_only, &o.device))
                return WM_EXIT_ERROR;
            break;
        case O_NO_COMPILE: o.no_compile = 1; break;
        case O_REBUILD: o.rebuild = 1; break;
        case O_RANDOM: o.random = 1; break;
        case O_SYNC: wm_set_durable(1); break;
        case O_ANALYZE:
            if (export_only) return wm_cli_usage_error(&c, "--analyze applies to winml build");
            if (!wm_cli_rules_dir(rules_dir, sizeof rules_dir))
                return wm_cli_usage_error(&c, "--analyze: no EP rules folder found (set WM_DATA_DIR)");
            o.analyze_rules = rules_dir;
            break;
        case O_EXT:
            if (wm_parse_size(optarg, &o.external_threshold))
                return wm_cli_usage_error(&c, "--external-threshold: '%s' is not a size in bytes (e.g. 1048576 or 1M)",
                                          optarg);
            break;
        case O_SEED: { /* generate's range: strtoull took " -5" (wrapped) and 2^64 (clamped) */
            long v = 0;
            if (wm_cli_int_arg(&c, "--seed", optarg, 0, LONG_MAX, &v)) return WM_EXIT_ERROR;
            o.seed = (uint64_t)v;
            seed_set = 1;
            break;
        }
        default: {
            int rc = wm_cli_other_opt(&c, opt, optarg, argv);
            if (rc) return rc;
        }
        }
    }
    if (optind < argc) return wm_cli_usage_error(&c, "unexpected argument '%s'", argv[optind]);
    if (!c.model) return wm_cli_usage_error(&c, "-m CHECKPOINT is required");
    if (!c.out) return wm_cli_usage_error(&c, "-o DIR (or --output-dir DIR) is required");
    if (seed_set && !o.random) return wm_cli_usage_error(&c, "--seed needs --random-weights");
    if ((o.ep || o.device || !o.recipe) && wm_cli_build_target(&c, &o.ep, &o.device)) return WM_EXIT_ERROR;
    o.model = c.model;
    o.out_dir = c.out;
    o.quiet = c.quiet; /* stage notes (not run / skipped) go to stderr even with -f json */
    o.progress = !c.quiet && !c.json && isatty(STDERR_FILENO);
    wm_json j;
    wm_error err = {0};
    int rc;
    if (wm_build(&o, &j, &err)) rc = wm_cli_fail(&c, &err);
    else {
        c.out = NULL; /* -o named the folder; the summary goes to stdout */
        rc = wm_cli_emit(&c, o.out_dir, &j);
    }
    wm_json_free(&j);
    return rc;
}

int wm_cmd_build(int argc, char **argv) { return run(argc, argv, 0); }
int wm_cmd_export(int argc, char **argv) { return run(argc, argv, 1); }

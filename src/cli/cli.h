/*
 * cli.h - what every `winml` command shares: common flags (-m -f -o -v -q
 * --help), output of a result (JSON on stdout with -f json, a readable
 * table otherwise, the same JSON to -o FILE), colour (TTY and no NO_COLOR),
 * and the mapping of statuses to exit codes (0 ok, 1 check failed, 2 error).
 */
#ifndef WM_CLI_H
#define WM_CLI_H

#include "core/json.h"
#include "winml/winml.h"

enum { WM_EXIT_OK = 0, WM_EXIT_CHECK = 1, WM_EXIT_ERROR = 2 };

typedef struct wm_cli {
    const char *prog;   /* "winml inspect" */
    const char *model;  /* -m */
    int json;           /* -f json */
    const char *out;    /* -o FILE */
    int verbose, quiet; /* -v / -q */
    int color;          /* stderr/stdout is a TTY and NO_COLOR unset */
} wm_cli;

typedef struct wm_cmd {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
} wm_cmd;

/* Common option letters for getopt: "m:f:o:vqh". */
#define WM_CLI_COMMON_SHORT "m:f:o:vqh"
#define WM_CLI_COMMON_LONG                                                                          \
    {"model", required_argument, 0, 'm'}, {"format", required_argument, 0, 'f'},                   \
        {"output", required_argument, 0, 'o'}, {"verbose", no_argument, 0, 'v'},                   \
        {"quiet", no_argument, 0, 'q'}, {"help", no_argument, 0, 'h'}

void wm_cli_init(wm_cli *c, const char *prog);
/*
 * Handles a common option. Returns 1 when handled, 0 when opt is not
 * common, -1 on a bad value (message printed). 'h' is left to the caller.
 */
int wm_cli_common_opt(wm_cli *c, int opt, const char *arg);

/*
 * --ep and -d/--device of a command that runs a model here (run, generate, eval, perf): WM_CLI_TARGET_LONG in its
 * long options and WM_CLI_TARGET_SHORT in its short ones, and wm_cli_other_opt takes them with the reference's
 * meaning (wm_cli_ep_arg / wm_cli_device_arg with run_here): auto and cpu (any name of the CPU EP, any case) run;
 * an EP or device this build cannot run on is exit 2 naming it, never silently ignored.
 */
enum { WM_CLI_O_EP = 950, WM_CLI_O_DEVICE };
#define WM_CLI_TARGET_SHORT "d:"
#define WM_CLI_TARGET_LONG {"ep", required_argument, 0, WM_CLI_O_EP}, {"device", required_argument, 0, WM_CLI_O_DEVICE}
#define WM_CLI_TARGET_HELP                                                                                      \
    "--ep takes auto (= cpu, the one EP this build runs), an alias (cpu, dml, qnn, openvino, vitisai, trtrtx,\n" \
    "migraphx, cuda) or an ONNX Runtime name (CPUExecutionProvider ...) in any case; -d/--device takes auto\n"    \
    "(= cpu), cpu, gpu or npu. An EP or device other than cpu is refused (exit 2) naming it.\n"

/* The help of --ep / -d on a command that builds for an EP (build, config: wm_cli_build_target). */
#define WM_CLI_BUILD_TARGET_HELP                                                                                 \
    "--ep names the EP the model is built for: auto (= cpu), an alias (cpu, dml, qnn, openvino, vitisai, trtrtx,\n" \
    "migraphx, cuda) or an ONNX Runtime name (QNNExecutionProvider ...) in any case; -d/--device auto (the EP's\n"  \
    "default device: qnn npu, dml gpu, openvino cpu ...), cpu, gpu or npu, one the EP drives (exit 2 otherwise;\n"  \
    "-d gpu|npu needs --ep). -p auto follows the device as the reference's recipes do: npu w8a16, gpu fp16,\n"      \
    "cpu fp32 (a GGUF keeps its blocks but on an npu). The recipe's compile section names the target; this\n"       \
    "build does not compile for another EP (its compile stage says so) and runs the model on its CPU engine.\n"

/*
 * For an option a command's own loop did not take: a common option or a --ep / -d/--device value that runs here
 * (WM_CLI_TARGET_LONG) is applied (returns 0, go on); a missing value, an unknown option or an EP / device this
 * build cannot run on is reported (returns WM_EXIT_ERROR). argv/optind name the offending argument.
 */
int wm_cli_other_opt(wm_cli *c, int opt, const char *arg, char **argv);

/*
 * -d/--device and --ep values as the reference takes them: an EP by alias or ONNX Runtime name in any case
 * ("qnn", "QNNExecutionProvider"), a device cpu|gpu|npu in any case, and "auto" (the best one available here:
 * cpu). *out receives the canonical name ("cpu"; static storage). With run_here, an EP or device this build
 * cannot run on is refused too. A bad value prints one line naming the flag and the value and returns
 * WM_EXIT_ERROR; 0 otherwise.
 */
int wm_cli_ep_arg(const wm_cli *c, const char *v, int run_here, const char **out);
int wm_cli_device_arg(const wm_cli *c, const char *v, int run_here, const char **out);

/*
 * The target of a command that builds for an EP without running it there (build, config): *ep and *device as the
 * flags left them (wm_cli_ep_arg / wm_cli_device_arg without run_here; NULL when not given, a device of "auto" given
 * as NULL). No --ep: cpu, and a -d other than cpu is refused (which EP drives it is the user's choice); --ep without
 * -d: the EP's default device (qnn -> npu); both: the EP must drive the device (wm_ep_drives). Fills both, or prints
 * one line naming the flag and returns WM_EXIT_ERROR.
 */
int wm_cli_build_target(const wm_cli *c, const char **ep, const char **device);

/*
 * build / config -p: one precision per run. *given is the -p value seen before (NULL at first; it keeps arg, which
 * must outlive the parse: an argv string). A repeat of the same name is accepted; another one is refused naming
 * both (the pair that winml quantize composes, -p int4 -p fp16, is not a build precision), as is an unknown name.
 * Sets *prec and returns 0, or prints one line and returns WM_EXIT_ERROR.
 */
int wm_cli_precision_arg(const wm_cli *c, const char *arg, const char **given, int *prec);

/*
 * The reference's default output of a model command without -o: the input's path with its ".onnx" (any case)
 * replaced by suffix ("m.onnx" + "_opt.onnx" -> "m_opt.onnx"; a name without .onnx gets suffix appended).
 * Returns 0, or prints "-m: path too long" and returns WM_EXIT_ERROR. An existing file there is replaced only
 * as for -o (written by winml, or --overwrite): the caller's output checks apply.
 */
int wm_cli_default_out(const wm_cli *c, const char *in, const char *suffix, char *out, size_t n);

struct option;
/* The long name of the option whose value is opt in longs ("threads"); "?" when none. */
const char *wm_cli_long_name(const struct option *longs, int opt);

/*
 * Flag values: an integer in [lo, hi] / a finite number in [lo, hi] (lo
 * excluded when lo_open). A bad value prints "FLAG: 'V' is not an integer in
 * [lo, hi]" and returns WM_EXIT_ERROR; 0 with *out set otherwise.
 */
int wm_cli_int_arg(const wm_cli *c, const char *flag, const char *v, long lo, long hi, long *out);
int wm_cli_num_arg(const wm_cli *c, const char *flag, const char *v, double lo, int lo_open, double hi, double *out);
/*
 * "N,N,...": comma-separated integers in [lo, hi], at least one, at most max_n (0: no limit); no empty item, no
 * blank, no trailing comma. On success *out is a new array of *n values (the caller frees it) and 0 is
 * returned; a bad value prints one line naming flag and returns WM_EXIT_ERROR with *out untouched.
 * These three are the one parser of numeric flag values: every command's numbers go through them.
 */
int wm_cli_list_arg(const wm_cli *c, const char *flag, const char *v, long lo, long hi, size_t max_n, long **out,
                    size_t *n);

/*
 * Before any work: path (a JSON result's -o or --report; NULL: none) may be written as wm_cli_emit will (absent, or
 * a regular JSON file) and is not a file of the model -m names (wm_json_out_check). 0, or the exit code with one
 * line printed.
 */
int wm_cli_json_out_check(const wm_cli *c, const char *path);

/* optimize / quantize --report FILE, before the model is read: not model_out (the model's -o: the model would be
   written, then the report refused), and wm_cli_json_out_check. 0 (also when report is NULL) or the exit code. */
int wm_cli_report_check(const wm_cli *c, const char *report, const char *model_out);

/* Prints "winml <cmd>: error: <msg>" to stderr; returns the exit code. */
int wm_cli_fail(const wm_cli *c, const wm_error *e);

int wm_cli_usage_error(const wm_cli *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * Emits a finished result: with -f json the JSON goes to stdout (the only
 * stdout output); otherwise a table rendered from the same JSON. With -o the
 * JSON is also written to the file (temp + rename). Returns an exit code.
 */
int wm_cli_emit(const wm_cli *c, const char *title, const wm_json *j);

/* Progress and info lines on stderr, silent with -q, -f json, or no TTY (progress). */
void wm_cli_info(const wm_cli *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

int wm_cmd_inspect(int argc, char **argv);
int wm_cmd_sys(int argc, char **argv);
int wm_cmd_analyze(int argc, char **argv);
int wm_cmd_optimize(int argc, char **argv);
int wm_cmd_quantize(int argc, char **argv);
/* Writes j to c->out when set (temp + rename); an exit code. For commands whose -o is a model. */
int wm_cli_opt_write_json(const wm_cli *c, const wm_json *j);
int wm_cmd_perf(int argc, char **argv);
int wm_cmd_eval(int argc, char **argv);
int wm_cmd_generate(int argc, char **argv);
/* `winml generate` on an encoder-decoder build folder (cmd_generate_s2s.c); wm_generate_is_s2s: argv's -m is one. */
int wm_cmd_generate_s2s(int argc, char **argv);
int wm_generate_is_s2s(int argc, char **argv);
int wm_folder_is_s2s(const char *model_dir);
/* Transcribes audio files with a speech encoder-decoder folder (c->model): `winml generate --audio` (run 0:
   {"outputs": ...}) and `winml run --audio` (run 1: {"task", "results": ...}); with image set, reads image files
   with an image encoder-decoder (`--image`). language / task NULL: the folder's;
   num_beams / max_new 0: the folder's. Returns the exit code. */
typedef struct wm_s2s_audio_args {
    const char *language, *task;
    int num_beams;
    long max_new;
    int threads, run;
    int timestamps; /* --timestamps: segments with their times */
    int image; /* the files are images for an image encoder-decoder (TrOCR): task image-to-text, no prompt */
    uint64_t max_pixels; /* images: the decode budget (0: $WM_MAX_IMAGE_PIXELS or the default) */
    /* Whisper's fallback (wm_whisper_fallback): --temperature list (NULL: none), thr[] the
       --compression-ratio-threshold, --logprob-threshold, --no-speech-threshold given (bit k of thr_set), --seed */
    const char *temperature;
    double thr[3];
    int thr_set;
    uint64_t seed;
    /* the previous-text prompt: --condition-on-prev-tokens (or generation_config.json's), --prompt TEXT,
       --prompt-condition-type first-segment|all-segments (all_segments 1) */
    int condition;
    const char *prompt;
    int all_segments;
    int seed_set; /* --seed was given (`run` refuses it where nothing is sampled) */
} wm_s2s_audio_args;

/* Whisper's fallback flags, shared by `winml generate` and `winml run` (WM_WHISPER_FLAGS_LONG in their option
   tables, values from WM_WHISPER_OPT): 0 when opt is none of them, else 1 (parsed into a) or an exit code. */
enum { WM_WHISPER_OPT = 400, WM_WHISPER_OPT_CRT = WM_WHISPER_OPT, WM_WHISPER_OPT_LPT, WM_WHISPER_OPT_NST,
       WM_WHISPER_OPT_TEMP, WM_WHISPER_OPT_SEED, WM_WHISPER_OPT_COND, WM_WHISPER_OPT_PROMPT, WM_WHISPER_OPT_PCT };
#define WM_WHISPER_FLAGS_LONG                                                                                     \
    {"compression-ratio-threshold", required_argument, 0, WM_WHISPER_OPT_CRT},                                   \
    {"logprob-threshold", required_argument, 0, WM_WHISPER_OPT_LPT},                                             \
    {"no-speech-threshold", required_argument, 0, WM_WHISPER_OPT_NST},                                           \
    {"temperature", required_argument, 0, WM_WHISPER_OPT_TEMP}, {"seed", required_argument, 0, WM_WHISPER_OPT_SEED}, \
    {"condition-on-prev-tokens", no_argument, 0, WM_WHISPER_OPT_COND},                                            \
    {"prompt", required_argument, 0, WM_WHISPER_OPT_PROMPT},                                                      \
    {"prompt-condition-type", required_argument, 0, WM_WHISPER_OPT_PCT}
#define WM_WHISPER_FLAGS_HELP                                                                                     \
    "Whisper's fallback (as transformers' generate): --temperature 0,0.2,0.4,0.6,0.8,1 decodes a window again at\n"  \
    "the next temperature (top-k sampling, --seed N) when its tokens' zlib ratio passes --compression-ratio-\n"      \
    "threshold X or their average log-probability is under --logprob-threshold X; a window also under\n"            \
    "--no-speech-threshold X's no-speech probability is skipped. Thresholds default to generation_config.json's.\n"  \
    "--condition-on-prev-tokens: each window starts with <|startofprev|> and the text so far (while decoded under\n" \
    "temperature 0.5); --prompt TEXT: an initial prompt, before the first window's text (--prompt-condition-type\n" \
    "first-segment) or before every window's (all-segments, with --condition-on-prev-tokens).\n"
int wm_whisper_flag(wm_cli *c, int opt, const char *arg, wm_s2s_audio_args *a);
int wm_s2s_audio_cli(wm_cli *c, const char *const *files, size_t n, const wm_s2s_audio_args *a);
int wm_cmd_run(int argc, char **argv);
int wm_cmd_download(int argc, char **argv);
int wm_cmd_cache(int argc, char **argv);
int wm_cmd_tokenize(int argc, char **argv);
int wm_cmd_config(int argc, char **argv);
int wm_cmd_export(int argc, char **argv);
int wm_cmd_build(int argc, char **argv);
int wm_cmd_sweep(int argc, char **argv);
int wm_cmd_catalog(int argc, char **argv);

#endif

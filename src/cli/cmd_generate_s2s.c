/*
 * cmd_generate_s2s.c - `winml generate` on an encoder-decoder build folder
 * (encoder_model.onnx + decoder_model.onnx + decoder_with_past_model.onnx):
 * parses, tokenizes, calls the library's search (src/llm/seq2seq.c) and
 * prints the decoded text of each source (-f json: text and ids).
 */
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/error.h"
#include "core/file.h"
#include "hf/spm_model.h"
#include "hf/tokenizer.h"
#include "llm/s2s_parts.h"
#include "llm/seq2seq.h"
#include "llm/whisper_gen.h"
#include "tasks/s2s_text.h"
#include "tasks/speech_s2s.h"
#include "tasks/vision.h"

#define MAX_ROWS 256

static void help(void) {
    printf("usage: winml generate -m BUILD_DIR (--text TEXT | --ids ID,... | --audio FILE | --image FILE)...\n"
           "                      [--max-new-tokens N]\n"
           "                      [--num-beams N] [--length-penalty X] [--early-stopping true|false|never]\n"
           "                      [--no-repeat-ngram-size N] [--eos ID,...] [--language L] [--task T] [--timestamps]\n"
           "                      [--temperature T,...] [--compression-ratio-threshold X] [--logprob-threshold X]\n"
           "                      [--no-speech-threshold X] [--seed N] [--condition-on-prev-tokens] [--prompt TEXT]\n"
           "                      [--prompt-condition-type first-segment|all-segments] [--top-k K] [--top-p P]\n"
           "                      [--decoder DECODER_PART_DIR]\n"
           "                      [--threads N] [--ep auto|cpu] [-d auto|cpu]\n"
           "                      [-f table|json]\n\n"
           "Translation / summarization with an encoder-decoder build (encoder_model.onnx, decoder_model.onnx,\n"
           "decoder_with_past_model.onnx): each --text (or --ids row) is one source of the batch. The encoder\n"
           "runs once, the decoder one token a step with its caches; greedy, or beam search with --num-beams.\n"
           "Settings come from the folder's generation_config.json / config.json (decoder_start_token_id,\n"
           "forced BOS / EOS, eos_token_id, num_beams, length_penalty, early_stopping, no_repeat_ngram_size,\n"
           "max_length), flags win. Prints each decoded text on its own line; -f json the texts and ids.\n"
           "--temperature T (one number) samples with one beam: transformers' warpers in its order (temperature,\n"
           "--top-k K, --top-p P) and our generator seeded by --seed N (reproducible, not torch's draws).\n\n"
           "Speech (an encoder reading input_features, e.g. Whisper): each --audio file is resampled to the\n"
           "folder's preprocessor_config.json rate and turned into log-mel features; the decoder prompt is the\n"
           "start token, the language (--language en, else forced_decoder_ids' or detected), the task (--task\n"
           "transcribe|translate) and <|notimestamps|>; suppress_tokens / begin_suppress_tokens apply. -f json\n"
           "gives each file's prompt and generated ids (after the prompt, as transformers returns them).\n"
           "--timestamps: no <|notimestamps|>, Whisper's timestamp rules, and the output split into segments\n"
           "([start -> end] text; -f json \"chunks\"). Audio over 30 s is transcribed in 30 s windows, each\n"
           "starting at the last timestamp of the one before (timestamps are implied; without the flag only the\n"
           "text is printed).\n"
           WM_WHISPER_FLAGS_HELP "\n"
           "Part builds (the reference's encoder / decoder part recipes): -m ENCODER_PART_DIR --decoder\n"
           "DECODER_PART_DIR with --text / --ids: greedy search, one source at a time, over the decoder's static cache.\n\n"
           "Images (an encoder reading pixel_values, e.g. TrOCR): each --image (PNG or JPEG) is preprocessed as the\n"
           "folder's preprocessor_config.json says; the decoder starts from decoder_start_token_id.\n\n"
           WM_CLI_TARGET_HELP);
}

/* 1 when folder m holds encoder_model.onnx (an encoder-decoder build). */
int wm_folder_is_s2s(const char *m) { return wm_s2s_text_folder(m); }

/* 1 when argv's -m names a folder holding encoder_model.onnx (an encoder-decoder build). */
int wm_generate_is_s2s(int argc, char **argv) {
    const char *m = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--decoder") || !strncmp(argv[i], "--decoder=", 10)) return 1; /* a part build */
        if ((!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) && i + 1 < argc) m = argv[++i];
        else if (!strncmp(argv[i], "--model=", 8)) m = argv[i] + 8;
        else if (!strncmp(argv[i], "-m", 2) && argv[i][2] && argv[i][1] != '-') m = argv[i] + 2;
    }
    return m ? wm_folder_is_s2s(m) : 0;
}

/* The decoded text of ids[0..n) into j's "text", and printed unless -f json or segments follow. */
static wm_status put_text(const wm_cli *c, const wm_tokenizer *tok, const int64_t *ids, int64_t n, int64_t ts_begin,
                          int print, wm_json *j, wm_error *err) {
    wm_tok_buf tb = {0};
    wm_status st = wm_s2s_text_decode(tok, ids, n, ts_begin, &tb, err);
    if (!st) {
        if (!c->json && print) printf("%.*s\n", (int)tb.n, tb.p ? tb.p : "");
        wm_json_strn(j, "text", tb.p ? tb.p : "", tb.n);
    }
    wm_tok_buf_free(&tb);
    return st;
}

/* Row b's segments as "chunks" ({"timestamp": [start, end], "text"}, as transformers' ASR pipeline returns
   them), printed "[start -> end] text" unless -f json; ids per chunk when ids is set (generate). */
static wm_status put_chunks(const wm_cli *c, const wm_tokenizer *tok, const wm_whisper_out *w, int64_t b,
                           int64_t ts_begin, int ids, wm_json *j, wm_error *err) {
    wm_status st = WM_OK;
    wm_json_arr(j, "chunks");
    for (size_t k = w->seg_at[b]; k < w->seg_at[b + 1] && !st; k++) {
        const wm_whisper_segment *sg = &w->seg[k];
        const int64_t *t = w->ids + b * w->width + sg->off;
        wm_json_obj(j, NULL);
        wm_json_arr(j, "timestamp");
        wm_json_num(j, NULL, sg->start);
        wm_json_num(j, NULL, sg->end);
        wm_json_arr_end(j);
        if (tok) {
            wm_tok_buf tb = {0};
            if (!(st = wm_s2s_text_decode(tok, t, sg->n, ts_begin, &tb, err))) {
                if (!c->json) printf("[%.2f -> %.2f] %.*s\n", sg->start, sg->end, (int)tb.n, tb.p ? tb.p : "");
                wm_json_strn(j, "text", tb.p ? tb.p : "", tb.n);
            }
            wm_tok_buf_free(&tb);
        }
        if (ids) {
            wm_json_arr(j, "ids");
            for (int64_t i = 0; i < sg->n; i++) wm_json_int(j, NULL, t[i]);
            wm_json_arr_end(j);
        }
        wm_json_obj_end(j);
    }
    wm_json_arr_end(j);
    return st;
}

/* Every decoding of a window ("tries": row, window, seek, temperature, the fallback's figures and decision). */
static void put_tries(const wm_whisper_out *w, wm_json *j) {
    wm_json_arr(j, "tries");
    for (size_t k = 0; k < w->n_tries; k++) {
        const wm_whisper_try *t = &w->tries[k];
        wm_json_obj(j, NULL);
        wm_json_int(j, "row", t->row);
        wm_json_int(j, "window", t->window);
        wm_json_num(j, "seek", t->seek_s);
        wm_json_int(j, "input_tokens", t->n_input);
        wm_json_num(j, "temperature", t->temperature);
        if (!isnan(t->avg_logprob)) wm_json_num(j, "avg_logprob", t->avg_logprob);
        wm_json_num(j, "compression_ratio", t->compression_ratio);
        wm_json_num(j, "no_speech_prob", t->no_speech_prob);
        wm_json_bool(j, "fallback", t->fallback);
        wm_json_bool(j, "skip", t->skip);
        wm_json_obj_end(j);
    }
    wm_json_arr_end(j);
}

/* The last generation's encoder and search times (the JSON's encoder_ms and decode_ms; wall, then process CPU), and the
   decoder nodes its last step skipped (decode_kept_nodes: values kept from the cross-attention cache). */
static void timing_json(const wm_s2s *m, wm_json *j) {
    double enc, search;
    wm_s2s_timing(m, &enc, &search);
    wm_json_num(j, "encoder_ms", enc);
    wm_json_num(j, "decode_ms", search);
    wm_s2s_cpu_timing(m, &enc, &search);
    wm_json_num(j, "encoder_cpu_ms", enc);
    wm_json_num(j, "decode_cpu_ms", search);
    wm_json_uint(j, "decode_kept_nodes", wm_s2s_kept_nodes(m));
}

int wm_whisper_flag(wm_cli *c, int opt, const char *arg, wm_s2s_audio_args *a) {
    char flag[48];
    double d = 0;
    int bad = 0;
    switch (opt) {
    case WM_WHISPER_OPT_CRT:
    case WM_WHISPER_OPT_LPT:
    case WM_WHISPER_OPT_NST:
        snprintf(flag, sizeof flag, "--%s", opt == WM_WHISPER_OPT_CRT ? "compression-ratio-threshold"
                                             : opt == WM_WHISPER_OPT_LPT ? "logprob-threshold" : "no-speech-threshold");
        if ((bad = wm_cli_num_arg(c, flag, arg, -1e6, 0, 1e6, &d))) return bad;
        a->thr[opt - WM_WHISPER_OPT_CRT] = d;
        a->thr_set |= 1 << (opt - WM_WHISPER_OPT_CRT);
        return 1;
    case WM_WHISPER_OPT_TEMP: a->temperature = arg; return 1;
    case WM_WHISPER_OPT_SEED: { /* generate's range: strtoull took " -5" (wrapped) and 2^64 (clamped) */
        long v = 0;
        if ((bad = wm_cli_int_arg(c, "--seed", arg, 0, LONG_MAX, &v))) return bad;
        a->seed = (uint64_t)v;
        a->seed_set = 1;
        return 1;
    }
    case WM_WHISPER_OPT_COND: a->condition = 1; return 1;
    case WM_WHISPER_OPT_PROMPT: /* one prompt per run, as generate's: a second one is not silently dropped */
        if (a->prompt) return wm_cli_usage_error(c, "--prompt given twice: one initial prompt per run");
        a->prompt = arg;
        return 1;
    case WM_WHISPER_OPT_PCT:
        if (strcmp(arg, "first-segment") && strcmp(arg, "all-segments"))
            return wm_cli_usage_error(c, "--prompt-condition-type: expected first-segment or all-segments, got '%s'", arg);
        a->all_segments = !strcmp(arg, "all-segments");
        return 1;
    default: return 0;
    }
}

int wm_s2s_audio_cli(wm_cli *c, const char *const *files, size_t n, const wm_s2s_audio_args *a) {
    wm_error err = {0};
    wm_s2s *m = NULL;
    wm_tokenizer *tok = NULL;
    float *feats = NULL;
    int64_t *out = NULL, frames = 0, width = 0;
    double *secs = calloc(n ? n : 1, sizeof *secs);
    int64_t *valid = calloc(n ? n : 1, sizeof *valid);
    wm_whisper_out w;
    memset(&w, 0, sizeof w);
    wm_json j;
    wm_json_init(&j);
    int rc = WM_EXIT_ERROR;
    wm_s2s_gen g;
    wm_s2s_gen_default(&g);
    wm_status st = secs && valid ? WM_OK : wm_err(&err, WM_ERR_NOMEM, "out of memory");
    wm_whisper_fallback fb, flags; /* --temperature first: a bad list is refused before the model loads */
    wm_whisper_fallback_default(&fb);
    wm_whisper_fallback_default(&flags);
    if (!st && !a->image && a->temperature)
        st = wm_whisper_parse_temperatures("--temperature", a->temperature, &flags, &err);
    if (!st) st = wm_s2s_gen_from_folder(c->model, &g, &err);
    if (!st) st = wm_s2s_open(c->model, a->threads, &m, &err);
    if (!st && !a->image && !wm_s2s_speech(m))
        st = wm_err(&err, WM_ERR_USAGE, "%s: --audio needs a speech encoder-decoder (encoder_model.onnx reading "
                    "input_features); this one reads %s", c->model, wm_s2s_image(m) ? "pixel_values: give --image"
                                                                                       : "input_ids: give --text");
    if (!st && a->image && !wm_s2s_image(m))
        st = wm_err(&err, WM_ERR_USAGE, "%s: --image needs an image encoder-decoder (encoder_model.onnx reading "
                    "pixel_values); this one reads %s", c->model, wm_s2s_speech(m) ? "input_features: give --audio"
                                                                                    : "input_ids: give --text");
    g.timestamps = a->timestamps;
    if (!st && !a->image) st = wm_s2s_prompt_from_folder(c->model, a->language, a->task, &g, &err);
    if (!st && a->num_beams > 0) g.num_beams = a->num_beams;
    if (!st) {
        char p[PATH_MAX + 32];
        int present = 0;
        snprintf(p, sizeof p, "%s/tokenizer.json", c->model);
        st = wm_input_present(p, &present, &err);
        const char *spm = NULL;
        if (!st && (present || wm_spm_find(c->model, &spm))) st = wm_tokenizer_load_dir(c->model, &tok, &err);
    }
    if (!st && a->image) { /* the start token + new tokens; the images' pixel_values as one batch */
        int h = 0, wi = 0;
        if (a->max_new > 0) g.max_length = 1 + a->max_new;
        st = wm_vision_pixel_batch(c->model, files, n, a->max_pixels, &feats, &h, &wi, &err);
        if (!st) st = wm_s2s_generate_pixels(m, feats, (int64_t)n, 3, h, wi, &g, &out, &width, &err);
    } else if (!st)
        st = wm_speech_s2s_features(c->model, wm_s2s_n_mels(m), files, n, &feats, &frames, valid, secs, &err);
    int long_form = !st && !a->image && frames > g.window_frames;
    if (long_form && !g.timestamps) st = wm_whisper_timestamps_on(c->model, &g, &err); /* implied over 30 s */
    if (!st && !a->image) st = wm_whisper_fallback_from_folder(c->model, &fb, &err);
    if (a->temperature) memcpy(fb.temps, flags.temps, sizeof fb.temps), fb.n_temps = flags.n_temps;
    for (int k = 0; k < 3; k++)
        if (a->thr_set & (1 << k))
            *(k == 0 ? &fb.compression_ratio_threshold : k == 1 ? &fb.logprob_threshold : &fb.no_speech_threshold) =
                a->thr[k];
    fb.seed = a->seed;
    if (a->condition) fb.condition = 1;
    fb.all_segments = a->all_segments;
    int64_t *pids = NULL;
    if (!st && !a->image && a->prompt && !tok)
        st = wm_err(&err, WM_ERR_USAGE, "--prompt: %s has no tokenizer.json", c->model);
    if (!st && !a->image && a->prompt) st = wm_whisper_prompt_ids(tok, "--prompt", a->prompt, &pids, &fb.n_prompt_ids, &err);
    fb.prompt_ids = pids;
    if (!st && !a->image) /* Whisper's sequential loop, short-form audio too (transformers' generate) */
        st = wm_whisper_generate(m, feats, (int64_t)n, wm_s2s_n_mels(m), frames, long_form ? valid : NULL, &g,
                                 a->max_new > 0 ? a->max_new : 0, &fb, &w, &err);
    free(pids);
    if (st) {
        rc = wm_cli_fail(c, &err);
        goto done;
    }
    const int sp = !a->image; /* rows from w (speech) or out (images) */
    int64_t P = sp ? w.n_prompt : 1, ts = sp && g.ts_begin >= 0 ? g.ts_begin : -1;
    int64_t wd = sp ? P + w.width : width; /* a row: its prompt, then the generated ids */
    wm_json_obj(&j, NULL);
    if (a->run) wm_json_str(&j, "task", a->image ? "image-to-text" : "automatic-speech-recognition");
    wm_json_arr(&j, a->run ? "results" : "outputs");
    for (size_t i = 0; i < n; i++) {
        const int64_t *pr = sp ? w.prompt + (int64_t)i * P : out + (int64_t)i * wd;
        const int64_t *o = sp ? w.ids + (int64_t)i * w.width : out + (int64_t)i * wd + P;
        wm_json_obj(&j, NULL);
        wm_json_str(&j, a->image ? "image" : "audio", files[i]);
        if (!a->image) wm_json_num(&j, "seconds", secs[i]);
        if (!c->json && a->timestamps && n > 1) printf("# %s\n", files[i]);
        if ((tok && (st = put_text(c, tok, o, wd - P, ts, !a->timestamps, &j, &err))) ||
            (a->timestamps && (st = put_chunks(c, tok, &w, (int64_t)i, ts, !a->run, &j, &err)))) {
            rc = wm_cli_fail(c, &err);
            goto done;
        }
        wm_json_arr(&j, "prompt");
        for (int64_t k = 0; k < P; k++) wm_json_int(&j, NULL, pr[k]);
        wm_json_arr_end(&j);
        wm_json_arr(&j, "ids");
        for (int64_t k = 0; k < wd - P; k++) wm_json_int(&j, NULL, o[k]);
        wm_json_arr_end(&j);
        wm_json_obj_end(&j);
    }
    wm_json_arr_end(&j);
    wm_json_int(&j, "num_beams", g.num_beams);
    if (sp) {
        wm_json_int(&j, "windows", w.windows);
        put_tries(&w, &j);
    } else wm_json_int(&j, "max_length", g.max_length);
    timing_json(m, &j); /* speech: the last decoding's (one window, one try: the whole transcription's) */
    wm_json_obj_end(&j);
    rc = c->json || !tok ? wm_cli_emit(c, c->model, &j) : WM_EXIT_OK;
done:
    free(secs);
    free(valid);
    free(feats);
    free(out);
    wm_whisper_out_free(&w);
    wm_json_free(&j);
    wm_tokenizer_free(tok);
    wm_s2s_free(m);
    return rc;
}

int wm_cmd_generate_s2s(int argc, char **argv) {
    wm_cli c;
    wm_cli_init(&c, "winml generate");
    enum { O_TEXT = 256, O_IDS, O_MAXNEW, O_BEAMS, O_LP, O_ES, O_NGRAM, O_EOS, O_THREADS, O_AUDIO, O_LANG, O_TASK, O_TS,
           O_IMAGE, O_DECODER, O_TOPK, O_TOPP };
    static const struct option longs[] = {
        WM_CLI_COMMON_LONG,
        {"text", required_argument, 0, O_TEXT},          {"ids", required_argument, 0, O_IDS},
        {"max-new-tokens", required_argument, 0, O_MAXNEW}, {"num-beams", required_argument, 0, O_BEAMS},
        {"length-penalty", required_argument, 0, O_LP},   {"early-stopping", required_argument, 0, O_ES},
        {"no-repeat-ngram-size", required_argument, 0, O_NGRAM}, {"eos", required_argument, 0, O_EOS},
        {"threads", required_argument, 0, O_THREADS},    {"audio", required_argument, 0, O_AUDIO},
        {"language", required_argument, 0, O_LANG},      {"task", required_argument, 0, O_TASK},
        {"timestamps", no_argument, 0, O_TS},            {"image", required_argument, 0, O_IMAGE},
        {"decoder", required_argument, 0, O_DECODER},    {"top-k", required_argument, 0, O_TOPK},
        {"top-p", required_argument, 0, O_TOPP},
        WM_WHISPER_FLAGS_LONG, WM_CLI_TARGET_LONG, {0, 0, 0, 0}};
    const char *decoder = NULL; /* --decoder DIR: -m is the encoder part of a part build */
    wm_s2s_parts *parts = NULL;
    wm_s2s_audio_args wa;
    memset(&wa, 0, sizeof wa);
    const char *audio[MAX_ROWS], *language = NULL, *task = NULL;
    size_t n_audio = 0;
    int image = 0; /* the files of audio[] are --image files */
    const char *texts[MAX_ROWS];
    int64_t *rows[MAX_ROWS];
    size_t lens[MAX_ROWS], n_rows = 0, n_texts = 0;
    long max_new = -1, beams = -1, ngram = -1, threads = 0, es = -1, top_k = -1;
    double lp = NAN, top_p = NAN;
    int64_t *eos = NULL;
    size_t n_eos = 0;
    int opt, rc = WM_EXIT_ERROR, timestamps = 0;
    wm_tokenizer *tok = NULL;
    wm_s2s *m = NULL;
    int64_t *ids = NULL, *mask = NULL, *out = NULL;
    wm_json j;
    wm_json_init(&j);
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":" WM_CLI_COMMON_SHORT WM_CLI_TARGET_SHORT, longs, NULL)) != -1) {
        char flag[40];
        snprintf(flag, sizeof flag, "--%s", wm_cli_long_name(longs, opt));
        long l = 0;
        double d = 0;
        int bad = 0;
        switch (opt) {
        case O_MAXNEW: bad = wm_cli_int_arg(&c, flag, optarg, 1, 65535, &l); break;
        case O_BEAMS: bad = wm_cli_int_arg(&c, flag, optarg, 1, 64, &l); break;
        case O_NGRAM: bad = wm_cli_int_arg(&c, flag, optarg, 0, 1 << 16, &l); break;
        case O_THREADS: bad = wm_cli_int_arg(&c, flag, optarg, 0, 256, &l); break;
        case O_LP: bad = wm_cli_num_arg(&c, flag, optarg, 0, -100, 100, &d); break;
        case O_TOPK: bad = wm_cli_int_arg(&c, flag, optarg, 0, 1000000000, &l); break;
        case O_TOPP: bad = wm_cli_num_arg(&c, flag, optarg, 0, 1, 1, &d); break;
        default: break;
        }
        if (bad) {
            rc = bad;
            goto out;
        }
        switch (opt) {
        case 'h': help(); rc = WM_EXIT_OK; goto out;
        case O_TEXT:
        case O_IDS:
            if (n_rows + n_texts == MAX_ROWS) {
                rc = wm_cli_usage_error(&c, "%s: at most %d sources per run", flag, MAX_ROWS);
                goto out;
            }
            if (opt == O_TEXT) texts[n_texts++] = optarg;
            else if ((rc = wm_cli_list_arg(&c, "--ids", optarg, 0, INT32_MAX, 0, &rows[n_rows], &lens[n_rows])))
                goto out;
            else n_rows++;
            rc = WM_EXIT_ERROR;
            break;
        case O_EOS:
            free(eos);
            eos = NULL; /* a bad repeat leaves nothing for the exit path to free twice */
            if ((rc = wm_cli_list_arg(&c, "--eos", optarg, 0, INT32_MAX, WM_S2S_MAX_EOS, &eos, &n_eos))) goto out;
            rc = WM_EXIT_ERROR;
            break;
        case O_ES:
            es = !strcmp(optarg, "true") ? 1 : !strcmp(optarg, "false") ? 0 : !strcmp(optarg, "never") ? 2 : -2;
            if (es == -2) {
                rc = wm_cli_usage_error(&c, "--early-stopping: expected true, false or never, got '%s'", optarg);
                goto out;
            }
            break;
        case O_AUDIO:
        case O_IMAGE:
            if (n_audio == MAX_ROWS || (n_audio && image != (opt == O_IMAGE))) {
                rc = wm_cli_usage_error(&c, "--audio / --image: at most %d files per run, of one kind", MAX_ROWS);
                goto out;
            }
            image = opt == O_IMAGE;
            audio[n_audio++] = optarg;
            break;
        case O_LANG: language = optarg; break;
        case O_TASK:
            if (strcmp(optarg, "transcribe") && strcmp(optarg, "translate")) {
                rc = wm_cli_usage_error(&c, "--task: expected transcribe or translate, got '%s'", optarg);
                goto out;
            }
            task = optarg;
            break;
        case O_TS: timestamps = 1; break;
        case O_DECODER: decoder = optarg; break;
        case O_MAXNEW: max_new = l; break;
        case O_BEAMS: beams = l; break;
        case O_NGRAM: ngram = l; break;
        case O_THREADS: threads = l; break;
        case O_LP: lp = d; break;
        case O_TOPK: top_k = l; break;
        case O_TOPP: top_p = d; break;
        default: {
            int w = wm_whisper_flag(&c, opt, optarg, &wa);
            if (w > 1 || (!w && (rc = wm_cli_other_opt(&c, opt, optarg, argv)))) {
                rc = w > 1 ? w : rc;
                goto out;
            }
        }
        }
    }
    if (optind < argc) {
        rc = wm_cli_usage_error(&c, "unexpected argument '%s'", argv[optind]);
        goto out;
    }
    if (c.model && n_audio && !n_texts && !n_rows) {
        if (!isnan(lp) || es >= 0 || ngram >= 0 || eos || (image && (language || task || timestamps))) {
            rc = wm_cli_usage_error(&c, "%s: --length-penalty, --early-stopping, --no-repeat-ngram-size, --eos%s are "
                                    "not taken with %s (the folder's generation_config.json decides)",
                                    image ? "--image" : "--audio",
                                    image ? ", --language, --task and --timestamps" : " and", image ? "images" : "audio");
            goto out;
        }
        if (image && (wa.temperature || wa.thr_set || wa.condition || wa.prompt || wa.all_segments)) {
            rc = wm_cli_usage_error(&c, "--temperature, the thresholds and the prompt flags apply to --audio");
            goto out;
        }
        wm_s2s_audio_args aa = {language, task, (int)beams, max_new, (int)threads, 0, timestamps, image, 0,
                                wa.temperature, {wa.thr[0], wa.thr[1], wa.thr[2]}, wa.thr_set, wa.seed,
                                wa.condition, wa.prompt, wa.all_segments};
        rc = wm_s2s_audio_cli(&c, audio, n_audio, &aa);
        goto out;
    }
    if (language || task || timestamps || wa.thr_set || wa.condition || wa.prompt || wa.all_segments) {
        rc = wm_cli_usage_error(&c, "--language, --task, --timestamps, the thresholds and the prompt flags apply to "
                                "--audio");
        goto out;
    }
    double temp = 0;
    if (wa.temperature && (rc = wm_cli_num_arg(&c, "--temperature", wa.temperature, 0, 0, 100, &temp))) goto out;
    rc = WM_EXIT_ERROR;
    if ((top_k >= 0 || !isnan(top_p)) && !(temp > 0)) {
        rc = wm_cli_usage_error(&c, "--top-k and --top-p sample: give --temperature T > 0 too");
        goto out;
    }
    if (!c.model || (n_texts && n_rows) || !(n_texts + n_rows) || n_audio) {
        rc = wm_cli_usage_error(&c, "-m BUILD_DIR and --text (or --ids, --audio or --image: one of them) are required");
        goto out;
    }
    wm_error err = {0};
    wm_s2s_gen g;
    wm_s2s_gen_default(&g);
    if (decoder && (n_audio || beams > 1)) {
        rc = wm_cli_usage_error(&c, "--decoder (a part build): --text or --ids, greedy (no --audio, --image, --num-beams)");
        goto out;
    }
    if (wm_s2s_gen_from_folder(decoder ? decoder : c.model, &g, &err) ||
        (decoder ? wm_s2s_parts_open(c.model, decoder, (int)threads, &parts, &err)
                 : wm_s2s_open(c.model, (int)threads, &m, &err))) {
        rc = wm_cli_fail(&c, &err);
        goto out;
    }
    if (n_texts) {
        char p[PATH_MAX + 32];
        int present = 0;
        snprintf(p, sizeof p, "%s/tokenizer.json", c.model);
        if (wm_input_present(p, &present, &err)) {
            rc = wm_cli_fail(&c, &err);
            goto out;
        }
        const char *spm = NULL;
        if (!present && !wm_spm_find(c.model, &spm)) {
            wm_err(&err, WM_ERR_INPUT, "%s: missing: --text needs the checkpoint's tokenizer.json or a SentencePiece "
                   "model (spiece.model, sentencepiece.bpe.model, tokenizer.model, or Marian's source.spm + "
                   "vocab.json); give --ids, or save the tokenizer with transformers' save_pretrained", p);
            rc = wm_cli_fail(&c, &err);
            goto out;
        }
        if (wm_tokenizer_load_dir(c.model, &tok, &err)) {
            rc = wm_cli_fail(&c, &err);
            goto out;
        }
        wm_encode_opts eo = wm_encode_opts_default();
        for (size_t i = 0; i < n_texts; i++) {
            wm_encoding enc;
            wm_encoding_init(&enc);
            if (wm_tokenizer_encode(tok, texts[i], strlen(texts[i]), NULL, 0, &eo, &enc, &err)) {
                wm_encoding_free(&enc);
                rc = wm_cli_fail(&c, &err);
                goto out;
            }
            rows[n_rows] = malloc((enc.n ? enc.n : 1) * sizeof **rows);
            if (!rows[n_rows]) {
                wm_encoding_free(&enc);
                wm_err(&err, WM_ERR_NOMEM, "out of memory");
                rc = wm_cli_fail(&c, &err);
                goto out;
            }
            for (size_t k = 0; k < enc.n; k++) rows[n_rows][k] = enc.ids[k];
            lens[n_rows++] = enc.n;
            wm_encoding_free(&enc);
            if (!lens[n_rows - 1]) {
                rc = wm_cli_usage_error(&c, "--text: '%s' encodes to no tokens", texts[i]);
                goto out;
            }
        }
    }
    if (eos) memcpy(g.eos, eos, n_eos * sizeof *eos), g.n_eos = n_eos;
    if (max_new > 0) g.max_length = 1 + max_new; /* transformers: max_new_tokens + the start token */
    if (beams > 0) g.num_beams = (int)beams;
    if (ngram >= 0) g.no_repeat_ngram_size = ngram;
    if (es >= 0) g.early_stopping = (int)es;
    if (!isnan(lp)) g.length_penalty = lp;
    g.temperature = temp; /* sampling (one beam): transformers' warpers in its order, our seeded generator */
    if (top_k >= 0) g.top_k = top_k;
    if (!isnan(top_p)) g.top_p = top_p;
    g.seed = wa.seed;
    if (temp > 0 && (parts || g.num_beams > 1)) {
        rc = wm_cli_usage_error(&c, "--temperature: sampling takes one beam and a whole build (num_beams %d%s)",
                                g.num_beams, parts ? ", --decoder" : "");
        goto out;
    }
    /* the batch, padded on the right with pad_token_id (as the tokenizer pads) */
    size_t S = 0;
    for (size_t i = 0; i < n_rows; i++) S = lens[i] > S ? lens[i] : S;
    int64_t pad = g.pad_token_id >= 0 ? g.pad_token_id : 0;
    ids = malloc(n_rows * S * sizeof *ids);
    mask = malloc(n_rows * S * sizeof *mask);
    if (!ids || !mask) {
        wm_err(&err, WM_ERR_NOMEM, "out of memory");
        rc = wm_cli_fail(&c, &err);
        goto out;
    }
    for (size_t i = 0; i < n_rows; i++)
        for (size_t k = 0; k < S; k++) {
            ids[i * S + k] = k < lens[i] ? rows[i][k] : pad;
            mask[i * S + k] = k < lens[i];
        }
    int64_t width = 0;
    if (parts) { /* one row at a time (the parts are batch 1), padded to the longest with pad_token_id */
        int64_t *ro[MAX_ROWS] = {0}, rw[MAX_ROWS] = {0};
        wm_status ps = WM_OK;
        for (size_t i = 0; i < n_rows && !ps; i++) {
            ps = wm_s2s_parts_generate(parts, rows[i], (int64_t)lens[i], &g, &ro[i], &rw[i], &err);
            width = rw[i] > width ? rw[i] : width;
        }
        int64_t fill = g.pad_token_id >= 0 ? g.pad_token_id : g.n_eos ? g.eos[0] : 0;
        if (!ps && !(out = malloc((size_t)n_rows * (size_t)width * sizeof *out)))
            ps = wm_err(&err, WM_ERR_NOMEM, "out of memory");
        for (size_t i = 0; !ps && i < n_rows; i++)
            for (int64_t k = 0; k < width; k++) out[(int64_t)i * width + k] = k < rw[i] ? ro[i][k] : fill;
        for (size_t i = 0; i < n_rows; i++) free(ro[i]);
        if (ps) {
            rc = wm_cli_fail(&c, &err);
            goto out;
        }
    } else if (wm_s2s_generate(m, ids, mask, (int64_t)n_rows, (int64_t)S, &g, &out, &width, &err)) {
        rc = wm_cli_fail(&c, &err);
        goto out;
    }
    wm_json_obj(&j, NULL);
    wm_json_arr(&j, "outputs");
    for (size_t i = 0; i < n_rows; i++) {
        const int64_t *o = out + (int64_t)i * width;
        wm_json_obj(&j, NULL);
        if (tok && put_text(&c, tok, o, width, -1, 1, &j, &err)) {
            rc = wm_cli_fail(&c, &err);
            goto out;
        }
        wm_json_arr(&j, "ids");
        for (int64_t k = 0; k < width; k++) wm_json_int(&j, NULL, o[k]);
        wm_json_arr_end(&j);
        wm_json_obj_end(&j);
    }
    wm_json_arr_end(&j);
    wm_json_int(&j, "num_beams", g.num_beams);
    wm_json_int(&j, "max_length", g.max_length);
    if (m) timing_json(m, &j);
    wm_json_obj_end(&j);
    if (c.json || !tok) rc = wm_cli_emit(&c, c.model, &j);
    else rc = WM_EXIT_OK;
out:
    for (size_t i = 0; i < n_rows; i++) free(rows[i]);
    free(eos);
    free(ids);
    free(mask);
    free(out);
    wm_json_free(&j);
    wm_tokenizer_free(tok);
    wm_s2s_free(m);
    wm_s2s_parts_free(parts);
    return rc;
}

/*
 * cmd_run.c - `winml run`: an encoder artifact on text. Classification gives
 * labels with softmax scores; a single-logit head (a reranker) gives one
 * score per (query, passage) pair, ranked; feature extraction gives the
 * embedding (pooled as the folder's sentence-transformers files say, else
 * mean-pooled and L2-normalized; --no-normalize keeps the norm). Every
 * --text gives its own result, in the order given.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "builder/recipe.h"
#include "cli/cli.h"
#include "cli/cli_limits.h"
#include "tasks/encoder.h"
#include "tasks/speech.h"
#include "tasks/vision.h"

#define WM_RUN_MAX_TEXTS 256

static void help(void) {
    printf("usage: winml run -m BUILD_DIR|BUILD_DIR/MODEL.onnx --text TEXT... [--pair TEXT]... [--no-normalize]\n"
           "                 [--threads N] [--ep auto|cpu] [-d auto|cpu] [-f table|json] [--max-memory SIZE]\n"
           "                 [--max-loop-iterations N] [--timeout S]\n"
           "       winml run -m BUILD_DIR --image FILE... [--top-k K | --labels \"A,B,...\"] [--max-image-pixels N] [...]\n"
           "       winml run -m BUILD_DIR --audio FILE... [--top-k K | --language L --task T --timestamps] [...]\n\n"
           "Runs an encoder build (text-classification, reranker, feature-extraction) on text. Each --text (up to\n"
           "%d) gives one entry of \"results\", in order. With --pair passages the one --text is the query and every\n"
           "(query, passage) pair is scored and ranked.\n"
           "Classification: labels (config.json id2label) with softmax scores; one logit: the raw score.\n"
           "Feature extraction: the embedding. A folder with sentence-transformers' files (modules.json,\n"
           "sentence_bert_config.json, 1_Pooling/config.json: winml build carries them) truncates to max_seq_length\n"
           "and pools as its Pooling config says, L2-normalized when modules.json lists Normalize; otherwise the\n"
           "mean over the attention mask, L2-normalized. --no-normalize: no normalization.\n"
           "Decoders: use winml generate.\n"
           "Images: each --image (PNG or JPEG, up to %d) is decoded (EXIF orientation applied), preprocessed as the\n"
           "folder's preprocessor_config.json says and run: image-classification gives the top-k labels (default 5)\n"
           "with softmax scores, image-feature-extraction the embedding (image_embeds, pooler_output, else the first\n"
           "output), an image encoder-decoder folder (TrOCR: encoder_model.onnx reading pixel_values) the generated\n"
           "text (greedy, or generation_config's num_beams), keypoint-detection (VitPose: heatmaps) each keypoint's\n"
           "heatmap maximum as score and its x, y as fractions of the image (the whole image is the person box,\n"
           "resized to the processor's size without its affine transform). --max-image-pixels N (default $WM_MAX_IMAGE_PIXELS,\n"
           "else %llu) refuses larger images.\n"
           "--labels \"a cat,a dog\": zero-shot image classification (a CLIP model taking input_ids and\n"
           "pixel_values): each label's score for \"This is a photo of LABEL.\", softmax over the labels, as\n"
           "transformers' pipeline.\n"
           "Audio: each --audio (WAV, FLAC, OGG, ... up to %d) is decoded, mixed to mono, resampled to the folder's\n"
           "preprocessor_config.json sampling_rate (16000) and normalized (do_normalize) for a speech encoder\n"
           "(wav2vec2, HuBERT): automatic-speech-recognition gives the greedy CTC transcript (vocab.json), audio-\n"
           "classification the top-k labels (default 5) with softmax scores. A speech encoder-decoder folder\n"
           "(Whisper: encoder_model.onnx reading input_features) gives each file's transcript: log-mel features,\n"
           "the decoder prompt from generation_config.json (--language en, --task transcribe|translate), greedy\n"
           "or generation_config's num_beams (winml generate --audio takes --num-beams, --max-new-tokens).\n"
           "--timestamps: segments \"[start -> end] text\" (-f json: \"chunks\" of timestamp and text, as transformers'\n"
           "pipeline with return_timestamps=True). Audio over 30 s is transcribed in 30 s windows (Whisper's\n"
           "sequential long-form algorithm), with or without the flag.\n"
           WM_WHISPER_FLAGS_HELP "\n"
           WM_CLI_TARGET_HELP WM_CLI_LIMITS_HELP,
           WM_RUN_MAX_TEXTS, WM_RUN_MAX_TEXTS, (unsigned long long)WM_IMAGE_MAX_PIXELS_DEFAULT, WM_RUN_MAX_TEXTS);
}

typedef struct ranked {
    size_t i;
    double s;
} ranked;

static int by_score(const void *a, const void *b) {
    double x = ((const ranked *)a)->s, y = ((const ranked *)b)->s;
    return (x < y) - (x > y);
}

/* keypoint-detection: each heatmap's maximum, its position as a fraction of the image's width and height (the whole
   image is the person box: x = column * image width / heatmap width, as transformers maps a box's heatmaps). */
static void keypoints(wm_json *j, const wm_vision *v, const wm_vision_out *o) {
    int64_t K = o->dims[1], h = o->dims[2], w = o->dims[3];
    char lb[32];
    wm_json_arr(j, "keypoints");
    for (int64_t k = 0; k < K && h > 0 && w > 0; k++) {
        const float *m = o->y + k * h * w;
        int64_t best = 0;
        for (int64_t i = 1; i < h * w; i++)
            if (m[i] > m[best]) best = i;
        const char *l = wm_vision_label(v, (size_t)k);
        snprintf(lb, sizeof lb, "LABEL_%lld", (long long)k);
        wm_json_obj(j, NULL);
        wm_json_str(j, "label", l ? l : lb);
        wm_json_num(j, "x", (double)(best % w) / (double)w);
        wm_json_num(j, "y", (double)(best / w) / (double)h);
        wm_json_num(j, "score", m[best]);
        wm_json_obj_end(j);
    }
    wm_json_arr_end(j);
}

/* The images of --image: one result each, in order. */
static int run_images(wm_cli *c, const wm_session_opts *so, const char **images, size_t n_images, long top_k,
                      uint64_t max_pixels, const char *const *labels, size_t n_labels) {
    wm_error err = {0};
    wm_vision *v = NULL;
    if (wm_vision_open(c->model, so, max_pixels, &v, &err)) return wm_cli_fail(c, &err);
    const char *task = wm_vision_task(v);
    int zs = !strcmp(task, "zero-shot-image-classification"), cls = zs || !strcmp(task, "image-classification");
    int kp = !strcmp(task, "keypoint-detection");
    wm_json j;
    wm_json_init(&j);
    wm_json_obj(&j, NULL);
    wm_json_str(&j, "task", task);
    wm_json_arr(&j, "results");
    ranked *rk = NULL;
    int rc = WM_EXIT_OK;
    for (size_t r = 0; r < n_images; r++) {
        wm_vision_out o;
        if (wm_vision_run(v, images[r], labels, n_labels, &o, &err)) goto fail;
        wm_json_obj(&j, NULL);
        wm_json_str(&j, "image", images[r]);
        if (kp && o.rank == 4 && o.dims[0] == 1) {
            keypoints(&j, v, &o);
        } else if (cls) {
            size_t n = o.n;
            ranked *nr = realloc(rk, (n ? n : 1) * sizeof *rk);
            if (!nr) {
                err.status = WM_ERR_NOMEM;
                snprintf(err.msg, sizeof err.msg, "out of memory");
                goto fail;
            }
            rk = nr;
            double m = n ? o.y[0] : 0, sum = 0;
            for (size_t i = 1; i < n; i++) m = o.y[i] > m ? o.y[i] : m;
            for (size_t i = 0; i < n; i++) sum += exp(o.y[i] - m);
            for (size_t i = 0; i < n; i++)
                rk[i].i = i, rk[i].s = n == 1 && !zs ? 1 / (1 + exp(-o.y[i])) : exp(o.y[i] - m) / sum;
            qsort(rk, n, sizeof *rk, by_score);
            size_t k = zs ? n : (size_t)top_k < n ? (size_t)top_k : n; /* zero-shot: every candidate */
            char lb[32];
            wm_json_arr(&j, "labels");
            for (size_t i = 0; i < k; i++) {
                const char *l = zs ? labels[rk[i].i] : wm_vision_label(v, rk[i].i);
                snprintf(lb, sizeof lb, "LABEL_%zu", rk[i].i);
                wm_json_obj(&j, NULL);
                wm_json_str(&j, "label", l ? l : lb);
                wm_json_num(&j, "score", rk[i].s);
                wm_json_num(&j, "logit", o.y[rk[i].i]);
                wm_json_obj_end(&j);
            }
            wm_json_arr_end(&j);
        } else {
            wm_json_str(&j, "output", o.output);
            wm_json_arr(&j, "shape");
            for (int i = 0; i < o.rank; i++) wm_json_int(&j, NULL, o.dims[i]);
            wm_json_arr_end(&j);
            wm_json_arr(&j, "embedding");
            for (size_t i = 0; i < o.n; i++) wm_json_num(&j, NULL, o.y[i]);
            wm_json_arr_end(&j);
        }
        wm_json_obj_end(&j);
    }
    wm_json_arr_end(&j);
    wm_json_obj_end(&j);
    rc = wm_cli_emit(c, c->model, &j);
    goto done;
fail:
    rc = wm_cli_fail(c, &err);
done:
    free(rk);
    wm_json_free(&j);
    wm_vision_free(v);
    return rc;
}

/* Softmax scores of y[n] ranked into rk (n entries), the top k written as "labels" [{label, score, logit}]. */
static void top_labels(wm_json *j, const float *y, size_t n, size_t k, ranked *rk,
                       const char *(*label)(const void *, size_t), const void *ctx) {
    double m = n ? y[0] : 0, sum = 0;
    for (size_t i = 1; i < n; i++) m = y[i] > m ? y[i] : m;
    for (size_t i = 0; i < n; i++) sum += exp(y[i] - m);
    for (size_t i = 0; i < n; i++) rk[i].i = i, rk[i].s = exp(y[i] - m) / sum;
    qsort(rk, n, sizeof *rk, by_score);
    char lb[32];
    wm_json_arr(j, "labels");
    for (size_t i = 0; i < k && i < n; i++) {
        const char *l = label(ctx, rk[i].i);
        snprintf(lb, sizeof lb, "LABEL_%zu", rk[i].i);
        wm_json_obj(j, NULL);
        wm_json_str(j, "label", l ? l : lb);
        wm_json_num(j, "score", rk[i].s);
        wm_json_num(j, "logit", y[rk[i].i]);
        wm_json_obj_end(j);
    }
    wm_json_arr_end(j);
}

static const char *speech_label(const void *ctx, size_t i) { return wm_speech_label(ctx, i); }

/* The files of --audio: one result each, in order. */
static int run_audio(wm_cli *c, const wm_session_opts *so, const char **files, size_t n_files, long top_k) {
    wm_error err = {0};
    wm_speech *sp = NULL;
    if (wm_speech_open(c->model, so, &sp, &err)) return wm_cli_fail(c, &err);
    const char *task = wm_speech_task(sp);
    wm_json j;
    wm_json_init(&j);
    wm_json_obj(&j, NULL);
    wm_json_str(&j, "task", task);
    wm_json_arr(&j, "results");
    ranked *rk = NULL;
    int rc = WM_EXIT_OK;
    for (size_t r = 0; r < n_files; r++) {
        wm_speech_out o;
        if (wm_speech_run(sp, files[r], &o, &err)) goto fail;
        wm_json_obj(&j, NULL);
        wm_json_str(&j, "audio", files[r]);
        wm_json_num(&j, "seconds", (double)o.samples / o.rate);
        if (o.text) {
            wm_json_str(&j, "text", o.text);
            wm_json_uint(&j, "frames", o.frames);
        } else {
            ranked *nr = realloc(rk, (o.n ? o.n : 1) * sizeof *rk);
            if (!nr) {
                err.status = WM_ERR_NOMEM;
                snprintf(err.msg, sizeof err.msg, "out of memory");
                goto fail;
            }
            rk = nr;
            top_labels(&j, o.y, o.n, (size_t)top_k, rk, speech_label, sp);
        }
        wm_json_obj_end(&j);
    }
    wm_json_arr_end(&j);
    wm_json_obj_end(&j);
    rc = wm_cli_emit(c, c->model, &j);
    goto done;
fail:
    rc = wm_cli_fail(c, &err);
done:
    free(rk);
    wm_json_free(&j);
    wm_speech_free(sp);
    return rc;
}

int wm_cmd_run(int argc, char **argv) {
    wm_cli c;
    wm_cli_init(&c, "winml run");
    enum { O_TEXT = 256, O_PAIR, O_NONORM, O_THREADS, O_IMAGE, O_LABELS, O_TOPK, O_MAXPIX, O_AUDIO, O_LANG, O_TASK, O_TS };
    static const struct option longs[] = {WM_CLI_COMMON_LONG,
                                          {"text", required_argument, 0, O_TEXT},
                                          {"pair", required_argument, 0, O_PAIR},
                                          {"no-normalize", no_argument, 0, O_NONORM},
                                          {"threads", required_argument, 0, O_THREADS},
                                          {"image", required_argument, 0, O_IMAGE},
                                          {"labels", required_argument, 0, O_LABELS},
                                          {"top-k", required_argument, 0, O_TOPK},
                                          {"max-image-pixels", required_argument, 0, O_MAXPIX},
                                          {"audio", required_argument, 0, O_AUDIO},
                                          {"language", required_argument, 0, O_LANG},
                                          {"task", required_argument, 0, O_TASK},
                                          {"timestamps", no_argument, 0, O_TS},
                                          WM_WHISPER_FLAGS_LONG,
                                          WM_CLI_LIMITS_LONG,
                                          WM_CLI_TARGET_LONG,
                                          {0, 0, 0, 0}};
    const char *texts[WM_RUN_MAX_TEXTS], *pairs[256], *images[WM_RUN_MAX_TEXTS], *audio[WM_RUN_MAX_TEXTS], *labels = NULL;
    const char *language = NULL, *asr_task = NULL;
    size_t n_texts = 0, n_pairs = 0, n_images = 0, n_audio = 0;
    long top_k = 5, max_pix = 0;
    int image_flags = 0, top_flag = 0; /* --max-image-pixels, --top-k given */
    int normalize = 1, threads = 0, opt, timestamps = 0;
    wm_session_opts so = {0};
    wm_s2s_audio_args wa; /* the Whisper fallback flags */
    memset(&wa, 0, sizeof wa);
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":" WM_CLI_COMMON_SHORT WM_CLI_TARGET_SHORT, longs, NULL)) != -1) {
        switch (opt) {
        case 'h': help(); return WM_EXIT_OK;
        case O_TEXT:
            if (n_texts == WM_RUN_MAX_TEXTS) return wm_cli_usage_error(&c, "--text: at most %d texts", WM_RUN_MAX_TEXTS);
            texts[n_texts++] = optarg;
            break;
        case O_PAIR:
            if (n_pairs == 256) return wm_cli_usage_error(&c, "--pair: at most 256 passages");
            pairs[n_pairs++] = optarg;
            break;
        case O_NONORM: normalize = 0; break;
        case O_IMAGE:
            if (n_images == WM_RUN_MAX_TEXTS) return wm_cli_usage_error(&c, "--image: at most %d images", WM_RUN_MAX_TEXTS);
            images[n_images++] = optarg;
            break;
        case O_AUDIO:
            if (n_audio == WM_RUN_MAX_TEXTS) return wm_cli_usage_error(&c, "--audio: at most %d files", WM_RUN_MAX_TEXTS);
            audio[n_audio++] = optarg;
            break;
        case O_LABELS: labels = optarg; break;
        case O_LANG: language = optarg; break;
        case O_TS: timestamps = 1; break;
        case O_TASK:
            if (strcmp(optarg, "transcribe") && strcmp(optarg, "translate"))
                return wm_cli_usage_error(&c, "--task: expected transcribe or translate, got '%s'", optarg);
            asr_task = optarg;
            break;
        case O_TOPK:
            if (wm_cli_int_arg(&c, "--top-k", optarg, 1, 1000000, &top_k)) return WM_EXIT_ERROR;
            top_flag = 1;
            break;
        case O_MAXPIX:
            if (wm_cli_int_arg(&c, "--max-image-pixels", optarg, 1, 1L << 40, &max_pix)) return WM_EXIT_ERROR;
            image_flags = 1;
            break;
        case O_THREADS: {
            long v;
            if (wm_cli_int_arg(&c, "--threads", optarg, 0, 256, &v)) return WM_EXIT_ERROR;
            threads = (int)v;
            break;
        }
        default: {
            int lr = wm_cli_limits_opt(&c, opt, optarg, &so);
            if (lr < 0) return WM_EXIT_ERROR;
            if (lr) break;
            int w = wm_whisper_flag(&c, opt, optarg, &wa);
            if (w > 1) return w;
            if (w) break;
            int rc = wm_cli_other_opt(&c, opt, optarg, argv);
            if (rc) return rc;
        }
        }
    }
    if (optind < argc) return wm_cli_usage_error(&c, "unexpected argument '%s'", argv[optind]);
    if ((n_images != 0) + (n_texts || n_pairs) + (n_audio != 0) > 1)
        return wm_cli_usage_error(&c, "--image, --audio and --text/--pair: give images, audio files or texts, not two of them");
    if (!n_images && (image_flags || labels))
        return wm_cli_usage_error(&c, "--labels and --max-image-pixels apply to --image");
    if (!n_images && !n_audio && top_flag) return wm_cli_usage_error(&c, "--top-k applies to --image and --audio");
    /* the flags only a speech encoder-decoder (Whisper) takes */
    int whisper_flags = language || asr_task || timestamps || wa.temperature || wa.thr_set || wa.condition || wa.prompt ||
                        wa.all_segments || wa.seed_set;
    if (!n_audio && whisper_flags)
        return wm_cli_usage_error(&c, "--language, --task, --timestamps, --temperature, --seed, --prompt and the "
                                  "thresholds apply to --audio");
    if (c.model && n_images && wm_folder_is_s2s(c.model)) { /* an image encoder-decoder (TrOCR): texts */
        if (top_flag || labels)
            return wm_cli_usage_error(&c, "--top-k, --labels: an image encoder-decoder gives texts, not labels");
        wm_s2s_audio_args aa = {NULL, NULL, 0, 0, threads, 1, 0, 1, (uint64_t)max_pix};
        return wm_s2s_audio_cli(&c, images, n_images, &aa);
    }
    if (c.model && n_audio && wm_folder_is_s2s(c.model)) { /* a speech encoder-decoder (Whisper): transcripts */
        if (top_flag) return wm_cli_usage_error(&c, "--top-k: a speech encoder-decoder gives transcripts, not labels");
        wm_s2s_audio_args aa = {language, asr_task, 0, 0, threads, 1, timestamps, 0, 0,
                                wa.temperature, {wa.thr[0], wa.thr[1], wa.thr[2]}, wa.thr_set, wa.seed,
                                wa.condition, wa.prompt, wa.all_segments};
        return wm_s2s_audio_cli(&c, audio, n_audio, &aa);
    }
    /* a model that is not there is named as missing below, not as "not a Whisper build" */
    if (whisper_flags && (!c.model || !n_audio || access(c.model, F_OK) == 0))
        return wm_cli_usage_error(&c, "--language, --task, --timestamps, --temperature, --seed, --prompt and the "
                                  "thresholds apply to a "
                                  "speech encoder-decoder build (Whisper); %s is not one", c.model ? c.model : "-m");
    if (c.model && n_audio) {
        so.threads = threads;
        return run_audio(&c, &so, audio, n_audio, top_k);
    }
    if (c.model && n_images) {
        /* --labels "a cat,a dog": split at commas, spaces around each trimmed */
        const char *cand[WM_RUN_MAX_TEXTS];
        char *lcopy = labels ? strdup(labels) : NULL;
        size_t n_cand = 0;
        if (labels && !lcopy) return wm_cli_usage_error(&c, "out of memory");
        char *save = NULL;
        for (char *t = lcopy ? strtok_r(lcopy, ",", &save) : NULL; t; t = strtok_r(NULL, ",", &save)) {
            while (*t == ' ') t++;
            for (char *e = t + strlen(t); e > t && e[-1] == ' ';) *--e = 0;
            if (!*t || n_cand == WM_RUN_MAX_TEXTS) {
                free(lcopy);
                return wm_cli_usage_error(&c, "--labels: expected up to %d comma-separated labels, none empty",
                                          WM_RUN_MAX_TEXTS);
            }
            cand[n_cand++] = t;
        }
        if (labels && !n_cand) {
            free(lcopy);
            return wm_cli_usage_error(&c, "--labels: no label in '%s'", labels);
        }
        so.threads = threads;
        int rc = run_images(&c, &so, images, n_images, top_k, (uint64_t)max_pix, cand, n_cand);
        free(lcopy);
        return rc;
    }
    if (!c.model || !n_texts)
        return wm_cli_usage_error(&c, "-m BUILD_DIR and --text (or --image, --audio) are required");
    if (n_pairs && n_texts > 1)
        return wm_cli_usage_error(&c, "--pair scores passages against one query: give one --text (got %zu)", n_texts);
    wm_error err = {0};
    wm_encoder *e = NULL;
    so.threads = threads;
    if (wm_encoder_open(c.model, &so, &e, &err)) return wm_cli_fail(&c, &err);
    const char *task = wm_encoder_task(e);
    wm_json j;
    wm_json_init(&j);
    wm_json_obj(&j, NULL);
    wm_json_str(&j, "task", *task ? task : NULL);
    int rc = WM_EXIT_OK;
    size_t runs = n_pairs ? n_pairs : n_texts;
    ranked *rk = calloc(runs, sizeof *rk);
    int single = 0;
    if (!rk) {
        err.status = WM_ERR_NOMEM;
        goto fail;
    }
    wm_json_arr(&j, "results");
    for (size_t r = 0; r < runs; r++) {
        const float *y;
        size_t n;
        int pooled;
        const char *text = n_pairs ? texts[0] : texts[r];
        if (wm_encoder_run(e, text, n_pairs ? pairs[r] : NULL, normalize, &y, &n, &pooled, &err)) goto fail;
        int embedding = pooled || wm_recipe_task_served(task, NULL) == WM_TASK_FEATURE_EXTRACTION;
        wm_json_obj(&j, NULL);
        wm_json_str(&j, "text", text);
        if (n_pairs) wm_json_str(&j, "pair", pairs[r]);
        if (embedding) {
            wm_json_uint(&j, "dims", n);
            wm_json_arr(&j, "embedding");
            for (size_t i = 0; i < n; i++) wm_json_num(&j, NULL, y[i]);
            wm_json_arr_end(&j);
        } else if (n == 1) {
            single = 1;
            rk[r].i = r, rk[r].s = y[0];
            wm_json_num(&j, "score", y[0]);
        } else {
            double m = y[0], sum = 0;
            for (size_t i = 1; i < n; i++) m = y[i] > m ? y[i] : m;
            for (size_t i = 0; i < n; i++) sum += exp(y[i] - m);
            size_t best = 0;
            for (size_t i = 1; i < n; i++) best = y[i] > y[best] ? i : best;
            const char *bl = wm_encoder_label(e, best);
            char lb[32];
            snprintf(lb, sizeof lb, "LABEL_%zu", best);
            wm_json_str(&j, "label", bl ? bl : lb);
            wm_json_arr(&j, "scores");
            for (size_t i = 0; i < n; i++) {
                const char *l = wm_encoder_label(e, i);
                snprintf(lb, sizeof lb, "LABEL_%zu", i);
                wm_json_obj(&j, NULL);
                wm_json_str(&j, "label", l ? l : lb);
                wm_json_num(&j, "score", exp(y[i] - m) / sum);
                wm_json_num(&j, "logit", y[i]);
                wm_json_obj_end(&j);
            }
            wm_json_arr_end(&j);
        }
        wm_json_obj_end(&j);
    }
    wm_json_arr_end(&j);
    if (single && n_pairs > 1) { /* a reranker: passages by score */
        qsort(rk, runs, sizeof *rk, by_score);
        wm_json_arr(&j, "ranking");
        for (size_t r = 0; r < runs; r++) wm_json_int(&j, NULL, (int64_t)rk[r].i);
        wm_json_arr_end(&j);
    }
    wm_json_obj_end(&j);
    rc = wm_cli_emit(&c, c.model, &j);
    goto done;
fail:
    rc = wm_cli_fail(&c, &err);
done:
    free(rk);
    wm_json_free(&j);
    wm_encoder_free(e);
    return rc;
}

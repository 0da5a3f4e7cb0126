/* speech_s2s.c - log-mel features of audio files for a speech encoder-decoder folder (see speech_s2s.h). */
#include "tasks/speech_s2s.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audio/audio.h"
#include "audio/features.h"
#include "core/file.h"
#include "hf/config.h"

/* An integer field of o in [lo, hi] into *v (unchanged when absent or null). */
static wm_status int_field(const cJSON *o, const char *file, const char *key, double lo, double hi, int64_t *v,
                           wm_error *err) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!x || cJSON_IsNull(x)) return WM_OK;
    if (!cJSON_IsNumber(x) || x->valuedouble != (double)(int64_t)x->valuedouble || x->valuedouble < lo ||
        x->valuedouble > hi)
        return wm_err(err, WM_ERR_INPUT, "%s: field '%s': expected an integer from %.0f to %.0f", file, key, lo, hi);
    *v = (int64_t)x->valuedouble;
    return WM_OK;
}

/* The extractor's settings: preprocessor_config.json, else processor_config.json's "feature_extractor". */
static wm_status settings(const char *dir, int64_t n_mels, wm_logmel_opts *o, wm_error *err) {
    wm_logmel_opts_default(o);
    o->n_mels = (int)n_mels;
    static const char *const files[2] = {"preprocessor_config.json", "processor_config.json"};
    for (int f = 0; f < 2; f++) {
        char p[4200];
        int present = 0;
        snprintf(p, sizeof p, "%s/%s", dir, files[f]);
        wm_status s = wm_input_present(p, &present, err);
        if (s) return s;
        if (!present) continue;
        cJSON *root = NULL;
        if ((s = wm_hf_json_load(p, 1 << 20, &root, err))) return s;
        const cJSON *fe = f ? cJSON_GetObjectItemCaseSensitive(root, "feature_extractor") : root;
        int64_t rate = o->rate, nfft = o->n_fft, hop = o->hop, mels = n_mels, chunk = 30;
        if (f && !cJSON_IsObject(fe)) {
            cJSON_Delete(root);
            continue;
        }
        if (!(s = int_field(fe, p, "sampling_rate", 1000, 384000, &rate, err)) &&
            !(s = int_field(fe, p, "n_fft", 2, 65536, &nfft, err)) &&
            !(s = int_field(fe, p, "hop_length", 1, 65536, &hop, err)) &&
            !(s = int_field(fe, p, "feature_size", 1, 1024, &mels, err)))
            s = int_field(fe, p, "chunk_length", 1, 3600, &chunk, err);
        cJSON_Delete(root);
        if (s) return s;
        if (mels != n_mels)
            return wm_err(err, WM_ERR_INPUT, "%s: field 'feature_size': %lld mel bins, the encoder reads %lld", p,
                          (long long)mels, (long long)n_mels);
        o->rate = (int)rate, o->n_fft = (int)nfft, o->hop = (int)hop;
        /* transformers recomputes n_samples from chunk_length (a saved "n_samples" is not read back) */
        o->n_samples = (size_t)(chunk * rate);
        if (o->n_samples <= (size_t)o->n_fft / 2)
            return wm_err(err, WM_ERR_INPUT, "%s: field 'n_fft': %d is not under twice the %zu samples of a chunk", p,
                          o->n_fft, o->n_samples);
        if ((double)o->n_samples / (double)o->hop * (double)n_mels > WM_SPEECH_S2S_MAX_FEATURES)
            return wm_err(err, WM_ERR_INPUT, "%s: field 'hop_length': %d over chunk_length %lld s at %lld Hz gives "
                          "%zu frames x %lld mel bins, over the bound of %d values a file", p, o->hop,
                          (long long)chunk, (long long)rate, o->n_samples / (size_t)o->hop, (long long)n_mels,
                          WM_SPEECH_S2S_MAX_FEATURES);
        break;
    }
    return WM_OK;
}

/* wm_speech_s2s_features over files, or (mem set) over mem[i], sizes[i] encoded bytes that files[i] names. */
static wm_status features(const char *dir, int64_t n_mels, const char *const *files, const uint8_t *const *mem,
                          const size_t *sizes, size_t n, float **feats, int64_t *frames, int64_t *valid,
                          double *seconds, wm_error *err) {
    *feats = NULL;
    *frames = 0;
    wm_logmel_opts o;
    wm_status s = settings(dir, n_mels, &o, err);
    if (s) return s;
    wm_audio *a = calloc(n ? n : 1, sizeof *a);
    if (!a) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    size_t longest = 0;
    for (size_t i = 0; i < n && !s; i++) {
        if ((s = mem ? wm_audio_decode(mem[i], sizes[i], files[i], o.rate, 0, &a[i], err)
                     : wm_audio_load(files[i], o.rate, 0, &a[i], err)))
            break;
        if (seconds) seconds[i] = (double)a[i].n / a[i].rate;
        longest = a[i].n > longest ? a[i].n : longest;
        if ((double)a[i].n / o.hop * (double)n_mels > WM_SPEECH_S2S_MAX_FEATURES)
            s = wm_err(err, WM_ERR_INPUT, "%s: %.1f s of audio gives %zu frames x %lld mel bins, over the bound of "
                       "%d values a file", files[i], (double)a[i].n / a[i].rate, a[i].n / (size_t)o.hop,
                       (long long)n_mels, WM_SPEECH_S2S_MAX_FEATURES);
    }
    /* longer than a chunk: the whole batch padded with zeros to the longest file (padding="longest",
       truncation=False), each row's valid frames its attention mask's sum */
    int whole = longest > o.n_samples;
    if (whole) o.n_samples = longest;
    float *all = NULL;
    size_t per = 0, fr = 0;
    for (size_t i = 0; i < n && !s; i++) {
        float *mel = NULL;
        size_t f = 0;
        if ((s = wm_logmel(a[i].samples, a[i].n, &o, &mel, &f, err))) break;
        if (!all) {
            fr = f, per = (size_t)n_mels * f;
            if (!(all = malloc(n * per * sizeof *all))) s = wm_err(err, WM_ERR_NOMEM, "out of memory");
        }
        if (!s) memcpy(all + i * per, mel, per * sizeof *all); /* every file gives n_samples / hop frames */
        free(mel);
        if (valid) { /* the sample mask taken every hop samples, the last step dropped when not whole */
            size_t v = whole ? (a[i].n + (size_t)o.hop - 1) / (size_t)o.hop : fr;
            valid[i] = (int64_t)(v < fr ? v : fr);
        }
    }
    for (size_t i = 0; i < n; i++) wm_audio_free(&a[i]);
    free(a);
    if (s) {
        free(all);
        return s;
    }
    *feats = all;
    *frames = (int64_t)fr;
    return WM_OK;
}

wm_status wm_speech_s2s_features(const char *dir, int64_t n_mels, const char *const *files, size_t n, float **feats,
                                 int64_t *frames, int64_t *valid, double *seconds, wm_error *err) {
    return features(dir, n_mels, files, NULL, NULL, n, feats, frames, valid, seconds, err);
}

wm_status wm_speech_s2s_features_bytes(const char *dir, int64_t n_mels, const char *name, const uint8_t *data,
                                       size_t size, float **feats, int64_t *frames, int64_t *valid, double *seconds,
                                       wm_error *err) {
    static const uint8_t none = 0;
    const uint8_t *mem = data ? data : &none;
    return features(dir, n_mels, &name, &mem, &size, 1, feats, frames, valid, seconds, err);
}

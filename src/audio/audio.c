/*
 * audio.c - decode (libsndfile over our mapping), mono mixdown, resample (libsoxr HQ). See audio.h.
 */
#include "audio/audio.h"

#include <math.h>
#include <sndfile.h>
#include <soxr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/file.h"

#define MAX_RATE 768000

/* ------------------------------------------------------------ libsndfile's virtual I/O over bytes */

typedef struct vbuf {
    const uint8_t *p;
    sf_count_t n, pos;
} vbuf;

static sf_count_t v_len(void *u) { return ((vbuf *)u)->n; }

static sf_count_t v_seek(sf_count_t off, int whence, void *u) {
    vbuf *v = u;
    sf_count_t base = whence == SEEK_CUR ? v->pos : whence == SEEK_END ? v->n : 0;
    if ((off > 0 && base > v->n - off) || base + off < 0) return -1;
    v->pos = base + off;
    return v->pos;
}

static sf_count_t v_read(void *dst, sf_count_t count, void *u) {
    vbuf *v = u;
    if (count <= 0 || v->pos >= v->n) return 0;
    sf_count_t k = count < v->n - v->pos ? count : v->n - v->pos;
    memcpy(dst, v->p + v->pos, (size_t)k);
    v->pos += k;
    return k;
}

static sf_count_t v_write(const void *src, sf_count_t count, void *u) {
    (void)src, (void)count, (void)u;
    return 0;
}

static sf_count_t v_tell(void *u) { return ((vbuf *)u)->pos; }

/* ------------------------------------------------------------ decode */

/* "major / subtype" names of the file's format, as libsndfile calls them. */
static void format_name(int format, char *out, size_t n) {
    SF_FORMAT_INFO maj = {.format = format & SF_FORMAT_TYPEMASK}, sub = {.format = format & SF_FORMAT_SUBMASK};
    const char *a = sf_command(NULL, SFC_GET_FORMAT_INFO, &maj, sizeof maj) == 0 && maj.name ? maj.name : "?";
    const char *b = sf_command(NULL, SFC_GET_FORMAT_INFO, &sub, sizeof sub) == 0 && sub.name ? sub.name : "?";
    snprintf(out, n, "%s / %s", a, b);
}

/* Every frame of snd (at most max_frames) averaged over its channels into *mono (malloc'ed), *n frames. */
static wm_status read_mono(SNDFILE *snd, const SF_INFO *info, sf_count_t max_frames, const char *label, float **mono,
                           size_t *n, wm_error *err) {
    const sf_count_t chunk = 16384;
    int ch = info->channels;
    float *buf = malloc((size_t)chunk * (size_t)ch * sizeof *buf);
    /* the header's frame count is a claim: reserve at most 1 Mi frames up front, grow as frames really arrive */
    const sf_count_t reserve = (sf_count_t)1 << 20;
    size_t cap = info->frames > 0 && info->frames <= max_frames ? (size_t)(info->frames < reserve ? info->frames : reserve)
                                                                : (size_t)chunk,
           len = 0;
    float *out = malloc((cap ? cap : 1) * sizeof *out);
    wm_status s = WM_OK;
    if (!buf || !out) s = wm_err(err, WM_ERR_NOMEM, "%s: out of memory", label);
    while (!s) {
        sf_count_t got = sf_readf_float(snd, buf, chunk);
        if (got <= 0) break;
        if ((sf_count_t)len + got > max_frames) {
            s = wm_err(err, WM_ERR_INPUT, "%s: longer than the %lld frames (%.0f s) allowed", label,
                       (long long)max_frames, (double)max_frames / info->samplerate);
            break;
        }
        if (len + (size_t)got > cap) {
            size_t nc = cap * 2 > len + (size_t)got ? cap * 2 : len + (size_t)got;
            float *o = realloc(out, nc * sizeof *o);
            if (!o) {
                s = wm_err(err, WM_ERR_NOMEM, "%s: out of memory", label);
                break;
            }
            out = o, cap = nc;
        }
        for (sf_count_t f = 0; f < got; f++) {
            double acc = 0;
            for (int c = 0; c < ch; c++) acc += buf[(size_t)f * (size_t)ch + (size_t)c];
            out[len + (size_t)f] = (float)(acc / ch);
        }
        len += (size_t)got;
    }
    if (!s && sf_error(snd) != SF_ERR_NO_ERROR)
        s = wm_err(err, WM_ERR_INPUT, "%s: decoding failed: %s", label, sf_strerror(snd));
    if (!s && len == 0) s = wm_err(err, WM_ERR_INPUT, "%s: no audio frames", label);
    free(buf);
    if (s) {
        free(out);
        return s;
    }
    *mono = out, *n = len;
    return WM_OK;
}

/* in (n at from Hz) resampled to to Hz by libsoxr HQ into *out (malloc'ed), *m samples. */
static wm_status resample(const float *in, size_t n, int from, int to, const char *label, float **out, size_t *m,
                          wm_error *err) {
    size_t olen = (size_t)((double)n * to / from + 0.5);
    float *o = malloc((olen ? olen : 1) * sizeof *o);
    if (!o) return wm_err(err, WM_ERR_NOMEM, "%s: out of memory", label);
    soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
    soxr_quality_spec_t q = soxr_quality_spec(SOXR_HQ, 0);
    size_t done = 0;
    soxr_error_t e = soxr_oneshot(from, to, 1, in, n, NULL, o, olen, &done, &io, &q, NULL);
    if (e) {
        free(o);
        return wm_err(err, WM_ERR_INPUT, "%s: resampling %d -> %d Hz failed: %s", label, from, to, e);
    }
    *out = o, *m = done;
    return WM_OK;
}

wm_status wm_audio_decode(const uint8_t *data, size_t size, const char *label, int rate, double max_seconds,
                          wm_audio *out, wm_error *err) {
    memset(out, 0, sizeof *out);
    if (!label) label = "audio";
    if (rate < 0 || rate > MAX_RATE) return wm_err(err, WM_ERR_USAGE, "%s: target rate %d Hz is out of range", label, rate);
    if (!(max_seconds > 0)) max_seconds = WM_AUDIO_DEFAULT_MAX_SECONDS;
    vbuf v = {data, (sf_count_t)size, 0};
    SF_VIRTUAL_IO vio = {v_len, v_seek, v_read, v_write, v_tell};
    SF_INFO info;
    memset(&info, 0, sizeof info);
    SNDFILE *snd = size ? sf_open_virtual(&vio, SFM_READ, &info, &v) : NULL;
    if (!snd)
        return wm_err(err, WM_ERR_INPUT, "%s: not an audio file libsndfile reads (WAV, FLAC, OGG, AIFF ...): %s", label,
                      size ? sf_strerror(NULL) : "empty file");
    wm_status s = WM_OK;
    if (info.channels < 1 || info.channels > WM_AUDIO_MAX_CHANNELS)
        s = wm_err(err, WM_ERR_INPUT, "%s: %d channels (at most %d are read)", label, info.channels, WM_AUDIO_MAX_CHANNELS);
    else if (info.samplerate < 1 || info.samplerate > MAX_RATE)
        s = wm_err(err, WM_ERR_INPUT, "%s: sample rate %d Hz is out of range (1 .. %d)", label, info.samplerate, MAX_RATE);
    sf_count_t max_frames = (sf_count_t)(max_seconds * (info.samplerate > 0 ? info.samplerate : 1));
    if (!s && info.frames > max_frames && info.frames != SF_COUNT_MAX)
        s = wm_err(err, WM_ERR_INPUT, "%s: %.1f s of audio, over the %.0f s allowed", label,
                   (double)info.frames / info.samplerate, max_seconds);
    float *mono = NULL;
    size_t n = 0;
    if (!s) s = read_mono(snd, &info, max_frames, label, &mono, &n, err);
    if (!s) {
        format_name(info.format, out->format, sizeof out->format);
        out->src_rate = info.samplerate, out->src_channels = info.channels;
        out->rate = rate ? rate : info.samplerate;
        if (out->rate != info.samplerate) {
            float *r = NULL;
            s = resample(mono, n, info.samplerate, out->rate, label, &r, &out->n, err);
            free(mono);
            mono = r;
        } else out->n = n;
        out->samples = mono;
    }
    sf_close(snd);
    if (s) {
        free(mono);
        memset(out, 0, sizeof *out);
    }
    return s;
}

wm_status wm_audio_load(const char *path, int rate, double max_seconds, wm_audio *out, wm_error *err) {
    memset(out, 0, sizeof *out);
    wm_map m;
    wm_status s = wm_map_file(path, 0, &m, err);
    if (s) return s;
    s = wm_audio_decode(m.data, m.size, path, rate, max_seconds, out, err);
    wm_unmap(&m);
    return s;
}

void wm_audio_free(wm_audio *a) {
    if (!a) return;
    free(a->samples);
    memset(a, 0, sizeof *a);
}

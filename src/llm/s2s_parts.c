/*
 * s2s_parts.c - greedy generation over the reference's encoder-decoder part builds (src/builder/recipe_s2s.c; see
 * s2s_parts.h): the encoder part runs once on the source padded to its static length, the decoder part one token a
 * step with its static self-attention cache of T slots (present fed back as past, cache_position the step,
 * decoder_attention_mask the slots written so far).
 */
#include "llm/s2s_parts.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/file.h"
#include "onnx/dtype.h"

#define MAX_PART_LAYERS 128

struct wm_s2s_parts {
    wm_session *enc, *dec;
    int layers;
    int64_t se, width, T, heads, hd, vocab;
    char enc_dir[4096];
};

static wm_tensor tensor(int32_t dt, int rank, const int64_t *dims, void *data) {
    wm_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.rank = rank;
    for (int i = 0; i < rank; i++) t.dims[i] = dims[i];
    t.data = data;
    return t;
}

/* The static dims of input name of s into dims (rank want); -1 when absent or not static. */
static int static_dims(const wm_session *s, const char *name, int want, int64_t *dims) {
    int i = wm_session_input_index(s, name);
    if (i < 0) return -1;
    const wm_io_info *in = wm_session_input(s, (size_t)i);
    if (in->rank != want) return -1;
    for (int k = 0; k < want; k++) {
        if (in->dims[k] <= 0) return -1;
        dims[k] = in->dims[k];
    }
    return 0;
}

wm_status wm_s2s_parts_open(const char *enc_dir, const char *dec_dir, int threads, wm_s2s_parts **out,
                            wm_error *err) {
    *out = NULL;
    wm_s2s_parts *p = calloc(1, sizeof *p);
    if (!p) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    snprintf(p->enc_dir, sizeof p->enc_dir, "%s", enc_dir);
    wm_session_opts so = {0};
    so.threads = threads;
    const char *dirs[2] = {enc_dir, dec_dir};
    wm_session **ss[2] = {&p->enc, &p->dec};
    wm_status st = WM_OK;
    for (int i = 0; i < 2 && !st; i++) {
        char path[4200];
        int present = 0;
        snprintf(path, sizeof path, "%s/model.onnx", dirs[i]);
        if (!(st = wm_input_present(path, &present, err)) && !present)
            st = wm_err(err, WM_ERR_INPUT, "%s: missing: a part build holds model.onnx", path);
        if (!st) st = wm_session_new(path, &so, ss[i], err);
    }
    int64_t d2[2] = {0, 0}, d3[3] = {0, 0, 0}, d4[4] = {0, 0, 0, 0};
    if (!st && (static_dims(p->enc, "input_ids", 2, d2) || wm_session_input_index(p->enc, "attention_mask") < 0 ||
                wm_session_output_index(p->enc, "encoder_hidden_states") < 0))
        st = wm_err(err, WM_ERR_UNSUPPORTED, "%s/model.onnx: not a text encoder part (input_ids [1, seq] and "
                    "attention_mask static, output encoder_hidden_states)", enc_dir);
    if (!st) p->se = d2[1];
    if (!st && (static_dims(p->dec, "decoder_input_ids", 2, d2) || d2[0] != 1 || d2[1] != 1 ||
                static_dims(p->dec, "encoder_hidden_states", 3, d3) || d3[1] != p->se ||
                static_dims(p->dec, "decoder_attention_mask", 2, d2) || static_dims(p->dec, "past_0_key", 4, d4) ||
                wm_session_input_index(p->dec, "cache_position") < 0 || wm_session_output_index(p->dec, "logits") < 0))
        st = wm_err(err, WM_ERR_UNSUPPORTED, "%s/model.onnx: not a decoder part for this encoder (decoder_input_ids "
                    "[1, 1], encoder_hidden_states [1, %lld, width], decoder_attention_mask [1, T], cache_position, "
                    "past_N_key / past_N_value [1, heads, T, head_dim], logits)", dec_dir, (long long)p->se);
    if (!st) {
        p->width = d3[2], p->T = d2[1], p->heads = d4[1], p->hd = d4[3];
        const wm_io_info *lo = wm_session_output(p->dec, (size_t)wm_session_output_index(p->dec, "logits"));
        p->vocab = lo->rank == 3 ? lo->dims[2] : -1;
        for (; p->layers < MAX_PART_LAYERS; p->layers++) {
            char n[64];
            snprintf(n, sizeof n, "past_%d_key", p->layers);
            if (wm_session_input_index(p->dec, n) < 0) break;
        }
        if (p->vocab <= 0 || d4[2] != p->T)
            st = wm_err(err, WM_ERR_UNSUPPORTED, "%s/model.onnx: logits [1, 1, vocab] and past [.., T, ..] must be "
                        "static", dec_dir);
    }
    if (st) {
        wm_s2s_parts_free(p);
        return st;
    }
    *out = p;
    return WM_OK;
}

void wm_s2s_parts_free(wm_s2s_parts *p) {
    if (!p) return;
    wm_session_free(p->enc);
    wm_session_free(p->dec);
    free(p);
}

/* An integer tensor of n values v into buf as input name of s wants it (int32 or int64). */
static wm_tensor int_input(const wm_session *s, const char *name, int rank, const int64_t *dims, const int64_t *v,
                           size_t n, void *buf) {
    const wm_io_info *in = wm_session_input(s, (size_t)wm_session_input_index(s, name));
    if (in->dtype == WM_DT_INT32) {
        for (size_t i = 0; i < n; i++) ((int32_t *)buf)[i] = (int32_t)v[i];
        return tensor(WM_DT_INT32, rank, dims, buf);
    }
    memcpy(buf, v, n * sizeof *v);
    return tensor(WM_DT_INT64, rank, dims, buf);
}

/* Runs s with every input taken by name from names/ts. */
static wm_status run_by_name(wm_session *s, const char *const *names, const wm_tensor *ts, size_t n,
                             wm_tensor *outs, wm_error *err) {
    size_t ni = wm_session_n_inputs(s);
    wm_tensor *in = calloc(ni ? ni : 1, sizeof *in);
    if (!in) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    wm_status st = WM_OK;
    for (size_t i = 0; i < ni && !st; i++) {
        size_t k = 0;
        while (k < n && strcmp(names[k], wm_session_input(s, i)->name)) k++;
        if (k == n) st = wm_err(err, WM_ERR_UNSUPPORTED, "part input '%s' is not one the runner feeds",
                                wm_session_input(s, i)->name);
        else in[i] = ts[k];
    }
    if (!st) st = wm_session_run(s, in, ni, outs, wm_session_n_outputs(s), err);
    free(in);
    return st;
}

wm_status wm_s2s_parts_generate(wm_s2s_parts *p, const int64_t *ids, int64_t n, const wm_s2s_gen *g, int64_t **out,
                                int64_t *width, wm_error *err) {
    *out = NULL;
    *width = 0;
    if (n < 1 || n > p->se)
        return wm_err(err, WM_ERR_USAGE, "%lld source tokens: the encoder part takes 1 to %lld (its static length)",
                      (long long)n, (long long)p->se);
    if (g->num_beams != 1)
        return wm_err(err, WM_ERR_UNSUPPORTED, "num_beams %d: a part build runs greedy search only (batch 1)",
                      g->num_beams);
    if (g->decoder_start_token_id < 0 || g->decoder_start_token_id >= p->vocab)
        return wm_err(err, WM_ERR_USAGE, "decoder_start_token_id %lld: not in the vocabulary of %lld",
                      (long long)g->decoder_start_token_id, (long long)p->vocab);
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= INT32_MAX)
            return wm_err(err, WM_ERR_USAGE, "source token %lld: not a token id", (long long)ids[i]);
    int64_t L = g->max_length < p->T + 1 ? g->max_length : p->T + 1; /* the start token + one token a slot */
    if (L < 2) return wm_err(err, WM_ERR_USAGE, "max_length %lld: no room for a token", (long long)g->max_length);
    const int64_t se = p->se, T = p->T, per = p->heads * T * p->hd, pad = g->pad_token_id >= 0 ? g->pad_token_id : 0;
    int64_t *src = malloc((size_t)se * sizeof *src), *mask = malloc((size_t)se * sizeof *mask);
    int64_t *seq = malloc((size_t)L * sizeof *seq), *dmask = malloc((size_t)T * sizeof *dmask);
    void *b_ids = malloc((size_t)se * 8), *b_mask = malloc((size_t)se * 8), *b_dm = malloc((size_t)T * 8);
    float *h = malloc((size_t)(se * p->width) * sizeof *h), *cache = calloc((size_t)(2 * p->layers * per), sizeof *cache);
    float *sc = malloc((size_t)p->vocab * sizeof *sc);
    const char **names = calloc((size_t)(5 + 2 * p->layers), sizeof *names);
    wm_tensor *ts = calloc((size_t)(5 + 2 * p->layers), sizeof *ts), eo[4];
    wm_tensor *outs = calloc(wm_session_n_outputs(p->dec), sizeof *outs);
    char(*pn)[48] = calloc((size_t)(2 * p->layers), 48);
    wm_status st = WM_OK;
    if (!src || !mask || !seq || !dmask || !b_ids || !b_mask || !b_dm || !h || !cache || !sc || !names || !ts || !outs ||
        !pn || wm_session_n_outputs(p->enc) > 4) {
        st = wm_err(err, WM_ERR_NOMEM, "out of memory (or an encoder part with more than one output)");
        goto done;
    }
    for (int64_t i = 0; i < se; i++) src[i] = i < n ? ids[i] : pad, mask[i] = i < n;
    int64_t de[2] = {1, se};
    const char *en[2] = {"input_ids", "attention_mask"};
    wm_tensor et[2] = {int_input(p->enc, "input_ids", 2, de, src, (size_t)se, b_ids),
                       int_input(p->enc, "attention_mask", 2, de, mask, (size_t)se, b_mask)};
    if ((st = run_by_name(p->enc, en, et, 2, eo, err))) goto done;
    const wm_tensor *eh = &eo[wm_session_output_index(p->enc, "encoder_hidden_states")];
    if (eh->dtype != WM_DT_FLOAT || wm_tensor_numel(eh) != (uint64_t)(se * p->width)) {
        st = wm_err(err, WM_ERR_UNSUPPORTED, "%s/model.onnx: encoder_hidden_states is not float [1, %lld, %lld]",
                    p->enc_dir, (long long)se, (long long)p->width);
        goto done;
    }
    memcpy(h, eh->data, (size_t)(se * p->width) * sizeof *h);
    seq[0] = g->decoder_start_token_id;
    int64_t cur = 1, tok32buf[2], one[2] = {1, 1}, dh[3] = {1, se, p->width}, dt[2] = {1, T}, d1[1] = {1};
    int64_t dc[4] = {1, p->heads, T, p->hd};
    int32_t i32[2];
    while (cur < L) {
        int64_t t = cur - 1, pos = t;
        size_t k = 0;
        for (int64_t s = 0; s < T; s++) dmask[s] = s <= t;
        names[k] = "decoder_input_ids";
        ts[k++] = int_input(p->dec, "decoder_input_ids", 2, one, &seq[cur - 1], 1, tok32buf);
        names[k] = "encoder_hidden_states", ts[k++] = tensor(WM_DT_FLOAT, 3, dh, h);
        if (wm_session_input_index(p->dec, "attention_mask") >= 0) /* the encoder's mask, when the part reads it */
            names[k] = "attention_mask", ts[k++] = int_input(p->dec, "attention_mask", 2, de, mask, (size_t)se, b_mask);
        names[k] = "decoder_attention_mask";
        ts[k++] = int_input(p->dec, "decoder_attention_mask", 2, dt, dmask, (size_t)T, b_dm);
        names[k] = "cache_position", ts[k++] = int_input(p->dec, "cache_position", 1, d1, &pos, 1, i32);
        for (int l = 0; l < 2 * p->layers; l++) {
            snprintf(pn[l], 48, "past_%d_%s", l / 2, l % 2 ? "value" : "key");
            names[k] = pn[l], ts[k++] = tensor(WM_DT_FLOAT, 4, dc, cache + l * per);
        }
        if ((st = run_by_name(p->dec, names, ts, k, outs, err))) break;
        const wm_tensor *lo = &outs[wm_session_output_index(p->dec, "logits")];
        if (wm_tensor_numel(lo) < (uint64_t)p->vocab) {
            st = wm_err(err, WM_ERR_UNSUPPORTED, "decoder part: logits smaller than the vocabulary");
            break;
        }
        memcpy(sc, (const float *)lo->data + wm_tensor_numel(lo) - (uint64_t)p->vocab, (size_t)p->vocab * sizeof *sc);
        for (int l = 0; l < 2 * p->layers; l++) {
            char on[48];
            snprintf(on, sizeof on, "present_%d_%s", l / 2, l % 2 ? "value" : "key");
            int o = wm_session_output_index(p->dec, on);
            if (o < 0 || wm_tensor_numel(&outs[o]) != (uint64_t)per) {
                st = wm_err(err, WM_ERR_UNSUPPORTED, "decoder part: output '%s' missing or not [1, %lld, %lld, %lld]",
                            on, (long long)p->heads, (long long)T, (long long)p->hd);
                break;
            }
            memcpy(cache + l * per, outs[o].data, (size_t)per * sizeof *cache);
        }
        if (st) break;
        wm_s2s_process_scores(g, seq, cur, 1, sc, p->vocab);
        int64_t best = 0;
        for (int64_t v = 1; v < p->vocab; v++)
            if (sc[v] > sc[best]) best = v;
        seq[cur++] = best;
        int end = 0;
        for (size_t e = 0; e < g->n_eos; e++) end |= g->eos[e] == best;
        if (end) break;
    }
    if (!st) {
        *out = seq, *width = cur;
        seq = NULL;
    }
done:
    free(src), free(mask), free(seq), free(dmask), free(b_ids), free(b_mask), free(b_dm), free(h), free(cache);
    free(sc), free(names), free(ts), free(outs), free(pn);
    return st;
}

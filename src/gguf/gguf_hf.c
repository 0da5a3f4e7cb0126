/*
 * gguf_hf.c - a GGUF as a Hugging Face checkpoint (see gguf_hf.h): the
 * architecture, config-key and tensor-name tables, the config.json made
 * from the metadata, and the float32 tensor views.
 */
#define _GNU_SOURCE
#include "gguf/gguf_hf.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/json.h"

/* ------------------------------------------------------------------ tables */

/* what is done to a tensor's values on the way (llama.cpp's converter did the opposite) */
enum { XF_NONE, XF_PERM_Q, XF_PERM_K, XF_MINUS_ONE };
static const char *const xf_names[] = {"", "Q/K rows un-permuted", "Q/K rows un-permuted", "norm weight - 1"};

/* A tensor role: llama.cpp's name (after "blk.N." for a layer) -> the Hugging Face name (%d: the layer). */
typedef struct tname {
    uint8_t layer;
    const char *gguf, *hf;
    uint8_t xform;
} tname;

#define G(g, h, x) {0, g, h, x}
#define L(g, h, x) {1, g, "model.layers.%d." h, x}

/* Dense decoders: llama.cpp's names onto transformers' llama-style names (shared by every table below). */
static const tname dense_rows[] = {
    G("token_embd", "model.embed_tokens", XF_NONE),
    G("output_norm", "model.norm", XF_NONE),
    G("output", "lm_head", XF_NONE),
    L("attn_norm", "input_layernorm", XF_NONE),
    L("attn_q", "self_attn.q_proj", XF_NONE),
    L("attn_k", "self_attn.k_proj", XF_NONE),
    L("attn_v", "self_attn.v_proj", XF_NONE),
    L("attn_output", "self_attn.o_proj", XF_NONE),
    L("attn_q_norm", "self_attn.q_norm", XF_NONE),
    L("attn_k_norm", "self_attn.k_norm", XF_NONE),
    L("ffn_norm", "post_attention_layernorm", XF_NONE),
    L("ffn_gate", "mlp.gate_proj", XF_NONE),
    L("ffn_up", "mlp.up_proj", XF_NONE),
    L("ffn_down", "mlp.down_proj", XF_NONE),
};

/* llama: the converter permutes the rows of Q and K (weights and biases) for its rotary layout. */
static const tname llama_rows[] = {
    L("attn_q", "self_attn.q_proj", XF_PERM_Q),
    L("attn_k", "self_attn.k_proj", XF_PERM_K),
};

/* Gemma 3: four norms per layer, and the converter stores every norm weight as w + 1 (Gemma's RMSNorm
   scales by 1 + w). */
static const tname gemma3_rows[] = {
    G("output_norm", "model.norm", XF_MINUS_ONE),
    L("attn_norm", "input_layernorm", XF_MINUS_ONE),
    L("post_attention_norm", "post_attention_layernorm", XF_MINUS_ONE),
    L("ffn_norm", "pre_feedforward_layernorm", XF_MINUS_ONE),
    L("post_ffw_norm", "post_feedforward_layernorm", XF_MINUS_ONE),
    L("attn_q_norm", "self_attn.q_norm", XF_MINUS_ONE),
    L("attn_k_norm", "self_attn.k_norm", XF_MINUS_ONE),
};

/* Phi-3: fused q/k/v and fused gate/up (gate first), as in transformers' Phi3. */
static const tname phi3_rows[] = {
    L("attn_qkv", "self_attn.qkv_proj", XF_NONE),
    L("ffn_up", "mlp.gate_up_proj", XF_NONE),
};

#define N(a) (sizeof(a) / sizeof((a)[0]))

typedef struct garch {
    const char *arch;       /* general.architecture */
    const char *model_type; /* config.json model_type */
    const char *hf_class;   /* config.json architectures[0] */
    const tname *rows;      /* looked up before dense_rows */
    size_t n_rows;
    int swa_period;         /* llama.cpp's fixed pattern: layer i uses full attention when (i + 1) % period == 0 */
} garch;

static const garch archs[] = {
    {"llama", "llama", "LlamaForCausalLM", llama_rows, N(llama_rows), 0},
    {"qwen2", "qwen2", "Qwen2ForCausalLM", NULL, 0, 0},
    {"qwen3", "qwen3", "Qwen3ForCausalLM", NULL, 0, 0},
    {"phi3", "phi3", "Phi3ForCausalLM", phi3_rows, N(phi3_rows), 0},
    {"gemma3", "gemma3_text", "Gemma3ForCausalLM", gemma3_rows, N(gemma3_rows), 6},
};

/* <arch>.KEY -> config.json key. Integer ranges are the config parser's. */
enum { K_INT, K_NUM, K_POS, K_EPS };
typedef struct ckey {
    const char *gguf, *hf;
    int kind;
    int64_t lo, hi;
} ckey;

static const ckey ckeys[] = {
    {"context_length", "max_position_embeddings", K_INT, 1, INT32_MAX},
    {"embedding_length", "hidden_size", K_INT, 1, 1 << 20},
    {"block_count", "num_hidden_layers", K_INT, 1, 4096},
    {"feed_forward_length", "intermediate_size", K_INT, 1, 1 << 22},
    {"attention.head_count", "num_attention_heads", K_INT, 1, 1 << 16},
    {"attention.head_count_kv", "num_key_value_heads", K_INT, 1, 1 << 16},
    {"attention.key_length", "head_dim", K_INT, 1, 1 << 16},
    {"attention.sliding_window", "sliding_window", K_INT, 1, INT32_MAX},
    {"vocab_size", "vocab_size", K_INT, 1, INT32_MAX},
    {"attention.layer_norm_rms_epsilon", "rms_norm_eps", K_EPS, 0, 0},
    {"attention.layer_norm_epsilon", "layer_norm_eps", K_EPS, 0, 0},
    {"rope.freq_base", "rope_theta", K_POS, 0, 0},
    /* settings the builder refuses through its config-key table (they change the math) */
    {"attn_logit_softcapping", "attn_logit_softcapping", K_NUM, 0, 0},
    {"final_logit_softcapping", "final_logit_softcapping", K_NUM, 0, 0},
    {"expert_count", "num_local_experts", K_INT, 0, INT32_MAX},
};

static const garch *find_arch(const char *name) {
    for (size_t i = 0; i < N(archs); i++)
        if (!strcmp(archs[i].arch, name)) return &archs[i];
    return NULL;
}

const char *wm_gguf_model_type(const char *arch) {
    const garch *g = arch ? find_arch(arch) : NULL;
    return g ? g->model_type : NULL;
}

const char *wm_gguf_arch_list(void) {
    static char list[256];
    if (!list[0]) {
        size_t n = 0;
        for (size_t i = 0; i < N(archs) && n < sizeof list; i++)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", archs[i].arch);
    }
    return list;
}

static const tname *find_row(const garch *g, int layer, const char *leaf) {
    for (size_t i = 0; i < g->n_rows; i++)
        if (g->rows[i].layer == layer && !strcmp(g->rows[i].gguf, leaf)) return &g->rows[i];
    for (size_t i = 0; i < N(dense_rows); i++)
        if (dense_rows[i].layer == layer && !strcmp(dense_rows[i].gguf, leaf)) return &dense_rows[i];
    return NULL;
}

/* ------------------------------------------------------------------ the tensor views */

typedef struct vt {
    wm_st_source src;
    const wm_gguf_tensor *g;
    uint64_t cols;   /* elements per row of the view: ne[0], or 1 for a permuted vector */
    uint64_t rows;   /* rows of the view */
    uint64_t heads;  /* permuted: heads whose rows are interleaved */
    uint8_t xform;
} vt;

typedef struct owner {
    wm_gguf_file *f;
    vt *v;
} owner;

static void owner_free(void *p) {
    owner *o = p;
    if (!o) return;
    wm_gguf_close(o->f);
    free(o->v);
    free(o);
}

/* HF row r of a permuted Q/K: llama.cpp stored the rows of each head pairwise interleaved. */
static uint64_t perm_row(const vt *v, uint64_t r) {
    uint64_t hd = v->rows / v->heads, half = hd / 2, w = r % hd;
    return r - w + 2 * (w % half) + w / half;
}

static void vt_read(const void *ctx, uint64_t first, size_t n, float *dst) {
    const vt *v = ctx;
    const wm_gguf_tensor *g = v->g;
    int perm = v->xform == XF_PERM_Q || v->xform == XF_PERM_K;
    float *out = dst;
    for (size_t left = n; left;) {
        uint64_t r = first / v->cols, c = first % v->cols;
        size_t k = v->cols - c < left ? (size_t)(v->cols - c) : left;
        uint64_t sr = perm ? perm_row(v, r) : r;
        if (v->cols == 1) wm_ggml_dequant_range(g->type, g->data, sr, 1, out); /* an element of a vector */
        else wm_ggml_dequant_range(g->type, g->data + sr * g->row_bytes, c, k, out);
        first += k, out += k, left -= k;
    }
    if (v->xform == XF_MINUS_ONE)
        for (size_t i = 0; i < n; i++) dst[i] -= 1.0f;
}

const wm_gguf_tensor *wm_gguf_st_origin(const wm_st_tensor *t) {
    return t && t->src && t->src->read == vt_read ? ((const vt *)t->src->ctx)->g : NULL;
}

const char *wm_gguf_st_conversion(const wm_st_tensor *t) {
    return wm_gguf_st_origin(t) ? xf_names[((const vt *)t->src->ctx)->xform] : "";
}

int wm_gguf_st_carry(const wm_st_tensor *t, wm_ggml_carry *form) {
    const wm_gguf_tensor *g = wm_gguf_st_origin(t);
    if (!g || g->n_dims != 2 || !wm_ggml_carry_form(g->type, form)) return 0;
    const vt *v = t->src->ctx;
    return v->cols == g->ne[0] && v->xform != XF_MINUS_ONE; /* whole rows moved at most */
}

void wm_gguf_st_carry_row(const wm_st_tensor *t, uint64_t r, uint8_t *codes, float *scales, float *zp) {
    const vt *v = t->src->ctx;
    const wm_gguf_tensor *g = v->g;
    uint64_t sr = v->xform == XF_PERM_Q || v->xform == XF_PERM_K ? perm_row(v, r) : r;
    wm_ggml_carry_row(g->type, g->data + sr * g->row_bytes, g->ne[0], codes, scales, zp);
}

/* ------------------------------------------------------------------ the config */

typedef struct sizes {
    int64_t L, nh, kvh, hd, V;
} sizes;

/* "<arch>.<key>" */
static void akey(char *out, size_t n, const char *arch, const char *key) { snprintf(out, n, "%s.%s", arch, key); }

static wm_status get_ids(const wm_gguf_file *f, int64_t vocab, wm_json *j, wm_error *err) {
    static const char *const keys[][2] = {{"tokenizer.ggml.bos_token_id", "bos_token_id"},
                                          {"tokenizer.ggml.eos_token_id", "eos_token_id"},
                                          {"tokenizer.ggml.padding_token_id", "pad_token_id"}};
    for (int i = 0; i < 3; i++) {
        int64_t v;
        int there;
        wm_status s = wm_gguf_get_int(f, keys[i][0], 0, vocab - 1, &v, &there, err);
        if (s) return s;
        if (there) wm_json_int(j, keys[i][1], v);
    }
    return WM_OK;
}

static wm_status config_json(const wm_gguf_file *f, const char *arch, const garch *ga, sizes *z, wm_json *j,
                             wm_error *err) {
    const char *path = wm_gguf_path(f);
    char k[160];
    wm_status s;
    int there;
    wm_json_obj(j, NULL);
    wm_json_arr(j, "architectures");
    wm_json_str(j, NULL, ga->hf_class);
    wm_json_arr_end(j);
    wm_json_str(j, "model_type", ga->model_type);
    int64_t ival[N(ckeys)];
    int ihave[N(ckeys)];
    for (size_t i = 0; i < N(ckeys); i++) {
        const ckey *c = &ckeys[i];
        akey(k, sizeof k, arch, c->gguf);
        ihave[i] = 0;
        if (c->kind == K_INT) {
            if ((s = wm_gguf_get_int(f, k, c->lo, c->hi, &ival[i], &ihave[i], err))) return s;
            if (ihave[i]) wm_json_int(j, c->hf, ival[i]);
            continue;
        }
        double d = 0;
        if ((s = wm_gguf_get_num(f, k, &d, &there, err))) return s;
        if (!there) continue;
        if ((c->kind == K_POS && !(d > 0)) || (c->kind == K_EPS && !(d > 0 && d < 1)))
            return wm_err(err, WM_ERR_INPUT, "%s: key '%s': %g is out of range (it must be %s)", path, k, d,
                          c->kind == K_POS ? "> 0" : "in (0, 1)");
        wm_json_num(j, c->hf, d);
    }
    int64_t E = -1;
    for (size_t i = 0; i < N(ckeys); i++) {
        if (!ihave[i]) continue;
        if (!strcmp(ckeys[i].gguf, "embedding_length")) E = ival[i];
        else if (!strcmp(ckeys[i].gguf, "block_count")) z->L = ival[i];
        else if (!strcmp(ckeys[i].gguf, "attention.head_count")) z->nh = ival[i];
        else if (!strcmp(ckeys[i].gguf, "attention.head_count_kv")) z->kvh = ival[i];
        else if (!strcmp(ckeys[i].gguf, "attention.key_length")) z->hd = ival[i];
    }
    static const char *const need[] = {"embedding_length", "block_count", "attention.head_count"};
    int64_t got[] = {E, z->L, z->nh};
    for (int i = 0; i < 3; i++)
        if (got[i] <= 0) {
            akey(k, sizeof k, arch, need[i]);
            return wm_err(err, WM_ERR_INPUT, "%s: key '%s': missing (needed to build the model)", path, k);
        }
    if (z->kvh <= 0) z->kvh = z->nh;
    if (z->hd <= 0) {
        if (E % z->nh)
            return wm_err(err, WM_ERR_INPUT, "%s: key '%s.attention.head_count': %lld does not divide embedding_length "
                          "%lld and there is no attention.key_length", path, arch, (long long)z->nh, (long long)E);
        z->hd = E / z->nh;
    }
    int64_t vlen;
    akey(k, sizeof k, arch, "attention.value_length");
    if ((s = wm_gguf_get_int(f, k, 1, 1 << 16, &vlen, &there, err))) return s;
    if (there && vlen != z->hd)
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: key '%s': %lld differs from the key length %lld (not supported)",
                      path, k, (long long)vlen, (long long)z->hd);
    int64_t rot;
    akey(k, sizeof k, arch, "rope.dimension_count");
    if ((s = wm_gguf_get_int(f, k, 1, 1 << 16, &rot, &there, err))) return s;
    if (there && (rot > z->hd || rot % 2))
        return wm_err(err, WM_ERR_INPUT, "%s: key '%s': %lld rotary dims for heads of %lld (an even count up to the "
                      "head size)", path, k, (long long)rot, (long long)z->hd);
    if (there && rot < z->hd) wm_json_num(j, "partial_rotary_factor", (double)rot / (double)z->hd);
    wm_gguf_str rs = {0};
    akey(k, sizeof k, arch, "rope.scaling.type");
    if ((s = wm_gguf_get_str(f, k, &rs, &there, err))) return s;
    if (there && !(rs.n == 4 && !memcmp(rs.p, "none", 4))) {
        double factor = 0;
        int fthere;
        char fk[160];
        akey(fk, sizeof fk, arch, "rope.scaling.factor");
        if (!(rs.n == 6 && !memcmp(rs.p, "linear", 6)))
            return wm_err(err, WM_ERR_UNSUPPORTED, "%s: key '%s': RoPE scaling '%.*s' is not supported (none, linear)",
                          path, k, rs.n > 40 ? 40 : (int)rs.n, rs.p);
        if ((s = wm_gguf_get_num(f, fk, &factor, &fthere, err))) return s;
        if (!fthere || !(factor > 0))
            return wm_err(err, WM_ERR_INPUT, "%s: key '%s': %s for linear RoPE scaling", path, fk,
                          fthere ? "not > 0" : "missing");
        wm_json_obj(j, "rope_scaling");
        wm_json_str(j, "rope_type", "linear");
        wm_json_num(j, "factor", factor);
        wm_json_obj_end(j);
    }
    /* vocabulary: <arch>.vocab_size, else the tokenizer's, else the embedding's rows */
    const wm_gguf_kv *toks = wm_gguf_find(f, "tokenizer.ggml.tokens");
    const wm_gguf_tensor *emb = wm_gguf_find_tensor(f, "token_embd.weight");
    akey(k, sizeof k, arch, "vocab_size");
    if ((s = wm_gguf_get_int(f, k, 1, INT32_MAX, &z->V, &there, err))) return s;
    if (!there && toks && toks->type == WM_GGUF_ARRAY) {
        if (!toks->n || toks->n > INT32_MAX)
            return wm_err(err, WM_ERR_INPUT, "%s: key 'tokenizer.ggml.tokens': %llu tokens", path,
                          (unsigned long long)toks->n);
        z->V = (int64_t)toks->n;
        wm_json_int(j, "vocab_size", z->V);
    } else if (!there && emb && emb->n_dims == 2 && emb->ne[1] <= INT32_MAX) {
        z->V = (int64_t)emb->ne[1];
        wm_json_int(j, "vocab_size", z->V);
    } else if (!there) {
        return wm_err(err, WM_ERR_INPUT, "%s: no vocabulary size (no %s, tokenizer.ggml.tokens or token_embd.weight)",
                      path, k);
    }
    if ((s = get_ids(f, z->V, j, err))) return s;
    wm_json_bool(j, "tie_word_embeddings", wm_gguf_find_tensor(f, "output.weight") == NULL);
    if (ga->swa_period > 0) {
        akey(k, sizeof k, arch, "attention.sliding_window");
        if (wm_gguf_find(f, k)) {
            wm_json_arr(j, "layer_types");
            for (int64_t i = 0; i < z->L; i++)
                wm_json_str(j, NULL, (i + 1) % ga->swa_period ? "sliding_attention" : "full_attention");
            wm_json_arr_end(j);
        }
    }
    wm_json_str(j, "torch_dtype", "float32");
    wm_gguf_str name;
    if (!wm_gguf_get_str(f, "general.name", &name, &there, NULL) && there && name.n < 256) {
        char nm[256];
        memcpy(nm, name.p, (size_t)name.n);
        nm[name.n] = 0;
        if (strlen(nm) == name.n) wm_json_str(j, "_name_or_path", nm);
    }
    wm_json_obj_end(j);
    return j->oom ? wm_err(err, WM_ERR_NOMEM, "out of memory") : WM_OK;
}

static wm_status gen_json(const wm_gguf_file *f, int64_t vocab, wm_json *j, wm_error *err) {
    wm_json_obj(j, NULL);
    wm_status s = get_ids(f, vocab, j, err);
    wm_json_obj_end(j);
    if (!s && j->oom) s = wm_err(err, WM_ERR_NOMEM, "out of memory");
    return s;
}

/* ------------------------------------------------------------------ tensors */

/* "blk.12.attn_q.weight" -> layer 12, leaf "attn_q", suffix "weight"; "output.weight" -> layer -1. */
static int split_tname(const char *name, int64_t *layer, char *leaf, size_t n, const char **suffix) {
    const char *p = name;
    *layer = -1;
    if (!strncmp(p, "blk.", 4)) {
        p += 4;
        if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] >= '0' && p[1] <= '9')) return 0;
        int64_t v = 0;
        while (*p >= '0' && *p <= '9' && v < 100000) v = v * 10 + (*p++ - '0');
        if (*p++ != '.') return 0;
        *layer = v;
    }
    const char *dot = strrchr(p, '.');
    if (!dot || dot == p || (size_t)(dot - p) >= n) return 0;
    memcpy(leaf, p, (size_t)(dot - p));
    leaf[dot - p] = 0;
    *suffix = dot + 1;
    return !strcmp(*suffix, "weight") || !strcmp(*suffix, "bias");
}

/* *out: a handle over f's tensors, which then owns f (*consumed = 1, also when that last step fails). */
static wm_status map_tensors(wm_gguf_file *f, const garch *ga, const char *arch, const sizes *z, wm_st_file **out,
                             int *consumed, wm_error *err) {
    const char *path = wm_gguf_path(f);
    size_t n = wm_gguf_tensor_count(f);
    owner *o = calloc(1, sizeof *o);
    wm_st_tensor *ts = calloc(n ? n : 1, sizeof *ts);
    char (*names)[160] = calloc(n ? n : 1, sizeof *names);
    int64_t (*shapes)[WM_GGUF_MAX_DIMS] = calloc(n ? n : 1, sizeof *shapes);
    wm_status s = WM_OK;
    if (!o || !ts || !names || !shapes || !(o->v = calloc(n ? n : 1, sizeof *o->v))) {
        s = wm_err(err, WM_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < n && !s; i++) {
        const wm_gguf_tensor *g = wm_gguf_tensor_at(f, i);
        char leaf[WM_GGUF_MAX_NAME + 1];
        int64_t layer;
        const char *suffix;
        const tname *row = NULL;
        if (split_tname(g->name, &layer, leaf, sizeof leaf, &suffix)) row = find_row(ga, layer >= 0, leaf);
        if (!row) {
            s = wm_err(err, WM_ERR_UNSUPPORTED, "%s: tensor '%s' has no role in architecture '%s' (its table names "
                       "token_embd, output_norm, output and blk.N.attn_*/ffn_* tensors)", path, g->name, arch);
            break;
        }
        if (layer >= z->L) {
            s = wm_err(err, WM_ERR_INPUT, "%s: tensor '%s': layer %lld, but block_count is %lld", path, g->name,
                       (long long)layer, (long long)z->L);
            break;
        }
        if (!wm_ggml_type_supported(g->type)) {
            s = wm_err(err, WM_ERR_UNSUPPORTED, "%s: tensor '%s': type %s is not supported (%s)", path, g->name,
                       wm_ggml_type_name(g->type), wm_ggml_supported_list());
            break;
        }
        char base[160];
        snprintf(base, sizeof base, row->hf, (int)layer);
        snprintf(names[i], sizeof names[i], "%s.%s", base, suffix);
        vt *v = &o->v[i];
        v->src.read = vt_read;
        v->src.ctx = v;
        v->g = g;
        v->xform = row->xform;
        v->cols = g->ne[0];
        v->rows = g->ne[0] ? g->numel / g->ne[0] : 0;
        if (v->xform == XF_PERM_Q || v->xform == XF_PERM_K) {
            v->heads = (uint64_t)(v->xform == XF_PERM_Q ? z->nh : z->kvh);
            if (g->n_dims == 1) {
                if (wm_ggml_block_elems(g->type) != 1) {
                    s = wm_err(err, WM_ERR_UNSUPPORTED, "%s: tensor '%s': a %s vector cannot be un-permuted", path,
                               g->name, wm_ggml_type_name(g->type));
                    break;
                }
                v->cols = 1, v->rows = g->ne[0];
            }
            if (!v->rows || v->rows % (2 * v->heads)) {
                s = wm_err(err, WM_ERR_INPUT, "%s: tensor '%s': %llu rows do not split into %llu heads of an even size",
                           path, g->name, (unsigned long long)v->rows, (unsigned long long)v->heads);
                break;
            }
        }
        wm_st_tensor *t = &ts[i];
        t->name = names[i];
        t->dtype = WM_ST_F32;
        t->rank = g->n_dims;
        for (uint32_t d = 0; d < g->n_dims; d++) shapes[i][d] = (int64_t)g->ne[g->n_dims - 1 - d];
        t->shape = shapes[i];
        t->numel = g->numel;
        t->data = g->data;
        t->nbytes = g->nbytes;
        t->offset = g->offset;
        t->src = &v->src;
    }
    if (s) goto fail;
    o->f = f;
    *consumed = 1;
    s = wm_st_open_virtual(ts, n, path, owner_free, o, out, err); /* owns o (and f) from here, also on failure */
    o = NULL;
fail:
    owner_free(o);
    free(ts);
    free(names);
    free(shapes);
    return s;
}

/* ------------------------------------------------------------------ the checkpoint */

static wm_status add_made(wm_hf_checkpoint *ck, const char *name, char *text, size_t len, wm_error *err) {
    if (ck->n_made == WM_HF_MAX_MADE) {
        free(text);
        return wm_err(err, WM_ERR_INTERNAL, "too many made files");
    }
    wm_hf_made_file *m = &ck->made[ck->n_made++];
    snprintf(m->name, sizeof m->name, "%s", name);
    m->text = text;
    m->len = len;
    return WM_OK;
}

/* Moves a finished writer's text into ck as file name. */
static wm_status take_json(wm_hf_checkpoint *ck, const char *name, wm_json *j, wm_error *err) {
    if (j->oom) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    char *text = j->buf;
    size_t len = j->n;
    j->buf = NULL;
    wm_json_free(j);
    return add_made(ck, name, text, len, err);
}

wm_status wm_gguf_open_checkpoint(const char *spec, wm_hf_checkpoint *ck, wm_st_file **st, wm_error *err) {
    memset(ck, 0, sizeof *ck);
    if (st) *st = NULL;
    wm_gguf_file *f = NULL;
    wm_status s = wm_gguf_open(spec, &f, err);
    return s ? s : wm_gguf_checkpoint_of(f, ck, st, err);
}

wm_status wm_gguf_checkpoint_of(wm_gguf_file *f, wm_hf_checkpoint *ck, wm_st_file **st, wm_error *err) {
    memset(ck, 0, sizeof *ck);
    if (st) *st = NULL;
    wm_status s;
    const char *path = wm_gguf_path(f);
    ck->format = "gguf";
    snprintf(ck->dir, sizeof ck->dir, "%s", wm_gguf_dir(f));
    snprintf(ck->weights, sizeof ck->weights, "%s", path);
    char arch[64] = "";
    wm_gguf_str a;
    int there;
    if ((s = wm_gguf_get_str(f, "general.architecture", &a, &there, err))) goto done;
    if (!there) {
        s = wm_err(err, WM_ERR_INPUT, "%s: key 'general.architecture': missing", path);
        goto done;
    }
    if (!a.n || a.n >= sizeof arch || memchr(a.p, 0, (size_t)a.n)) {
        s = wm_err(err, WM_ERR_INPUT, "%s: key 'general.architecture': not a name", path);
        goto done;
    }
    memcpy(arch, a.p, (size_t)a.n);
    const garch *ga = find_arch(arch);
    if (!ga) {
        s = wm_err(err, WM_ERR_UNSUPPORTED, "%s: key 'general.architecture': '%.40s' is not supported (%s)", path, arch,
                   wm_gguf_arch_list());
        goto done;
    }
    sizes z = {0};
    wm_json j;
    wm_json_init(&j);
    if ((s = config_json(f, arch, ga, &z, &j, err)) || (s = take_json(ck, "config.json", &j, err))) {
        wm_json_free(&j);
        goto done;
    }
    char label[PATH_MAX + 64];
    snprintf(label, sizeof label, "%s [config.json from its metadata]", path);
    const wm_hf_made_file *m = &ck->made[ck->n_made - 1];
    if ((s = wm_hf_config_parse(m->text, m->len, label, &ck->config, err))) goto done;
    wm_json_init(&j);
    if ((s = gen_json(f, z.V, &j, err)) || (s = take_json(ck, "generation_config.json", &j, err))) {
        wm_json_free(&j);
        goto done;
    }
    m = &ck->made[ck->n_made - 1];
    if ((s = wm_hf_gen_config_parse(m->text, m->len, label, &ck->gen, err))) goto done;
    ck->has_gen = 1;
    char *tok = NULL, *cfg = NULL;
    size_t tok_n = 0, cfg_n = 0;
    if ((s = wm_gguf_tokenizer_files(f, ck->config.max_positions > 0 ? ck->config.max_positions : 0, &tok, &tok_n,
                                     &cfg, &cfg_n, err)))
        goto done;
    if (tok) {
        if ((s = add_made(ck, "tokenizer.json", tok, tok_n, err))) {
            free(cfg);
            goto done;
        }
        if ((s = add_made(ck, "tokenizer_config.json", cfg, cfg_n, err))) goto done;
        m = &ck->made[ck->n_made - 1];
        if ((s = wm_hf_tok_config_parse(m->text, m->len, label, &ck->tok, err))) goto done;
        ck->has_tok = 1;
    }
    if (st) {
        int consumed = 0;
        s = map_tensors(f, ga, arch, &z, st, &consumed, err);
        if (consumed) f = NULL; /* owned by *st (or released with it) */
    }
done:
    wm_gguf_close(f);
    if (s) wm_hf_checkpoint_free(ck);
    return s;
}

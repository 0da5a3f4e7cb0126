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

/*
 * How a GGUF tensor becomes Hugging Face tensors. llama.cpp stacks a layer's experts in 3-D tensors
 * (blk.N.ffn_gate_exps / ffn_up_exps [E, I, H], ffn_down_exps [E, H, I] as Hugging Face shapes):
 *   SP_EXPERTS  one 2-D tensor per expert (the hf name's second %d: the expert), its rows a slice of the stack
 *   SP_PAIR     this tensor's rows then those of its pair (another leaf of the layer), expert by expert: transformers'
 *               fused gate-then-up tensors that the converter split (GraniteMoE's input_linear [E, 2I, H])
 *   SP_ABSORBED read through its pair's SP_PAIR row; no tensor of its own
 *   SP_ROW      a vector shown as one row [1, n] (Qwen2-MoE's shared_expert_gate)
 */
enum { SP_NONE, SP_EXPERTS, SP_PAIR, SP_ABSORBED, SP_ROW };
static const char *const sp_names[] = {"", "experts split: one tensor per expert", "rows stacked with its pair",
                                       "", ""};
/* expert stacks' dims (GGUF ne[0], ne[1]): EX_IN {H, I} (gate, up), EX_OUT {I, H} (down); ne[2] the experts */
enum { EX_NONE, EX_IN, EX_OUT };

/* A tensor role: llama.cpp's name (after "blk.N." for a layer) -> the Hugging Face name (%d: the layer). */
typedef struct tname {
    uint8_t layer;
    const char *gguf, *hf;
    uint8_t xform;
    uint8_t split;    /* SP_* */
    uint8_t experts;  /* EX_*: a 3-D stack of the layer's experts */
    const char *pair; /* SP_PAIR / SP_ABSORBED: the other leaf */
} tname;

#define G(g, h, x) {0, g, h, x, SP_NONE, EX_NONE, NULL}
#define L(g, h, x) {1, g, "model.layers.%d." h, x, SP_NONE, EX_NONE, NULL}
#define LX(g, h, sp, ex, pair) {1, g, "model.layers.%d." h, XF_NONE, sp, ex, pair}
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

/* OLMo 2: norms after the attention and the MLP (transformers' post_attention_layernorm and
   post_feedforward_layernorm), no norms before them; q/k norms over all heads (the dense rows' names) */
static const tname olmo2_rows[] = {
    L("post_attention_norm", "post_attention_layernorm", XF_NONE),
    L("post_ffw_norm", "post_feedforward_layernorm", XF_NONE),
};

/* Mixtral (general.architecture llama with experts): the router block_sparse_moe.gate, experts w1 (gate), w3 (up),
   w2 (down) one tensor each */
static const tname mixtral_rows[] = {
    L("ffn_gate_inp", "block_sparse_moe.gate", XF_NONE),
    LX("ffn_gate_exps", "block_sparse_moe.experts.%d.w1", SP_EXPERTS, EX_IN, NULL),
    LX("ffn_up_exps", "block_sparse_moe.experts.%d.w3", SP_EXPERTS, EX_IN, NULL),
    LX("ffn_down_exps", "block_sparse_moe.experts.%d.w2", SP_EXPERTS, EX_OUT, NULL),
};

/* Qwen2-MoE / Qwen3-MoE: the router mlp.gate, experts mlp.experts.E.*_proj, Qwen2-MoE's shared expert and its
   sigmoid gate (a vector [H] or a [1, H] matrix in the file, [1, H] in transformers) */
static const tname qwen_moe_rows[] = {
    L("ffn_gate_inp", "mlp.gate", XF_NONE),
    LX("ffn_gate_exps", "mlp.experts.%d.gate_proj", SP_EXPERTS, EX_IN, NULL),
    LX("ffn_up_exps", "mlp.experts.%d.up_proj", SP_EXPERTS, EX_IN, NULL),
    LX("ffn_down_exps", "mlp.experts.%d.down_proj", SP_EXPERTS, EX_OUT, NULL),
    L("ffn_gate_shexp", "mlp.shared_expert.gate_proj", XF_NONE),
    L("ffn_up_shexp", "mlp.shared_expert.up_proj", XF_NONE),
    L("ffn_down_shexp", "mlp.shared_expert.down_proj", XF_NONE),
    LX("ffn_gate_inp_shexp", "mlp.shared_expert_gate", SP_ROW, EX_NONE, NULL),
};

/* GraniteMoE (+ shared): the router block_sparse_moe.router.layer; transformers stacks each expert's gate rows then
   up rows in input_linear [E, 2I, H] and the shared expert's in shared_mlp.input_linear [2 SI, H], which the
   converter split into the gate and up tensors */
static const tname granitemoe_rows[] = {
    L("ffn_gate_inp", "block_sparse_moe.router.layer", XF_NONE),
    LX("ffn_gate_exps", "block_sparse_moe.input_linear", SP_PAIR, EX_IN, "ffn_up_exps"),
    LX("ffn_up_exps", "", SP_ABSORBED, EX_IN, "ffn_gate_exps"),
    LX("ffn_down_exps", "block_sparse_moe.output_linear", SP_NONE, EX_OUT, NULL),
    LX("ffn_gate_shexp", "shared_mlp.input_linear", SP_PAIR, EX_NONE, "ffn_up_shexp"),
    LX("ffn_up_shexp", "", SP_ABSORBED, EX_NONE, "ffn_gate_shexp"),
    L("ffn_down_shexp", "shared_mlp.output_linear", XF_NONE),
};

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* <arch>.KEY -> config.json key. Integer ranges are the config parser's. */
enum { K_INT, K_NUM, K_POS, K_EPS };
typedef struct ckey {
    const char *gguf, *hf;
    int kind;
    int64_t lo, hi;
} ckey;

/* keys whose config.json name depends on the family (read before the common table below) */
static const ckey qwen2moe_keys[] = {
    {"expert_feed_forward_length", "moe_intermediate_size", K_INT, 1, 1 << 24},
    /* 1 up: a width of 0 left the shared tensors to no module (a "not understood" naming no key) */
    {"expert_shared_feed_forward_length", "shared_expert_intermediate_size", K_INT, 1, 1 << 24},
};
static const ckey qwen3moe_keys[] = {
    {"expert_feed_forward_length", "moe_intermediate_size", K_INT, 1, 1 << 24},
};
/* Granite's multipliers: the converter writes them as *_scale (logit_scale: the logits' divisor, logits_scaling) */
#define GRANITE_KEYS                                                                                              \
    {"attention.scale", "attention_multiplier", K_POS, 0, 0},                                                     \
        {"embedding_scale", "embedding_multiplier", K_POS, 0, 0},                                                 \
        {"residual_scale", "residual_multiplier", K_POS, 0, 0}, {"logit_scale", "logits_scaling", K_POS, 0, 0}
static const ckey granite_keys[] = {GRANITE_KEYS};
static const ckey granitemoe_keys[] = {
    GRANITE_KEYS,
    {"expert_shared_feed_forward_length", "shared_intermediate_size", K_INT, 1, 1 << 24},
};

/* which metadata picks a row (the first row of the architecture whose condition holds) */
enum {
    W_ANY,
    W_EXPERTS, /* <arch>.expert_count present */
    W_SHARED,  /* <arch>.expert_count and <arch>.expert_shared_feed_forward_length present */
};

typedef struct garch {
    const char *arch;       /* general.architecture */
    int when;               /* W_* */
    const char *model_type; /* config.json model_type */
    const char *hf_class;   /* config.json architectures[0] */
    const tname *rows;      /* looked up before rows2, then dense_rows */
    size_t n_rows;
    const tname *rows2;
    size_t n_rows2;
    int swa_period;         /* llama.cpp's fixed pattern: layer i uses full attention when (i + 1) % period == 0 */
    const ckey *keys;       /* the family's own keys */
    size_t n_keys;
    int norm_topk;          /* experts: 1 / 0 when llama.cpp renormalizes the top-k weights / does not (config.json
                               norm_topk_prob); -1 when the family has no such key */
    int moe;                /* the row has experts: expert_count and expert_used_count are required */
} garch;

#define ROWS(a) a, N(a)
#define KEYS(a) a, N(a)

static const garch archs[] = {
    {"llama", W_EXPERTS, "mixtral", "MixtralForCausalLM", ROWS(llama_rows), ROWS(mixtral_rows), 0, NULL, 0, -1, 1},
    {"llama", W_ANY, "llama", "LlamaForCausalLM", ROWS(llama_rows), NULL, 0, 0, NULL, 0, -1, 0},
    {"qwen2", W_ANY, "qwen2", "Qwen2ForCausalLM", NULL, 0, NULL, 0, 0, NULL, 0, -1, 0},
    {"qwen3", W_ANY, "qwen3", "Qwen3ForCausalLM", NULL, 0, NULL, 0, 0, NULL, 0, -1, 0},
    {"qwen2moe", W_ANY, "qwen2_moe", "Qwen2MoeForCausalLM", ROWS(qwen_moe_rows), NULL, 0, 0, KEYS(qwen2moe_keys), 0, 1},
    {"qwen3moe", W_ANY, "qwen3_moe", "Qwen3MoeForCausalLM", ROWS(qwen_moe_rows), NULL, 0, 0, KEYS(qwen3moe_keys), 1, 1},
    {"phi3", W_ANY, "phi3", "Phi3ForCausalLM", ROWS(phi3_rows), NULL, 0, 0, NULL, 0, -1, 0},
    {"gemma3", W_ANY, "gemma3_text", "Gemma3ForCausalLM", ROWS(gemma3_rows), NULL, 0, 6, NULL, 0, -1, 0},
    {"olmo2", W_ANY, "olmo2", "Olmo2ForCausalLM", ROWS(olmo2_rows), NULL, 0, 0, NULL, 0, -1, 0},
    {"granite", W_ANY, "granite", "GraniteForCausalLM", ROWS(llama_rows), NULL, 0, 0, KEYS(granite_keys), -1, 0},
    {"granitemoe", W_SHARED, "granitemoeshared", "GraniteMoeSharedForCausalLM", ROWS(llama_rows),
     ROWS(granitemoe_rows), 0, KEYS(granitemoe_keys), -1, 1},
    {"granitemoe", W_ANY, "granitemoe", "GraniteMoeForCausalLM", ROWS(llama_rows), ROWS(granitemoe_rows), 0,
     KEYS(granitemoe_keys), -1, 1},
};

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
    {"expert_used_count", "num_experts_per_tok", K_INT, 0, INT32_MAX},
};

/* "<arch>.<key>" */
static void akey(char *out, size_t n, const char *arch, const char *key) { snprintf(out, n, "%s.%s", arch, key); }

/* The row of architecture name whose condition f's metadata meets (f NULL: the unconditional row). */
static const garch *find_arch(const char *name, const wm_gguf_file *f) {
    char k[160];
    for (size_t i = 0; i < N(archs); i++) {
        const garch *g = &archs[i];
        if (strcmp(g->arch, name)) continue;
        if (g->when == W_ANY) return g;
        if (!f) continue;
        akey(k, sizeof k, name, "expert_count");
        int ok = wm_gguf_find(f, k) != NULL;
        if (ok && g->when == W_SHARED) {
            akey(k, sizeof k, name, "expert_shared_feed_forward_length");
            ok = wm_gguf_find(f, k) != NULL;
        }
        if (ok) return g;
    }
    return NULL;
}

const char *wm_gguf_model_type(const char *arch) {
    const garch *g = arch ? find_arch(arch, NULL) : NULL;
    return g ? g->model_type : NULL;
}

const char *wm_gguf_arch_list(void) {
    static char list[256];
    if (!list[0]) {
        size_t n = 0;
        for (size_t i = 0; i < N(archs) && n < sizeof list; i++)
            if (!i || strcmp(archs[i].arch, archs[i - 1].arch))
                n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", archs[i].arch);
    }
    return list;
}

static const tname *find_in(const tname *rows, size_t n, int layer, const char *leaf) {
    for (size_t i = 0; i < n; i++)
        if (rows[i].layer == layer && !strcmp(rows[i].gguf, leaf)) return &rows[i];
    return NULL;
}

static const tname *find_row(const garch *g, int layer, const char *leaf) {
    const tname *r = find_in(g->rows, g->n_rows, layer, leaf);
    if (!r) r = find_in(g->rows2, g->n_rows2, layer, leaf);
    return r ? r : find_in(dense_rows, N(dense_rows), layer, leaf);
}

/* ------------------------------------------------------------------ the tensor views */

typedef struct vt {
    wm_st_source src;
    const wm_gguf_tensor *g;
    const wm_gguf_tensor *g2; /* SP_PAIR: the pair, whose rows follow g's in each expert */
    uint64_t cols;   /* elements per row of the view: ne[0], or 1 for a permuted vector */
    uint64_t rows;   /* rows of the view */
    uint64_t heads;  /* permuted: heads whose rows are interleaved */
    uint64_t row0;   /* SP_EXPERTS: the first row of g the view reads (its expert's) */
    uint64_t part;   /* SP_PAIR: rows of g (and of g2) per expert */
    uint8_t xform, split;
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

/* The GGUF tensor and its row (*sr) that row r of the view reads (whole rows: cols == ne[0]). */
static const wm_gguf_tensor *src_row(const vt *v, uint64_t r, uint64_t *sr) {
    if (v->g2) {
        uint64_t e = r / (2 * v->part), w = r % (2 * v->part);
        *sr = e * v->part + w % v->part;
        return w < v->part ? v->g : v->g2;
    }
    *sr = v->row0 + (v->xform == XF_PERM_Q || v->xform == XF_PERM_K ? perm_row(v, r) : r);
    return v->g;
}

static void vt_read(const void *ctx, uint64_t first, size_t n, float *dst) {
    const vt *v = ctx;
    float *out = dst;
    for (size_t left = n; left;) {
        uint64_t r = first / v->cols, c = first % v->cols, sr;
        size_t k = v->cols - c < left ? (size_t)(v->cols - c) : left;
        const wm_gguf_tensor *g = src_row(v, r, &sr);
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
    if (!wm_gguf_st_origin(t)) return "";
    const vt *v = t->src->ctx;
    return v->xform ? xf_names[v->xform] : sp_names[v->split];
}

int wm_gguf_st_carry(const wm_st_tensor *t, wm_ggml_carry *form) {
    const wm_gguf_tensor *g = wm_gguf_st_origin(t);
    if (!g || g->n_dims < 2 || !wm_ggml_carry_form(g->type, form)) return 0;
    const vt *v = t->src->ctx;
    if (v->g2 && v->g2->type != g->type) return 0; /* a pair of two types has no one form */
    return v->cols == g->ne[0] && v->xform != XF_MINUS_ONE; /* whole rows moved at most */
}

void wm_gguf_st_carry_row(const wm_st_tensor *t, uint64_t r, uint8_t *codes, float *scales, float *zp) {
    const vt *v = t->src->ctx;
    uint64_t sr;
    const wm_gguf_tensor *g = src_row(v, r, &sr);
    wm_ggml_carry_row(g->type, g->data + sr * g->row_bytes, g->ne[0], codes, scales, zp);
}

/* ------------------------------------------------------------------ the config */

typedef struct sizes {
    int64_t L, nh, kvh, hd, V;
    int64_t H, experts, exp_I; /* hidden size; experts (0: none) and their width */
} sizes;

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

/* One key of f into j under its config.json name (absent: nothing); *v / *have (may be NULL) its integer. */
static wm_status put_key(const wm_gguf_file *f, const char *arch, const ckey *c, int64_t *v, int *have, wm_json *j,
                         wm_error *err) {
    char k[160];
    int64_t iv = 0;
    int there = 0;
    wm_status s;
    akey(k, sizeof k, arch, c->gguf);
    if (have) *have = 0;
    if (c->kind == K_INT) {
        if ((s = wm_gguf_get_int(f, k, c->lo, c->hi, &iv, &there, err))) return s;
        if (there) wm_json_int(j, c->hf, iv);
        if (v) *v = iv;
        if (have) *have = there;
        return WM_OK;
    }
    double d = 0;
    if ((s = wm_gguf_get_num(f, k, &d, &there, err))) return s;
    if (!there) return WM_OK;
    if ((c->kind == K_POS && !(d > 0)) || (c->kind == K_EPS && !(d > 0 && d < 1)))
        return wm_err(err, WM_ERR_INPUT, "%s: key '%s': %g is out of range (it must be %s)", wm_gguf_path(f), k, d,
                      c->kind == K_POS ? "> 0" : "in (0, 1)");
    wm_json_num(j, c->hf, d);
    return WM_OK;
}

/*
 * A row with experts: <arch>.expert_count (at least 1) and expert_used_count (1 .. the count) present, the experts'
 * width (expert_feed_forward_length, else feed_forward_length) into z; norm_topk_prob as llama.cpp computes the
 * family. Errors name the key.
 */
static wm_status moe_keys(const wm_gguf_file *f, const char *arch, const garch *ga, sizes *z, wm_json *j,
                          wm_error *err) {
    const char *path = wm_gguf_path(f);
    char k[160], ku[160];
    int64_t used;
    int there;
    wm_status s;
    akey(k, sizeof k, arch, "expert_count");
    if ((s = wm_gguf_get_int(f, k, 0, INT32_MAX, &z->experts, &there, err))) return s;
    if (!there || z->experts < 1 || z->experts > 65536)
        return wm_err(err, WM_ERR_INPUT, "%s: key '%s': %s (a mixture of experts has 1 to 65536 experts)", path, k,
                      !there ? "missing" : z->experts ? "over 65536" : "0");
    akey(ku, sizeof ku, arch, "expert_used_count");
    if ((s = wm_gguf_get_int(f, ku, 0, INT32_MAX, &used, &there, err))) return s;
    if (!there || used < 1)
        return wm_err(err, WM_ERR_INPUT, "%s: key '%s': %s (each token takes at least 1 expert)", path, ku,
                      there ? "0" : "missing");
    if (used > z->experts)
        return wm_err(err, WM_ERR_INPUT, "%s: key '%s': %lld is more than the %lld experts of '%s'", path, ku,
                      (long long)used, (long long)z->experts, k);
    akey(k, sizeof k, arch, "expert_feed_forward_length");
    if ((s = wm_gguf_get_int(f, k, 1, 1 << 24, &z->exp_I, &there, err))) return s;
    if (!there) {
        akey(k, sizeof k, arch, "feed_forward_length");
        if ((s = wm_gguf_get_int(f, k, 1, 1 << 22, &z->exp_I, &there, err))) return s;
        if (!there) return wm_err(err, WM_ERR_INPUT, "%s: key '%s': missing (the experts' width)", path, k);
    }
    if (ga->norm_topk >= 0) wm_json_bool(j, "norm_topk_prob", ga->norm_topk);
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
    for (size_t i = 0; i < ga->n_keys; i++)
        if ((s = put_key(f, arch, &ga->keys[i], NULL, NULL, j, err))) return s;
    int64_t ival[N(ckeys)];
    int ihave[N(ckeys)];
    for (size_t i = 0; i < N(ckeys); i++)
        if ((s = put_key(f, arch, &ckeys[i], &ival[i], &ihave[i], j, err))) return s;
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
    z->H = E;
    if (ga->moe && (s = moe_keys(f, arch, ga, z, j, err))) return s;
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

/* What one GGUF tensor becomes: its role, layer, suffix, the pair it is read with, how many views it makes. */
typedef struct plan {
    const tname *row;
    int64_t layer;
    const char *suffix;
    const wm_gguf_tensor *pair;
    size_t views;
} plan;

static wm_status no_role(const char *path, const char *name, const char *arch, wm_error *err) {
    return wm_err(err, WM_ERR_UNSUPPORTED, "%s: tensor '%s' has no role in architecture '%s' (its table names "
                  "token_embd, output_norm, output and blk.N.attn_*/ffn_* tensors)", path, name, arch);
}

/* The plan of GGUF tensor g: its role found and checked (layer, type, an expert stack's dims, its pair). */
static wm_status plan_tensor(const wm_gguf_file *f, const garch *ga, const char *arch, const sizes *z,
                             const wm_gguf_tensor *g, plan *p, wm_error *err) {
    const char *path = wm_gguf_path(f);
    char leaf[WM_GGUF_MAX_NAME + 1];
    memset(p, 0, sizeof *p);
    if (split_tname(g->name, &p->layer, leaf, sizeof leaf, &p->suffix)) p->row = find_row(ga, p->layer >= 0, leaf);
    const tname *row = p->row;
    if (!row || (row->split != SP_NONE && row->split != SP_ROW && strcmp(p->suffix, "weight")))
        return no_role(path, g->name, arch, err);
    if (p->layer >= z->L)
        return wm_err(err, WM_ERR_INPUT, "%s: tensor '%s': layer %lld, but block_count is %lld", path, g->name,
                      (long long)p->layer, (long long)z->L);
    if (!wm_ggml_type_supported(g->type))
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: tensor '%s': type %s is not supported (%s)", path, g->name,
                      wm_ggml_type_name(g->type), wm_ggml_supported_list());
    if (row->experts != EX_NONE) {
        int64_t I = z->exp_I, want[3] = {row->experts == EX_IN ? z->H : I, row->experts == EX_IN ? I : z->H,
                                         z->experts};
        int ok = g->n_dims == 3 && z->experts > 0;
        for (int d = 0; ok && d < 3; d++) ok = g->ne[d] == (uint64_t)want[d];
        char dims[120]; /* its own dims only: a 2-D stack was shown as [a, b, 0] */
        size_t o = 0;
        for (uint32_t d = 0; d < g->n_dims && d < 4 && o < sizeof dims; d++)
            o += (size_t)snprintf(dims + o, sizeof dims - o, "%s%llu", d ? ", " : "", (unsigned long long)g->ne[d]);
        if (!ok)
            return wm_err(err, WM_ERR_INPUT, "%s: tensor '%s': %u-D [%s], expected the experts stacked "
                          "[%lld, %lld, %lld] (GGUF order: %s, %s.expert_count)", path, g->name, g->n_dims, dims,
                          (long long)want[0], (long long)want[1], (long long)want[2],
                          row->experts == EX_IN ? "embedding_length, the experts' width"
                                                : "the experts' width, embedding_length", arch);
    }
    p->views = row->split == SP_EXPERTS ? (size_t)z->experts : row->split == SP_ABSORBED ? 0 : 1;
    if (row->split == SP_PAIR || row->split == SP_ABSORBED) {
        char pn[WM_GGUF_MAX_NAME + 64];
        snprintf(pn, sizeof pn, "blk.%lld.%s.%s", (long long)p->layer, row->pair, p->suffix);
        p->pair = wm_gguf_find_tensor(f, pn);
        if (!p->pair)
            return wm_err(err, WM_ERR_INPUT, "%s: tensor '%s' comes with '%s' (transformers keeps their rows in one "
                          "tensor), which is missing", path, g->name, pn);
        int same = p->pair->n_dims == g->n_dims;
        for (uint32_t d = 0; same && d < g->n_dims; d++) same = p->pair->ne[d] == g->ne[d];
        if (!same)
            return wm_err(err, WM_ERR_INPUT, "%s: tensor '%s': its dims differ from those of '%s', the tensor whose "
                          "rows it is stacked with", path, g->name, pn);
    }
    return WM_OK;
}

/* *out: a handle over f's tensors, which then owns f (*consumed = 1, also when that last step fails). */
static wm_status map_tensors(wm_gguf_file *f, const garch *ga, const char *arch, const sizes *z, wm_st_file **out,
                             int *consumed, wm_error *err) {
    const char *path = wm_gguf_path(f);
    size_t n = wm_gguf_tensor_count(f), nv = 0;
    plan *pl = calloc(n ? n : 1, sizeof *pl);
    wm_status s = pl ? WM_OK : wm_err(err, WM_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n && !s; i++) {
        s = plan_tensor(f, ga, arch, z, wm_gguf_tensor_at(f, i), &pl[i], err);
        nv += pl[i].views;
    }
    if (s) {
        free(pl);
        return s;
    }
    owner *o = calloc(1, sizeof *o);
    wm_st_tensor *ts = calloc(nv ? nv : 1, sizeof *ts);
    char (*names)[160] = calloc(nv ? nv : 1, sizeof *names);
    int64_t (*shapes)[WM_GGUF_MAX_DIMS] = calloc(nv ? nv : 1, sizeof *shapes);
    if (!o || !ts || !names || !shapes || !(o->v = calloc(nv ? nv : 1, sizeof *o->v))) {
        s = wm_err(err, WM_ERR_NOMEM, "out of memory");
        goto fail;
    }
    size_t at = 0;
    for (size_t i = 0; i < n && !s; i++) {
        const wm_gguf_tensor *g = wm_gguf_tensor_at(f, i);
        const plan *p = &pl[i];
        const tname *row = p->row;
        for (size_t e = 0; e < p->views && !s; e++, at++) {
            char base[160];
            snprintf(base, sizeof base, row->hf, (int)p->layer, (int)e);
            snprintf(names[at], sizeof names[at], "%s.%s", base, p->suffix);
            vt *v = &o->v[at];
            v->src.read = vt_read;
            v->src.ctx = v;
            v->g = g;
            v->xform = row->xform;
            v->split = row->split;
            v->cols = g->ne[0];
            v->rows = g->ne[0] ? g->numel / g->ne[0] : 0;
            wm_st_tensor *t = &ts[at];
            t->name = names[at];
            t->dtype = WM_ST_F32;
            t->rank = g->n_dims;
            for (uint32_t d = 0; d < g->n_dims; d++) shapes[at][d] = (int64_t)g->ne[g->n_dims - 1 - d];
            t->numel = g->numel;
            t->data = g->data;
            t->nbytes = g->nbytes;
            t->offset = g->offset;
            if (row->split == SP_EXPERTS) { /* expert e: rows [e ne1, (e + 1) ne1) of the stack */
                v->rows = g->ne[1];
                v->row0 = (uint64_t)e * g->ne[1];
                t->rank = 2;
                shapes[at][0] = (int64_t)g->ne[1], shapes[at][1] = (int64_t)g->ne[0];
                t->numel = g->ne[0] * g->ne[1];
                t->data = g->data + v->row0 * g->row_bytes;
                t->nbytes = g->ne[1] * g->row_bytes;
                t->offset = g->offset + v->row0 * g->row_bytes;
            } else if (row->split == SP_PAIR) { /* each expert's rows of g, then the same rows of its pair */
                v->g2 = p->pair;
                v->part = g->ne[1];
                v->rows *= 2;
                shapes[at][g->n_dims - 2] *= 2;
                t->numel = 2 * g->numel;
            } else if (row->split == SP_ROW && g->n_dims == 1) { /* a vector as the one row of a matrix */
                t->rank = 2;
                shapes[at][0] = 1, shapes[at][1] = (int64_t)g->ne[0];
            }
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
                    s = wm_err(err, WM_ERR_INPUT, "%s: tensor '%s': %llu rows do not split into %llu heads of an even "
                               "size", path, g->name, (unsigned long long)v->rows, (unsigned long long)v->heads);
                    break;
                }
            }
            t->shape = shapes[at];
            t->src = &v->src;
        }
    }
    if (s) goto fail;
    o->f = f;
    *consumed = 1;
    s = wm_st_open_virtual(ts, nv, path, owner_free, o, out, err); /* owns o (and f) from here, also on failure */
    o = NULL;
fail:
    owner_free(o);
    free(pl);
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
    const garch *ga = find_arch(arch, f);
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

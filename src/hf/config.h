/*
 * config.h - Hugging Face checkpoint configuration files, parsed into typed
 * descriptions: config.json (architecture hyperparameters), and the
 * optional generation_config.json and tokenizer_config.json.
 *
 * Every file is untrusted: its size is capped, its nesting depth is checked
 * by a scan BEFORE cJSON sees it (cJSON recurses), and every field is type
 * checked; errors name the file, the field and the reason. Nothing here
 * knows a model family: keys that mean the same thing in different
 * families (hidden_size / n_embd / dim ...) are merged through one alias
 * table, and every value is kept in the cJSON tree (root) so fields this
 * module does not model remain inspectable. `auto_map` (custom repository
 * code) is refused: no code from a checkpoint is ever executed.
 *
 * Strings returned in the structs point into the owned cJSON trees; they
 * live until the matching *_free.
 */
#ifndef WM_HF_CONFIG_H
#define WM_HF_CONFIG_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "winml/winml.h"

typedef struct cJSON cJSON;

#define WM_HF_JSON_MAX_DEPTH 64                 /* nesting cap of any checkpoint JSON file */
#define WM_HF_CONFIG_MAX_BYTES (16u << 20)      /* config.json, generation_config.json */
#define WM_HF_TOKCONFIG_MAX_BYTES (64u << 20)   /* tokenizer_config.json (chat templates, added tokens) */
#define WM_HF_MAX_IDS 16                        /* token-id lists kept (eos may be a list) */
#define WM_HF_MAX_ARCHS 8

/*
 * Parses n bytes of JSON text after checking size (max_bytes), depth
 * (WM_HF_JSON_MAX_DEPTH, scanned without recursion) and that the top level
 * is an object. label names the text in messages. *out is a new tree owned
 * by the caller (cJSON_Delete); NULL on error.
 */
wm_status wm_hf_json_parse(const char *text, size_t n, size_t max_bytes, const char *label, cJSON **out,
                           wm_error *err);
/* wm_hf_json_parse with any top-level value (an array: modules.json); the caller checks its type. */
wm_status wm_hf_json_parse_value(const char *text, size_t n, size_t max_bytes, const char *label, cJSON **out,
                                 wm_error *err);
/* Maps path (no symlink following for the final component is NOT required: HF caches link) and parses it. */
wm_status wm_hf_json_load(const char *path, size_t max_bytes, cJSON **out, wm_error *err);
/* The same for any top-level value. */
wm_status wm_hf_json_load_value(const char *path, size_t max_bytes, cJSON **out, wm_error *err);
/* wm_hf_json_load_value of a file Python's json module wrote (the reference's eval metrics, our eval compare):
   its bare tokens Infinity and -Infinity become numbers (+-inf) and NaN becomes null; elsewhere strict JSON. */
wm_status wm_hf_json_load_py(const char *path, size_t max_bytes, cJSON **out, wm_error *err);

/* A token id or list of ids (eos_token_id may be either); n = 0: absent or null. */
typedef struct wm_hf_ids {
    int64_t v[WM_HF_MAX_IDS];
    size_t n;
} wm_hf_ids;

/* RoPE settings merged from rope_parameters (transformers 5), rope_scaling and top-level keys. */
typedef struct wm_hf_rope {
    const char *type;            /* "default", "linear", "dynamic", "yarn", "longrope", "llama3", ... */
    double theta;                /* NAN: absent */
    double factor;               /* NAN: absent */
    int64_t original_max_pos;    /* -1: absent */
    double low_freq_factor, high_freq_factor;      /* llama3; NAN: absent */
    double beta_fast, beta_slow, attention_factor;  /* yarn / longrope; NAN: absent */
    double mscale, mscale_all_dim;                  /* yarn; NAN: absent */
    int truncate;                                    /* yarn; -1: absent */
    double partial_rotary_factor;                    /* NAN: absent */
    double *short_factor, *long_factor;              /* longrope; malloc'ed, owned */
    size_t n_short, n_long;
    const char *source; /* "rope_parameters", "rope_scaling" or "config" (where the type came from) */
} wm_hf_rope;

typedef struct wm_hf_config {
    cJSON *root;              /* the whole file, owned */
    char file[PATH_MAX];      /* as opened, for messages */
    const char *model_type;   /* NULL: absent */
    const char *architectures[WM_HF_MAX_ARCHS];
    size_t n_architectures;
    /* sizes; -1: absent (or null) */
    int64_t vocab_size, hidden_size, intermediate_size, num_layers, num_heads, num_kv_heads, head_dim;
    int64_t max_positions, type_vocab_size, embedding_size, num_labels;
    int64_t sliding_window, max_window_layers;
    double norm_eps;          /* NAN: absent */
    const char *activation;   /* hidden_act / activation_function / activation; NULL: absent */
    const char *dtype;        /* torch_dtype / dtype; NULL: absent */
    /* flags; -1: absent */
    int tie_word_embeddings, attention_bias, mlp_bias, use_sliding_window;
    int scale_attn_weights, scale_attn_by_inverse_layer_idx, is_decoder;
    int has_rope;             /* any rope key present */
    wm_hf_rope rope;          /* all layers, or the full-attention ones where sliding layers have their own */
    /* the sliding-attention layers' own RoPE: rope_local_base_freq, or rope_parameters keyed by layer type
       ({"full_attention": {...}, "sliding_attention": {...}}, whose full_attention entry goes to rope) */
    wm_hf_rope rope_local;
    int has_rope_local;       /* rope_local_base_freq or rope_parameters.sliding_attention present */
    int rope_per_type;        /* rope_parameters is keyed by layer type */
    /* attention variants; NAN: absent. Soft-capping: 0 when the config says null (no capping), > 0 a cap */
    double query_pre_attn_scalar; /* scores scaled by its -1/2 power instead of head_dim's */
    double attn_softcap, final_softcap; /* attn_logit_softcapping, final_logit_softcapping */
    /* Granite's multipliers (NaN when absent): embedding_multiplier, residual_multiplier, attention_multiplier
       (the score scale itself), logits_scaling (logits divided by it) */
    double embedding_multiplier, residual_multiplier, attention_multiplier, logits_scaling;
    int64_t sliding_window_pattern;     /* every Nth layer full attention, the rest sliding; -1: absent */
    /* per-layer attention kind from layer_types: 1 sliding, 0 full; malloc'ed, owned */
    uint8_t *layer_sliding;
    size_t n_layer_types;
    /* id2label: labels[i] for i < n_labels (NULL entries where the map has a hole); malloc'ed array */
    const char **labels;
    size_t n_labels;
    wm_hf_ids pad, bos, eos;
    /* which key each merged value came from (for messages), e.g. "n_embd" */
    const char *key_hidden, *key_intermediate, *key_layers, *key_heads, *key_eps, *key_act, *key_positions;
} wm_hf_config;

/*
 * Parses config.json text (n bytes). label is the file name used in
 * messages. On success cfg owns a tree and arrays: wm_hf_config_free.
 * WM_ERR_UNSUPPORTED for `auto_map` (custom code), WM_ERR_INPUT for
 * malformed or ill-typed fields. cfg is zeroed/freed on error.
 */
wm_status wm_hf_config_parse(const char *text, size_t n, const char *label, wm_hf_config *cfg, wm_error *err);
wm_status wm_hf_config_load(const char *path, wm_hf_config *cfg, wm_error *err);
void wm_hf_config_free(wm_hf_config *cfg);

/* generation_config.json: token ids and sampling defaults (NAN / -1 / NULL when absent). */
typedef struct wm_hf_gen_config {
    cJSON *root;
    wm_hf_ids eos, bos, pad;
    double temperature, top_p, repetition_penalty;
    int64_t top_k, max_length, max_new_tokens;
    int do_sample; /* -1 absent */
} wm_hf_gen_config;

wm_status wm_hf_gen_config_parse(const char *text, size_t n, const char *label, wm_hf_gen_config *g, wm_error *err);
void wm_hf_gen_config_free(wm_hf_gen_config *g);

/* tokenizer_config.json: special tokens (string or {"content": ...}), chat template(s), max length. */
typedef struct wm_hf_tok_config {
    cJSON *root;
    const char *bos_token, *eos_token, *pad_token, *unk_token; /* NULL: absent */
    const char *chat_template;   /* the "default" template of a list, else its first; NULL: none */
    size_t n_chat_templates;     /* 1 for a string, the list length for a list */
    double model_max_length;     /* NAN: absent (often 1e30 meaning "no limit") */
    const char *tokenizer_class; /* NULL: absent */
} wm_hf_tok_config;

wm_status wm_hf_tok_config_parse(const char *text, size_t n, const char *label, wm_hf_tok_config *t, wm_error *err);
void wm_hf_tok_config_free(wm_hf_tok_config *t);

#define WM_HF_MAX_MADE 4

/* A file made from another format's metadata (a GGUF's config.json, tokenizer.json ...). */
typedef struct wm_hf_made_file {
    char name[64];
    char *text; /* malloc'ed, owned by the checkpoint */
    size_t len;
} wm_hf_made_file;

/* A checkpoint folder: its configs and which weight files it has. */
typedef struct wm_hf_checkpoint {
    char dir[PATH_MAX];
    char root[PATH_MAX];  /* files must resolve inside it (a hub cache repo folder); "" for a local folder */
    wm_hf_config config;
    int has_gen, has_tok;
    wm_hf_gen_config gen;
    wm_hf_tok_config tok;
    char weights[PATH_MAX];  /* model.safetensors or its index; "" when the folder has none */
    char pickle[64];         /* name of a pickle weight file found (pytorch_model.bin ...), "" if none */
    /* a checkpoint read from another format (GGUF): the files made from its metadata, which builds write in
       place of copies from dir (config parsed from made[] "config.json", gen / tok from theirs) */
    wm_hf_made_file made[WM_HF_MAX_MADE];
    size_t n_made;
    const char *format;      /* "gguf" for such a checkpoint; NULL for a Hugging Face folder */
} wm_hf_checkpoint;

/*
 * Resolves a -m MODEL spec to a checkpoint and loads its configuration.
 * Today spec is a local folder holding config.json (the hub/cache
 * resolver will be routed through here). generation_config.json and
 * tokenizer_config.json are loaded when present. ck owns everything:
 * wm_hf_checkpoint_free. Errors: WM_ERR_INPUT (no folder / no config.json /
 * malformed), WM_ERR_UNSUPPORTED (auto_map).
 */
wm_status wm_hf_open_checkpoint(const char *spec, wm_hf_checkpoint *ck, wm_error *err);
void wm_hf_checkpoint_free(wm_hf_checkpoint *ck);

/* 1 when path is a folder holding config.json (a checkpoint rather than an ONNX file). */
int wm_hf_is_checkpoint_dir(const char *path);

#endif

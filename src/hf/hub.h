/*
 * hub.h - where the model named by `-m` lives: a local folder (or a file
 * inside one), or a Hugging Face repository ORG/NAME[@REVISION] found in the
 * hub cache and, on a miss, downloaded into it with libcurl.
 *
 * Cache: $HF_HUB_CACHE, else $HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub, else
 * $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub, laid out
 * exactly as huggingface_hub lays it out:
 *   models--ORG--NAME/refs/REV                 the 40-hex commit of a branch/tag
 *   models--ORG--NAME/snapshots/COMMIT/FILE    relative symlink ../../blobs/ETAG
 *   models--ORG--NAME/blobs/ETAG               sha256 (LFS) or git sha1 of FILE
 *   models--ORG--NAME/blobs/ETAG.incomplete    a partial download (resumed)
 *   models--ORG--NAME/.no_exist/COMMIT/FILE    "FILE is not in the repo at COMMIT"
 *   .locks/models--ORG--NAME/ETAG.lock         flock'ed while ETAG downloads
 *   CACHEDIR.TAG
 * Every cache entry is untrusted: a ref must hold exactly 40 lowercase hex
 * characters before it is joined into a path, a snapshot file must resolve
 * (symlinks followed) inside its own models--ORG--NAME folder, and shard
 * names from an index must be plain *.safetensors file names.
 *
 * Download: for each file, HEAD $HF_ENDPOINT/ORG/NAME/resolve/REV/FILE (same-
 * origin redirects followed) gives X-Repo-Commit, X-Linked-Etag or ETag,
 * X-Linked-Size or Content-Length and, for large files, a redirect to a CDN;
 * then GET (redirects followed) into blobs/ETAG.incomplete, resumed with
 * Range, checked against the size and the etag (sha256 when it has 64 hex
 * digits, git's blob sha1 when 40) and renamed to blobs/ETAG; the snapshot
 * link and the ref are written through a temporary name and renamed. The
 * first answer pins the commit: every later file is asked for by commit.
 * $HF_TOKEN (else the token file: $HF_TOKEN_PATH or $HF_HOME/token) goes as a
 * Bearer token to the endpoint's origin only and is never printed.
 * HF_HUB_OFFLINE=1 (or TRANSFORMERS_OFFLINE=1) forbids the network.
 *
 * The cache comes first: a snapshot that holds every required file (config,
 * weights, shards, named includes) is used without the network, a branch as
 * its cached ref names it; wm_hf_resolve_opts.refresh (winml download) asks
 * the hub for the branch's current commit. Optional files (tokenizer, ...)
 * missing from a snapshot do not make it incomplete.
 *
 * Pickle weights (.bin .pt .pth .ckpt) are never downloaded or read: a model
 * that only has them is refused with a message pointing to safetensors.
 */
#ifndef WM_HF_HUB_H
#define WM_HF_HUB_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/sha256.h"
#include "winml/winml.h"

#define WM_HF_COMMIT_LEN 40
#define WM_HF_MAX_REPO_ID 200   /* ORG (96) / NAME (96) */
#define WM_HF_MAX_REVISION 255
#define WM_HF_MAX_FILENAME 255  /* a repo file name we fetch (may hold '/') */
#define WM_HF_MAX_ETAG 128
#define WM_HF_MAX_INDEX (64u << 20) /* largest model.safetensors.index.json read */
#define WM_HF_MAX_SHARDS 4096
#define WM_HF_DEFAULT_ENDPOINT "https://huggingface.co"

/* What a resolved folder must hold (wm_hf_resolve_opts.need). */
enum {
    WM_HF_NEED_CONFIG = 1u,  /* config.json */
    WM_HF_NEED_WEIGHTS = 2u, /* model.safetensors, or the index and every shard it names */
    WM_HF_NEED_TOKENIZER = 4u, /* the hub was asked for the tokenizer files (a cache hit needs one of them) */
};

typedef enum wm_hf_weights {
    WM_HF_WEIGHTS_NONE = 0,
    WM_HF_WEIGHTS_SINGLE, /* model.safetensors */
    WM_HF_WEIGHTS_INDEX,  /* model.safetensors.index.json */
} wm_hf_weights;

/* Tokenizer files a folder may hold (wm_hf_folder_info.tokenizer bits). */
enum {
    WM_HF_TOK_JSON = 1u,          /* tokenizer.json */
    WM_HF_TOK_CONFIG = 2u,        /* tokenizer_config.json */
    WM_HF_TOK_SPECIAL = 4u,       /* special_tokens_map.json */
    WM_HF_TOK_VOCAB_JSON = 8u,    /* vocab.json */
    WM_HF_TOK_MERGES = 16u,       /* merges.txt */
    WM_HF_TOK_VOCAB_TXT = 32u,    /* vocab.txt */
    WM_HF_TOK_SPM = 64u,          /* a SentencePiece model: spiece.model, sentencepiece.bpe.model, tokenizer.model,
                                     source.spm (hf/spm_model.h) */
};

/* What a folder holds (wm_hf_folder_scan). Only names are looked at. */
typedef struct wm_hf_folder_info {
    int has_config;             /* config.json */
    int has_generation_config;  /* generation_config.json */
    wm_hf_weights weights;      /* the safetensors entry point present, if any */
    unsigned tokenizer;         /* WM_HF_TOK_* bits */
    char pickle[256];           /* first pickle weight file name seen ("" none) */
} wm_hf_folder_info;

typedef enum wm_hf_source {
    WM_HF_SRC_LOCAL = 0, /* a folder given by path */
    WM_HF_SRC_CACHE,     /* a complete snapshot already in the cache */
    WM_HF_SRC_DOWNLOAD,  /* the hub was asked (files downloaded or confirmed) */
} wm_hf_source;

typedef enum wm_hf_file_state {
    WM_HF_FILE_PRESENT = 0, /* in the folder / cache before this call */
    WM_HF_FILE_DOWNLOADED,  /* fetched by this call */
    WM_HF_FILE_ABSENT,      /* an optional file the repo does not have */
} wm_hf_file_state;

typedef struct wm_hf_file {
    const char *name;       /* repo-relative name (arena) */
    uint64_t size;          /* bytes (0 when absent) */
    wm_hf_file_state state;
    const char *etag;       /* blob name in the cache, NULL for a local folder or when absent */
} wm_hf_file;

typedef struct wm_hf_resolve_opts {
    const char *cache_dir; /* NULL: from the environment (see top) */
    const char *endpoint;  /* NULL: $HF_ENDPOINT, else WM_HF_DEFAULT_ENDPOINT */
    const char *token;     /* NULL: $HF_TOKEN, else the token file; "" sends none */
    int offline;           /* 0: from HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE; 1: forbidden; -1: allowed */
    int refresh;           /* 1: ask the hub even when the cache holds everything (branch moved?) */
    int need_set;          /* 1: use `need` as given; 0: WM_HF_NEED_CONFIG | WM_HF_NEED_WEIGHTS */
    unsigned need;
    /*
     * Download selection: a pattern with * ? or [ filters the default file
     * list (fnmatch on the repo name; shards are kept when they match); a
     * plain name adds that file (required). NULL/0: the default list.
     */
    const char *const *include;
    size_t n_include;
    int progress;          /* 1: progress lines on stderr (the caller checks for a TTY) */
    int retries;           /* resumed retries of an interrupted transfer: 0 means 3, <0 none */
    /*
     * 1: a dataset repository (cache folder datasets--ORG--NAME, URLs under /datasets/): its file listing is asked
     * for and the table files (.parquet, .arrow, .jsonl, .json, .csv, .tsv, each optionally .gz) of dataset_split
     * (NULL: every split) under the folder dataset_config (NULL: any; hf/dataset.h's layouts: CONFIG/SPLIT-*,
     * SPLIT-*, data/SPLIT-*, SPLIT.EXT ...) are fetched; none is an error. The model files above are not asked for.
     */
    int dataset;
    const char *dataset_config, *dataset_split;
} wm_hf_resolve_opts;

/* The outcome of wm_hf_resolve_ex. Strings and files live in its arena. */
typedef struct wm_hf_result {
    wm_arena arena;
    wm_hf_source source;
    char folder[PATH_MAX]; /* the folder to load (a snapshot folder for a repo) */
    char root[PATH_MAX];   /* every file must resolve inside it: pass as wm_st_open_opts.root */
    char cache_dir[PATH_MAX];          /* "" for a local folder */
    char repo_id[WM_HF_MAX_REPO_ID + 1];   /* "" for a local folder */
    char revision[WM_HF_MAX_REVISION + 1]; /* as asked ("main" by default) */
    char commit[WM_HF_COMMIT_LEN + 1];     /* "" for a local folder */
    wm_hf_folder_info info;
    wm_hf_file *files; /* what was looked for, in order */
    size_t n_files;
    uint64_t bytes_downloaded;
} wm_hf_result;

/*
 * Resolves spec (see top) to a folder. On success *out is a new result owned
 * by the caller (wm_hf_result_free); on failure *out is NULL and err says
 * why: WM_ERR_INPUT (bad spec, hostile cache entry, missing file, offline
 * miss), WM_ERR_UNSUPPORTED (pickle weights only), WM_ERR_IO (network,
 * disk), WM_ERR_NOMEM. opts may be NULL.
 */
wm_status wm_hf_resolve_ex(const char *spec, const wm_hf_resolve_opts *opts, wm_hf_result **out, wm_error *err);
void wm_hf_result_free(wm_hf_result *r);

/*
 * The short form: writes the folder into folder_out (n bytes) and, when
 * root_out is not NULL, the folder every file must resolve inside.
 */
wm_status wm_hf_resolve(const char *spec, const wm_hf_resolve_opts *opts, char *folder_out, size_t n,
                        char *root_out, size_t root_n, wm_error *err);

/*
 * Looks at the names in folder (no file is opened except through checks):
 * fills *info. root (NULL: folder) is the folder every entry we report must
 * resolve inside; an entry that resolves elsewhere is an error.
 */
wm_status wm_hf_folder_scan(const char *folder, const char *root, wm_hf_folder_info *info, wm_error *err);

/*
 * Checks that folder holds what `need` asks for: refuses pickle-only weights
 * (WM_ERR_UNSUPPORTED, "use safetensors"), names every missing file (the
 * config, model.safetensors, or each shard the index names) and checks the
 * shard names. label names the model in messages.
 */
wm_status wm_hf_folder_check(const char *folder, const char *root, unsigned need, const char *label,
                             wm_error *err);

/*
 * Lists the models in cache_dir (NULL: from the environment) as JSON into
 * j: {"cache_dir", "models": [{repo, revision (refs, comma separated),
 * commit, files, size, path}], "size_on_disk", "incomplete_files",
 * "warnings": [...]}. Entries that break the layout rules (bad refs, links
 * leaving their model folder) are reported as warnings, never followed.
 */
struct wm_json;
wm_status wm_hf_cache_list_json(const char *cache_dir, struct wm_json *j, wm_error *err);

/* ---- small pieces, exposed for the CLI, the tests and the fuzz target ---- */

/* The cache folder from the environment (see top) into out. */
wm_status wm_hf_cache_dir(char *out, size_t n, wm_error *err);
/* The `datasets` library's cache: $HF_DATASETS_CACHE, else $HF_HOME/datasets, else
   ${XDG_CACHE_HOME:-~/.cache}/huggingface/datasets. */
wm_status wm_hf_datasets_cache_dir(char *out, size_t n, wm_error *err);

/* 1 when s is exactly 40 lowercase hex digits (a commit). */
int wm_hf_is_commit(const char *s, size_t n);

/*
 * Splits "ORG/NAME[@REVISION]" and checks both parts (huggingface_hub's
 * repo-id rules: 1-96 of [A-Za-z0-9_.-] per part, no "--" or "..", no leading
 * or trailing '-' or '.'; a revision is 1-255 of [A-Za-z0-9_./-] with no
 * empty, "." or ".." component). revision defaults to "main".
 */
wm_status wm_hf_parse_repo_spec(const char *spec, char *repo_id, size_t repo_n, char *revision, size_t rev_n,
                                wm_error *err);

/*
 * Checks the bytes of a refs/REV file: exactly 40 lowercase hex digits and
 * nothing else. On success commit (41 bytes) receives them.
 */
wm_status wm_hf_check_ref(const void *data, size_t n, const char *label, char *commit, wm_error *err);

/*
 * Reads the weight_map of a model.safetensors.index.json (n bytes at text)
 * and returns its distinct shard names, sorted, in *names / *count (array
 * and strings in arena a). Every name must be a plain *.safetensors file
 * name (no folder, no "..", no control characters). label names the file.
 */
wm_status wm_hf_index_shards(wm_arena *a, const void *text, size_t n, const char *label, const char ***names,
                             size_t *count, wm_error *err);

/*
 * Reads a dataset repository's file listing (the hub's /api/datasets/ORG/NAME/tree/REV?recursive=true: a JSON
 * array of {"type": "file"|"directory", "path": ...}; n bytes at text, at most WM_HF_MAX_TREE_BYTES) and returns
 * the files' paths, sorted, in *names / *count (array and strings in arena a). Every path must be a plain
 * relative name (1-255 bytes, no "..", no leading '/', no control characters or '\\'); at most
 * WM_HF_MAX_TREE_FILES files. label names the listing in messages.
 */
#define WM_HF_MAX_TREE_BYTES (32u << 20)
#define WM_HF_MAX_TREE_FILES 100000
#define WM_HF_MAX_TREE_PAGES 1000 /* pages of a listing the hub paginates (Link: rel="next") */
wm_status wm_hf_tree_files(wm_arena *a, const void *text, size_t n, const char *label, const char ***names,
                           size_t *count, wm_error *err);

/*
 * Normalises an HTTP ETag value (drops a W/ prefix and the quotes) into out
 * (WM_HF_MAX_ETAG + 1 bytes) and checks it is usable as a blob file name
 * (1-128 of [A-Za-z0-9_-]). Returns WM_ERR_INPUT when not.
 */
wm_status wm_hf_etag_normalize(const char *v, size_t n, char *out, wm_error *err);

/* Response headers of one hub answer that matter to us. */
typedef struct wm_hf_http_meta {
    long status;
    char commit[WM_HF_COMMIT_LEN + 8];  /* X-Repo-Commit as sent (checked later) */
    int commit_bad;                      /* X-Repo-Commit too long to keep */
    char etag[WM_HF_MAX_ETAG + 1];       /* ETag, normalised ("" none or unusable) */
    char linked_etag[WM_HF_MAX_ETAG + 1];/* X-Linked-Etag, normalised */
    int etag_bad;                        /* an etag header that was not usable */
    int64_t linked_size;                 /* X-Linked-Size, -1 none, -2 malformed */
    int64_t content_length;              /* Content-Length, -1 none, -2 malformed */
    int64_t range_start, range_total;    /* Content-Range "bytes A-B/T", -1 none, -2 malformed */
    char error_code[64];                 /* X-Error-Code */
    char error_message[256];             /* X-Error-Message */
} wm_hf_http_meta;

void wm_hf_http_meta_reset(wm_hf_http_meta *m);
/* Feeds one raw header line ("Name: value\r\n", or a status line, which resets m). */
void wm_hf_http_meta_line(wm_hf_http_meta *m, const char *line, size_t n);

/* ---- hashes used to verify blobs ---- */



typedef struct wm_sha1 {
    uint32_t h[5];
    uint64_t len;
    uint8_t buf[64];
    size_t n;
} wm_sha1;
void wm_sha1_init(wm_sha1 *s);
void wm_sha1_update(wm_sha1 *s, const void *p, size_t n);
void wm_sha1_final(wm_sha1 *s, uint8_t out[20]);

/* Lowercase hex of n bytes into out (2n + 1 bytes). */
void wm_hex(const uint8_t *p, size_t n, char *out);

#endif

/*
 * cmd_download.c - `winml download -m ORG/NAME[@REV] [--include PATTERN]...`:
 * resolves a model in the Hugging Face cache, downloads what is missing
 * (hf/hub.h), and prints the snapshot folder and its files.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli/cli.h"
#include "hf/hub.h"

#define MAX_INCLUDE 64

static void help(void) {
    printf("usage: winml download -m ORG/NAME[@REVISION] [--include PATTERN]... [-f table|json] [-o FILE] [-q]\n"
           "       winml download --dataset ORG/NAME[@REVISION] [--config C] [--split S] [-f table|json] [-o FILE] [-q]\n\n"
           "Fetches a model into the Hugging Face cache, laid out as huggingface_hub lays it out, and\n"
           "prints the snapshot folder and its files: config.json, generation_config.json, the\n"
           "tokenizer files (tokenizer.json, tokenizer_config.json, special_tokens_map.json, vocab.json,\n"
           "merges.txt, vocab.txt) and model.safetensors or model.safetensors.index.json with every\n"
           "shard it names. Files already cached are not fetched again; an interrupted transfer is\n"
           "resumed; every file is checked against the hub's sha256 / git sha1. A branch or tag is\n"
           "asked for its current commit (REVISION may also be a 40-hex commit). Pickle weights\n"
           "(.bin .pt .pth .ckpt) are never downloaded. -m may also be a local folder (reported as is).\n\n"
           "  --include PATTERN  a glob ('*.json') selects among those files, a plain name\n"
           "                     ('tokenizer.model') adds a file; may be repeated\n\n"
           "--dataset: a dataset repository, into datasets--ORG--NAME of the same cache: its file listing is\n"
           "asked for and the table files (.parquet, .arrow, .jsonl, .json, .csv, .tsv, optionally .gz) of --split\n"
           "(default: every split) under the folder --config (default: any; data/ and the top level) are fetched,\n"
           "as `winml eval --dataset ORG/NAME [--dataset-config C] --split S` then reads them offline.\n\n"
           "environment: HF_HUB_CACHE or HF_HOME (cache folder), HF_ENDPOINT (default\n"
           "https://huggingface.co), HF_TOKEN (sent to the endpoint only, never printed),\n"
           "HF_HUB_OFFLINE=1 (no network: only the cache is used).\n"
           "exit: 0 ok, 2 usage error, missing file or repository, network or disk error.\n");
}

static const char *state_name(wm_hf_file_state s) {
    return s == WM_HF_FILE_DOWNLOADED ? "downloaded" : s == WM_HF_FILE_ABSENT ? "absent" : "present";
}

static const char *source_name(wm_hf_source s) {
    return s == WM_HF_SRC_DOWNLOAD ? "hub" : s == WM_HF_SRC_CACHE ? "cache" : "local";
}

static void emit_tokenizer(wm_json *j, unsigned bits) {
    static const char *const names[] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                                        "vocab.json",     "merges.txt",            "vocab.txt"};
    wm_json_arr(j, "tokenizer");
    for (unsigned i = 0; i < 6; i++)
        if (bits & (1u << i)) wm_json_str(j, NULL, names[i]);
    wm_json_arr_end(j);
}

int wm_cmd_download(int argc, char **argv) {
    wm_cli c;
    wm_cli_init(&c, "winml download");
    enum { O_DATASET = 256, O_CONFIG, O_SPLIT };
    static const struct option longs[] = {WM_CLI_COMMON_LONG, {"include", required_argument, 0, 'I'},
                                          {"dataset", required_argument, 0, O_DATASET},
                                          {"config", required_argument, 0, O_CONFIG},
                                          {"split", required_argument, 0, O_SPLIT}, {0, 0, 0, 0}};
    const char *dataset = NULL, *config = NULL, *split = NULL;
    const char *include[MAX_INCLUDE];
    size_t n_include = 0;
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":" WM_CLI_COMMON_SHORT, longs, NULL)) != -1) {
        if (opt == 'h') {
            help();
            return WM_EXIT_OK;
        }
        if (opt == O_DATASET || opt == O_CONFIG || opt == O_SPLIT) {
            *(opt == O_DATASET ? &dataset : opt == O_CONFIG ? &config : &split) = optarg;
            continue;
        }
        if (opt == 'I') {
            if (n_include == MAX_INCLUDE) return wm_cli_usage_error(&c, "more than %d --include", MAX_INCLUDE);
            include[n_include++] = optarg;
            continue;
        }
        int rc = wm_cli_other_opt(&c, opt, optarg, argv);
        if (rc) return rc;
    }
    if (optind < argc) return wm_cli_usage_error(&c, "unexpected argument '%s'", argv[optind]);
    if (dataset && (c.model || n_include))
        return wm_cli_usage_error(&c, "--dataset: give -m (a model) or --dataset, and --include applies to -m");
    if (!dataset && (config || split)) return wm_cli_usage_error(&c, "--config and --split apply to --dataset");
    if (!c.model && !dataset) return wm_cli_usage_error(&c, "-m ORG/NAME[@REVISION] (or --dataset ORG/NAME) is required");
    const char *spec = dataset ? dataset : c.model;

    wm_hf_resolve_opts o = {.refresh = 1, .include = include, .n_include = n_include, .dataset = dataset != NULL,
                            .dataset_config = config, .dataset_split = split};
    o.progress = !c.json && !c.quiet && isatty(STDERR_FILENO);
    if (n_include) {
        o.need_set = 1; /* with a selection only what is named plainly is required */
        o.need = 0;
    }
    wm_error err = {0};
    wm_hf_result *r = NULL;
    if (dataset && access(dataset, F_OK) == 0)
        return wm_cli_usage_error(&c, "--dataset '%s': a local file or folder; a hub dataset is written ORG/NAME",
                                  dataset);
    if (wm_hf_resolve_ex(spec, &o, &r, &err)) return wm_cli_fail(&c, &err);
    wm_json j;
    wm_json_init(&j);
    wm_json_obj(&j, NULL);
    wm_json_str(&j, dataset ? "dataset" : "model", spec);
    wm_json_str(&j, "source", source_name(r->source));
    wm_json_str(&j, "folder", r->folder);
    wm_json_str(&j, "root", r->root);
    if (r->source != WM_HF_SRC_LOCAL) {
        wm_json_str(&j, "repo_id", r->repo_id);
        wm_json_str(&j, "revision", r->revision);
        wm_json_str(&j, "cache_dir", r->cache_dir);
    }
    if (r->commit[0]) wm_json_str(&j, "commit", r->commit);
    wm_json_uint(&j, "bytes_downloaded", r->bytes_downloaded);
    if (!dataset) { /* a model's entry points */
        wm_json_str(&j, "weights", r->info.weights == WM_HF_WEIGHTS_INDEX    ? "sharded (model.safetensors.index.json)"
                                    : r->info.weights == WM_HF_WEIGHTS_SINGLE ? "model.safetensors"
                                                                              : "none");
        wm_json_bool(&j, "config", r->info.has_config);
        emit_tokenizer(&j, r->info.tokenizer);
    }
    wm_json_arr(&j, "files");
    for (size_t i = 0; i < r->n_files; i++) {
        const wm_hf_file *f = &r->files[i];
        wm_json_obj(&j, NULL);
        wm_json_str(&j, "name", f->name);
        wm_json_str(&j, "state", state_name(f->state));
        wm_json_uint(&j, "size", f->size);
        if (f->etag) wm_json_str(&j, "blob", f->etag);
        wm_json_obj_end(&j);
    }
    wm_json_arr_end(&j);
    wm_json_obj_end(&j);
    int rc = wm_cli_emit(&c, r->folder, &j);
    wm_json_free(&j);
    wm_hf_result_free(r);
    return rc;
}

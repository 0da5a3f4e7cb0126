/*
 * wm_ggufttool - GGUF helper for the oracle tests (tests/oracle/test_gguf.py).
 *
 *   wm_ggufttool made GGUF DIR        writes the files made from the metadata (config.json,
 *                                     generation_config.json, tokenizer.json, tokenizer_config.json) into DIR
 *   wm_ggufttool dequant GGUF NAME OUT  the GGUF tensor NAME as float32 (its own element order) into OUT
 *   wm_ggufttool hf GGUF NAME OUT      the tensor the checkpoint view has under the Hugging Face NAME (conversions
 *                                     applied: Q/K un-permuted, Gemma norms - 1) as float32 into OUT
 *
 * Errors go to stderr with exit 2.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf_hf.h"

static int fail(const wm_error *e) {
    fprintf(stderr, "wm_ggufttool: %s\n", e->msg);
    return 2;
}

static int write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "wm_ggufttool: cannot write %s\n", path);
        return 2;
    }
    return 0;
}

int main(int argc, char **argv) {
    wm_error err = {0};
    if (argc == 4 && !strcmp(argv[1], "made")) {
        wm_hf_checkpoint ck;
        if (wm_gguf_open_checkpoint(argv[2], &ck, NULL, &err)) return fail(&err);
        int rc = 0;
        for (size_t i = 0; i < ck.n_made && !rc; i++) {
            char p[4200];
            snprintf(p, sizeof p, "%s/%s", argv[3], ck.made[i].name);
            rc = write_file(p, ck.made[i].text, ck.made[i].len);
        }
        wm_hf_checkpoint_free(&ck);
        return rc;
    }
    if (argc == 5 && !strcmp(argv[1], "dequant")) {
        wm_gguf_file *f;
        if (wm_gguf_open(argv[2], &f, &err)) return fail(&err);
        const wm_gguf_tensor *t = wm_gguf_find_tensor(f, argv[3]);
        int rc = 2;
        float *v = t ? malloc((t->numel ? t->numel : 1) * sizeof *v) : NULL;
        if (!t) fprintf(stderr, "wm_ggufttool: no tensor '%s'\n", argv[3]);
        else if (!v) fprintf(stderr, "wm_ggufttool: out of memory\n");
        else if (wm_gguf_dequant(t, 0, (size_t)t->numel, v, &err)) rc = fail(&err);
        else rc = write_file(argv[4], v, (size_t)t->numel * sizeof *v);
        free(v);
        wm_gguf_close(f);
        return rc;
    }
    if (argc == 5 && !strcmp(argv[1], "hf")) {
        wm_hf_checkpoint ck;
        wm_st_file *st;
        if (wm_gguf_open_checkpoint(argv[2], &ck, &st, &err)) return fail(&err);
        const wm_st_tensor *t = wm_st_find(st, argv[3]);
        int rc = 2;
        float *v = t ? malloc((t->numel ? t->numel : 1) * sizeof *v) : NULL;
        if (!t) fprintf(stderr, "wm_ggufttool: no tensor '%s'\n", argv[3]);
        else if (!v) fprintf(stderr, "wm_ggufttool: out of memory\n");
        else {
            t->src->read(t->src->ctx, 0, (size_t)t->numel, v);
            rc = write_file(argv[4], v, (size_t)t->numel * sizeof *v);
        }
        free(v);
        wm_st_close(st);
        wm_hf_checkpoint_free(&ck);
        return rc;
    }
    fprintf(stderr, "usage: wm_ggufttool made GGUF DIR | dequant GGUF NAME OUT | hf GGUF NAME OUT\n");
    return 2;
}

/*
 * wm_alloccount - counts heap allocations made by wm_session_run after the
 * first run of a shape (which makes the plan). It interposes malloc,
 * calloc, realloc, aligned_alloc and posix_memalign for the whole process
 * (glibc's __libc_* underneath) and prints one JSON line:
 *   {"runs": N, "allocations": K}
 * Usage: wm_alloccount MODEL.onnx [N] (inputs generated from the specs,
 * sequence 16). Not available in sanitizer builds (they own malloc).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/inputs.h"
#include "winml/runtime.h"

#if defined(__SANITIZE_ADDRESS__)
#define WM_NO_INTERPOSE 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(undefined_behavior_sanitizer)
#define WM_NO_INTERPOSE 1
#endif
#endif

#ifndef WM_NO_INTERPOSE
static atomic_long counting, allocs;
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

void *malloc(size_t n) {
    if (atomic_load(&counting)) atomic_fetch_add(&allocs, 1);
    return __libc_malloc(n);
}
void *calloc(size_t a, size_t b) {
    if (atomic_load(&counting)) atomic_fetch_add(&allocs, 1);
    return __libc_calloc(a, b);
}
void *realloc(void *p, size_t n) {
    if (atomic_load(&counting)) atomic_fetch_add(&allocs, 1);
    return __libc_realloc(p, n);
}
void *aligned_alloc(size_t al, size_t n) {
    if (atomic_load(&counting)) atomic_fetch_add(&allocs, 1);
    return __libc_memalign(al, n);
}
int posix_memalign(void **out, size_t al, size_t n) {
    if (atomic_load(&counting)) atomic_fetch_add(&allocs, 1);
    *out = __libc_memalign(al, n);
    return *out ? 0 : 12;
}
#endif

int main(int argc, char **argv) {
#ifdef WM_NO_INTERPOSE
    (void)argc, (void)argv;
    fprintf(stderr, "wm_alloccount: not available in a sanitizer build\n");
    return 2;
#else
    if (argc < 2) {
        fprintf(stderr, "usage: wm_alloccount MODEL.onnx [RUNS]\n");
        return 2;
    }
    int runs = argc > 2 ? atoi(argv[2]) : 20;
    wm_error err = {0};
    wm_session *s = NULL;
    wm_inputs in = {0};
    if (wm_session_new(argv[1], NULL, &s, &err)) goto fail;
    wm_input_opts o = {.batch = 2, .seq = 16};
    if (wm_inputs_make(s, &o, &in, &err)) goto fail;
    size_t no = wm_session_n_outputs(s);
    wm_tensor out[64];
    if (no > 64 || wm_session_run(s, in.t, in.n, out, no, &err)) goto fail; /* plans */
    atomic_store(&counting, 1);
    for (int i = 0; i < runs; i++)
        if (wm_session_run(s, in.t, in.n, out, no, &err)) goto fail;
    atomic_store(&counting, 0);
    printf("{\"runs\": %d, \"allocations\": %ld}\n", runs, atomic_load(&allocs));
    wm_inputs_free(&in);
    wm_session_free(s);
    return 0;
fail:
    fprintf(stderr, "wm_alloccount: %s\n", err.msg);
    wm_inputs_free(&in);
    wm_session_free(s);
    return 2;
#endif
}

/*
 * wm_audiotool - drives libwinml's audio decoding for the oracle tests.
 *
 *   wm_audiotool load FILE RATE OUT [MAX_SECONDS]   mono float32 samples at RATE (0: the file's own)
 * OUT: int32 rate, int32 source rate, int32 source channels, then the float32 samples (little-endian).
 * Exit codes: 0 ok, 2 error (message on stderr).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audio/audio.h"

int main(int argc, char **argv) {
    if (argc < 5 || strcmp(argv[1], "load")) {
        fprintf(stderr, "usage: wm_audiotool load FILE RATE OUT [MAX_SECONDS]\n");
        return 2;
    }
    wm_error e = {0};
    wm_audio a;
    if (wm_audio_load(argv[2], atoi(argv[3]), argc > 5 ? atof(argv[5]) : 0, &a, &e)) {
        fprintf(stderr, "wm_audiotool: error: %s\n", e.msg);
        return 2;
    }
    int32_t hdr[3] = {a.rate, a.src_rate, a.src_channels};
    FILE *f = fopen(argv[4], "wb");
    int ok = f && fwrite(hdr, sizeof hdr, 1, f) == 1 && (!a.n || fwrite(a.samples, sizeof *a.samples, a.n, f) == a.n);
    if (f && fclose(f)) ok = 0;
    if (ok) printf("%s\n", a.format);
    wm_audio_free(&a);
    if (!ok) {
        fprintf(stderr, "wm_audiotool: error: cannot write %s\n", argv[4]);
        return 2;
    }
    return 0;
}

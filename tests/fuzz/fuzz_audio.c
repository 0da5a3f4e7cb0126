/*
 * libFuzzer target for audio decoding (audio/audio.h: libsndfile over our bytes, mono mixdown, libsoxr): arbitrary
 * bytes decoded at the file's rate and resampled to 16 kHz. Accepted audio must have samples and finite rates;
 * refused input a message. max_seconds is small so that a header claiming hours stays cheap.
 */
#include <stdint.h>
#include <stdlib.h>

#include "audio/audio.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    for (int k = 0; k < 2; k++) {
        wm_error err = {0};
        wm_audio a;
        if (wm_audio_decode(data, size, "fuzz.wav", k ? 16000 : 0, 30.0, &a, &err) != WM_OK) {
            if (!err.msg[0] || a.samples) abort();
            continue;
        }
        if (!a.samples || (!a.n && !k) || a.rate < 1 || a.src_channels < 1) abort();
        volatile float sink = 0;
        for (size_t i = 0; i < a.n; i++) sink += a.samples[i];
        (void)sink;
        wm_audio_free(&a);
    }
    return 0;
}

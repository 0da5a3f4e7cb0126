"""Audio in C (issue 34's front end): src/audio decodes WAV (PCM 16/24/32, float), FLAC and OGG Vorbis with
libsndfile, mixes to mono by averaging channels, and resamples with libsoxr's HQ setting. Oracles: the
`soundfile` package (its own bundled libsndfile) for the decoded samples and `soxr` (python-soxr, librosa's
default resampler 'soxr_hq') for the resampled ones, on a seeded multi-tone signal with noise. Hostile files
exit 2 naming the file, under ASan + UBSan."""
import os
import struct

import numpy as np
import pytest
import soundfile as sf  # the oracle venv has them (tests/oracle/requirements.txt): a missing one fails the run
import soxr
import transformers

import oracle_util as U


@pytest.fixture(scope="module")
def tool(build_dir):
    return os.path.join(build_dir, "wm_audiotool")


@pytest.fixture(scope="module")
def tool_asan(asan_dir):
    return os.path.join(asan_dir, "wm_audiotool")


def signal(rate, seconds, channels, seed=0):
    t = np.arange(int(rate * seconds)) / rate
    rng = np.random.default_rng(seed)
    chans = []
    for c in range(channels):
        x = 0.3 * np.sin(2 * np.pi * (220 + 110 * c) * t) + 0.2 * np.sin(2 * np.pi * 3150 * t + c)
        chans.append(x + 0.05 * rng.standard_normal(t.shape))
    return np.clip(np.stack(chans, 1), -0.99, 0.99)


def load(tool, path, rate, *extra):
    out = str(path) + ".f32"
    r = U.run([tool, "load", path, rate, out, *extra])
    assert r.returncode == 0, U.describe(r)
    b = open(out, "rb").read()
    hdr = struct.unpack("<3i", b[:12])
    return hdr, np.frombuffer(b[12:], np.float32), r.stdout.strip()


CASES = [("wav16", "WAV", "PCM_16", 44100, 2, 0), ("wav24", "WAV", "PCM_24", 48000, 1, 0),
         ("wav32", "WAV", "PCM_32", 22050, 2, 0), ("wavf", "WAV", "FLOAT", 16000, 3, 0),
         ("flac", "FLAC", "PCM_16", 44100, 2, 0), ("ogg", "OGG", "VORBIS", 44100, 2, 2e-4)]


@pytest.mark.parametrize("name,fmt,sub,rate,ch,tol", CASES, ids=[c[0] for c in CASES])
def test_decode_and_resample(tool, tmp_path, name, fmt, sub, rate, ch, tol):
    path = tmp_path / f"{name}.{ 'ogg' if fmt == 'OGG' else fmt.lower()}"
    sf.write(path, signal(rate, 1.3, ch), rate, subtype=sub, format=fmt)
    ref, ref_rate = sf.read(path, dtype="float32", always_2d=True)
    mono = ref.astype(np.float64).mean(1).astype(np.float32)
    (r0, src_rate, src_ch), got, format_name = load(tool, path, 0)
    assert (r0, src_rate, src_ch) == (rate, rate, ch) and ref_rate == rate
    assert got.shape == mono.shape
    assert np.abs(got - mono).max() <= max(tol, 1e-7), np.abs(got - mono).max()
    assert fmt.split()[0][:3].lower() in format_name.lower()
    # to the 16 kHz of wav2vec2 / Whisper feature extractors: libsoxr HQ as python-soxr and librosa
    (r1, _, _), res, _ = load(tool, path, 16000)
    want = soxr.resample(mono, rate, 16000, quality="HQ")
    assert r1 == 16000 and abs(len(res) - len(want)) <= 1, (len(res), len(want))
    k = min(len(res), len(want))
    U.note(f"audio {name}: decode max diff {np.abs(got - mono).max():.2e}, resample {rate}->16000 "
           f"max diff {np.abs(res[:k] - want[:k]).max():.2e}")
    assert np.abs(res[:k] - want[:k]).max() <= max(tol, 1e-5)


def test_too_long_is_refused(tool_asan, tmp_path):
    path = tmp_path / "long.wav"
    sf.write(path, signal(8000, 3.0, 1), 8000, subtype="PCM_16")
    U.assert_clean_error(U.run([tool_asan, "load", path, 0, tmp_path / "o", "2"]), "wm_audiotool", str(path),
                         "allowed")


def wav_header(channels=1, rate=16000, bits=16, data_bytes=0, fmt_tag=1):
    block = channels * bits // 8
    fmt = struct.pack("<HHIIHH", fmt_tag, channels, rate, rate * block, block, bits)
    return (b"RIFF" + struct.pack("<I", 36 + data_bytes) + b"WAVE" + b"fmt " + struct.pack("<I", 16) + fmt +
            b"data" + struct.pack("<I", data_bytes))


HOSTILE = {
    "empty": b"",
    "text": b"this is not audio at all, just words\n" * 20,
    "truncated_header": wav_header()[:30],
    "no_frames": wav_header(data_bytes=0),
    "channels_200": wav_header(channels=200, data_bytes=400) + b"\0" * 400,
    "rate_zero": wav_header(rate=0, data_bytes=64) + b"\0" * 64,
    "claims_huge": wav_header(data_bytes=0x7FFFFFF0) + b"\0" * 64,
    "bad_format_tag": wav_header(fmt_tag=0x1234, data_bytes=64) + b"\0" * 64,
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_audio(tool_asan, tmp_path, case):
    path = tmp_path / f"{case}.wav"
    path.write_bytes(HOSTILE[case])
    r = U.run([tool_asan, "load", path, 16000, tmp_path / "o"], timeout=60)
    if case == "claims_huge":  # a data chunk claiming 2 GB over 64 bytes: the 32 frames that are there, no more
        assert r.returncode == 0 and not U.crashed(r), U.describe(r)
        assert os.path.getsize(tmp_path / "o") == 12 + 32 * 4
        return
    U.assert_clean_error(r, "wm_audiotool", str(path))


# ------------------------------------------------------------ feature extractors (src/audio/features.c)

def speech_like(seconds, seed=3):
    rate = 16000
    t = np.arange(int(rate * seconds)) / rate
    rng = np.random.default_rng(seed)
    f0 = 140 + 40 * np.sin(2 * np.pi * 0.7 * t)
    x = sum(0.2 / k * np.sin(2 * np.pi * k * np.cumsum(f0) / rate) for k in range(1, 8))
    x *= 0.5 + 0.5 * np.sin(2 * np.pi * 2.3 * t) ** 2  # syllable-like envelope
    return (x + 0.01 * rng.standard_normal(t.shape)).astype(np.float32)


def read_mel(path):
    b = open(path, "rb").read()
    n_mels, frames = struct.unpack("<2i", b[:8])
    return np.frombuffer(b[8:], np.float32).reshape(n_mels, frames)


@pytest.mark.parametrize("seconds,n_mels", [(3.7, 80), (31.0, 80), (5.0, 128)])
def test_whisper_log_mel(tool, tmp_path, seconds, n_mels):
    x = speech_like(seconds)
    path = tmp_path / "speech.wav"
    sf.write(path, x, 16000, subtype="FLOAT")
    out = tmp_path / "mel.f32"
    r = U.run([tool, "logmel", path, out, n_mels])
    assert r.returncode == 0, U.describe(r)
    got = read_mel(out)
    fe = transformers.WhisperFeatureExtractor(feature_size=n_mels)
    # numpy's float64 path of transformers (the torch path, float32 STFT, is what __call__ uses when torch is there)
    padded = np.zeros(fe.n_samples, np.float32)
    padded[: min(len(x), fe.n_samples)] = x[: fe.n_samples]
    want = fe._np_extract_fbank_features(padded[None], "cpu")[0]
    assert got.shape == want.shape == (n_mels, 3000)
    d_np = np.abs(got - want).max()
    d_call = np.abs(got - fe(x, sampling_rate=16000, return_tensors="np").input_features[0]).max()
    U.note(f"whisper log-mel {n_mels} x 3000 of {seconds} s: max diff {d_np:.2e} (numpy path), {d_call:.2e} (__call__)")
    assert d_np <= 1e-5 and d_call <= 1e-4


def test_wav2vec2_normalize(tool, tmp_path):
    x = 0.3 + speech_like(2.1)
    path = tmp_path / "s.wav"
    sf.write(path, x, 16000, subtype="FLOAT")
    r = U.run([tool, "norm", path, tmp_path / "n.f32"])
    assert r.returncode == 0, U.describe(r)
    got = np.fromfile(tmp_path / "n.f32", np.float32)
    fe = transformers.Wav2Vec2FeatureExtractor(do_normalize=True)
    want = fe(x, sampling_rate=16000, return_tensors="np").input_values[0]
    assert got.shape == want.shape and np.abs(got - want).max() <= 1e-5


@pytest.mark.parametrize("n", [400, 512, 7])
def test_naive_dft_reference(tool, n):
    r = U.run([tool, "dft", n, 5])
    assert r.returncode == 0, U.describe(r)
    lines = r.stdout.split()
    got = np.array([float(v) for v in lines[2:]])
    seed, x = 5, []
    for _ in range(n):
        seed = (seed * 1103515245 + 12345) & 0xFFFFFFFF
        x.append((seed >> 8) / (1 << 24) - 0.5)
    want = np.abs(np.fft.rfft(np.array(x))) ** 2
    assert np.allclose(got, want, rtol=1e-9, atol=1e-9)


def test_log_mel_edges_under_asan(tool_asan, tmp_path):
    """A clip of 10 samples: padded to 30 s it gives the 3000 frames; unpadded it is shorter than half a window."""
    path = tmp_path / "tiny.wav"
    sf.write(path, np.full(10, 0.1, np.float32), 16000, subtype="FLOAT")
    r = U.run([tool_asan, "logmel", path, tmp_path / "m.f32"])
    assert r.returncode == 0 and not U.crashed(r), U.describe(r)
    assert read_mel(tmp_path / "m.f32").shape == (80, 3000)
    U.assert_clean_error(U.run([tool_asan, "logmel", path, tmp_path / "m2.f32", 80, 0]), "wm_audiotool",
                         "shorter than n_fft")

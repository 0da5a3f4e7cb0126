"""scripts/fuzz.sh, the CI fuzz gate: a failing input left by a fuzzer (crash-, leak-, timeout- or oom- file) fails
the run. Until 77e78ea a leak file alone printed 'no crashes' (`ls a b c` fails when any pattern matches nothing),
and a fuzz_dataset leak went through every CI run."""
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _gate(run_dir, asan_dir):
    env = dict(os.environ, WM_FUZZ_RUN=str(run_dir), WM_BUILD_ASAN=str(asan_dir), WM_FUZZ_SMOKE_SECS="1")
    return subprocess.run(["bash", "scripts/fuzz.sh", "smoke", "dataset"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("kind", ["crash", "leak", "timeout", "oom"])
def test_fuzz_gate_fails_on_a_failing_input(tmp_path, asan_dir, kind):
    if not os.access(os.path.join(asan_dir, "fuzz_dataset"), os.X_OK):
        pytest.fail(f"fuzz_dataset not built in {asan_dir} (make unit-asan)", pytrace=False)
    clean = _gate(tmp_path / "clean", asan_dir)
    assert clean.returncode == 0 and "fuzz_dataset: no crashes" in clean.stderr, clean.stderr[-2000:]
    planted = tmp_path / "planted"
    planted.mkdir()
    (planted / f"fuzz_dataset-{kind}-0123").write_bytes(b"a,b\n1,\"open\n")
    r = _gate(planted, asan_dir)
    assert r.returncode == 1, r.stderr[-2000:]
    assert "failing inputs found" in r.stderr and f"fuzz_dataset-{kind}-0123" in r.stderr, r.stderr[-2000:]

"""Shared helpers for the ONNX oracle tests (binary paths, running tools, result checks).

The binaries come from $WM_BUILD (normal build, default build/) and $WM_BUILD_ASAN
(ASan+UBSan build, default build-asan/). The hostile-input tests run the ASan build when it
exists and fall back to the normal one otherwise (set WM_REQUIRE_ASAN=1 to make a missing
ASan build an error, as CI should).
"""
import contextlib
import fcntl
import glob
import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# UBSan only prints "runtime error" by default; make it fatal so a report also shows in the exit code.
SAN_ENV = {
    "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:exitcode=86",
    "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1:exitcode=87",
    "LSAN_OPTIONS": "exitcode=88:suppressions=" + os.path.join(ROOT, "tests", "lsan-system.supp"),
}
SAN_MARKERS = ("AddressSanitizer", "LeakSanitizer", "UndefinedBehaviorSanitizer", "runtime error", "SUMMARY: ")


def scratch(request, name):
    """A new folder under pytest's base temp for the fixture asking (`request` is its own), removed when that
    fixture is torn down: a module's builds go when the module ends, not at the end of the run. CI's disk can be
    small and the real-weight builds are 0.1 to 1 GB each; a run that kept them all stopped on a full disk."""
    d = request.getfixturevalue("tmp_path_factory").mktemp(name)
    request.addfinalizer(lambda: shutil.rmtree(d, ignore_errors=True))
    return d


_CACHE_LOCKS = {}  # folder -> [open lock file, depth]: the lock is reentrant within one process


@contextlib.contextmanager
def cache_lock(folder):
    """Holds an exclusive flock on FOLDER/.lock while a shared cache folder is read or filled, so that parallel
    pytest-xdist workers (or two sessions) never see a half-written fixture; reentrant within one process."""
    os.makedirs(folder, exist_ok=True)
    key = os.path.realpath(folder)
    ent = _CACHE_LOCKS.get(key)
    if ent is None:
        f = open(os.path.join(key, ".lock"), "w")
        fcntl.flock(f, fcntl.LOCK_EX)
        ent = _CACHE_LOCKS[key] = [f, 0]
    ent[1] += 1
    try:
        yield folder
    finally:
        ent[1] -= 1
        if ent[1] == 0:
            del _CACHE_LOCKS[key]
            fcntl.flock(ent[0], fcntl.LOCK_UN)
            ent[0].close()


def build_dir(var, default):
    d = os.environ.get(var, default)
    return d if os.path.isabs(d) else os.path.join(ROOT, d)


def binary(dir_, name):
    return os.path.join(dir_, name)


def have(dir_, *names):
    return all(os.access(os.path.join(dir_, n), os.X_OK) for n in names)


def env_for():
    env = dict(os.environ)
    env.update(SAN_ENV)
    env.pop("NO_COLOR", None)
    return env


TIMEOUT_RC = -1000


def run(argv, timeout=600, cwd=None):
    """Runs argv, returns CompletedProcess with text stdout/stderr (bytes decoded leniently).
    A run past `timeout` is killed and comes back with returncode TIMEOUT_RC (a hang)."""
    argv = [str(a) for a in argv]
    try:
        r = subprocess.run(argv, capture_output=True, timeout=timeout, cwd=cwd, env=env_for())
    except subprocess.TimeoutExpired as e:
        r = subprocess.CompletedProcess(argv, TIMEOUT_RC, e.stdout or b"",
                                        (e.stderr or b"") + f"\n[killed: no exit within {timeout} s]".encode())
    r.stdout = r.stdout.decode("utf-8", "replace")
    r.stderr = r.stderr.decode("utf-8", "replace")
    return r


def run_fresh(argv, timeout=600):
    """Like run(), but the program starts from a background job of a small shell, so its
    getrusage() peak RSS does not inherit this (possibly large) Python process's RSS:
    Linux keeps ru_maxrss across fork/vfork + exec."""
    return run(["/bin/sh", "-c", '"$@" & wait $!', "sh", *argv], timeout=timeout)


_MEASURE = """import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, st, ru = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write("%d %r %d" % (os.waitstatus_to_exitcode(st), ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024))
"""


def run_measured(argv, timeout=60):
    """Like run(), and also the CPU seconds (user + system) and the peak RSS in bytes of the program (bounds on
    what a refused hostile file may cost). A small fresh interpreter (python -I -S, ~10 MB) forks it and reads its
    rusage with os.wait4: Linux keeps ru_maxrss across fork + exec, so a program forked by this (large) process, or
    by a shell forked by it, would report this process's RSS."""
    import tempfile
    argv = [str(a) for a in argv]
    with tempfile.NamedTemporaryFile("r", suffix=".rusage") as f:
        r = run([sys.executable, "-I", "-S", "-c", _MEASURE, f.name, *argv], timeout=timeout)
        got = f.read().split()
    if not got:  # killed (timeout) before the helper wrote anything
        return r, float("inf"), 0
    r.returncode = int(got[0])
    return r, float(got[1]), int(got[2])


def describe(r):
    return f"argv={r.args!r} rc={r.returncode}\n--- stdout ---\n{r.stdout[-2000:]}\n--- stderr ---\n{r.stderr[-4000:]}"


def crashed(r):
    """True when the process died on a signal, aborted, or a sanitizer reported anything."""
    return r.returncode < 0 or r.returncode >= 128 or r.returncode in (86, 87, 88) or any(
        m in r.stderr for m in SAN_MARKERS)


def assert_clean_error(r, prog, *needles, any_of=None):
    """exit 2, nothing on stdout, exactly one stderr line 'PROG: error: ...' naming the problem."""
    assert not crashed(r), "crash or sanitizer report:\n" + describe(r)
    assert r.returncode == 2, "expected exit 2:\n" + describe(r)
    assert r.stdout == "", "stdout must be empty on error:\n" + describe(r)
    lines = r.stderr.rstrip("\n").split("\n")
    assert len(lines) == 1 and lines[0], "expected exactly one stderr line:\n" + describe(r)
    assert lines[0].startswith(prog + ": "), f"stderr must start with '{prog}: ':\n" + describe(r)
    low = lines[0].lower()
    for n in needles:
        assert n.lower() in low, f"stderr should mention {n!r}:\n" + describe(r)
    if any_of:
        assert any(n.lower() in low for n in any_of), f"stderr should mention one of {any_of!r}:\n" + describe(r)
    return lines[0]


def leftovers(folder):
    """The tool's temporaries, locks and moved-aside folders in folder (core/output.h): none may stay after a run
    ends, whether it succeeded, failed or was stopped by a signal it can handle."""
    pats = ["*.winml-tmp.*", "*.winml-lock", "*.winml-old.*"]
    found = []
    for p in pats:
        found += glob.glob(os.path.join(glob.escape(str(folder)), p))
    return sorted(set(found))


def inspect_json(winml, model, extra=()):
    r = run([winml, "inspect", "-m", model, "-f", "json", *extra])
    assert r.returncode == 0, describe(r)
    return json.loads(r.stdout)


def note(msg):
    """A line for the issue notes: goes to stderr (shown by pytest on failure / with -s) and stdout."""
    print(msg)
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


def read_proc_meminfo_total():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return None


def read_cpuinfo_flags():
    flags = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags") or line.startswith("Features"):
                    flags |= set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return flags


# --------------------------------------------------------------------------- the ONNX backend suites

DEBIAN = "/usr/share/libonnx-testdata/data"
SUITES = ("node", "simple", "pytorch-converted", "pytorch-operator")


def wheel_data():
    return os.path.join(_onnx_dir(), "backend", "test", "data")


def debian_models():
    out = []
    for s in SUITES:
        out += sorted(glob.glob(os.path.join(DEBIAN, s, "*", "model.onnx")))
    return out


def wheel_models():
    d = wheel_data()
    out = []
    for s in SUITES:
        out += sorted(glob.glob(os.path.join(d, s, "*", "model.onnx")))
    out += sorted(glob.glob(os.path.join(d, "light", "*.onnx")))  # small real CNNs (light_*.onnx)
    return out


def _onnx_dir():
    import onnx
    return os.path.dirname(onnx.__file__)

"""Fixtures for the oracle tests: paths of the binaries under test.

WM_BUILD       folder with the normal build (default: build/)
WM_BUILD_ASAN  folder with the ASan+UBSan build (default: build-asan/); the adversarial tests
               use it when present and fall back to WM_BUILD otherwise (with a note on stderr);
               WM_REQUIRE_ASAN=1 turns a missing ASan build into a failure.
A missing binary fails the test that needs it with a clear message; nothing is skipped silently.
"""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # oracle_util, whatever the import mode
import oracle_util as U  # noqa: E402


def pytest_report_header(config):
    b = U.build_dir("WM_BUILD", "build")
    a = U.build_dir("WM_BUILD_ASAN", "build-asan")
    asan = a if U.have(a, "winml", "wm_testtool") else f"MISSING ({a}): hostile-input tests use {b}"
    return [f"winml oracle: WM_BUILD={b}", f"winml oracle: WM_BUILD_ASAN={asan}"]


def _need(dir_, name, var):
    p = U.binary(dir_, name)
    if not os.access(p, os.X_OK):
        pytest.fail(f"{name} not found at {p} (set {var} to the build folder; build it with `make all`)",
                    pytrace=False)
    return p


@pytest.fixture(scope="session")
def build_dir():
    return U.build_dir("WM_BUILD", "build")


@pytest.fixture(scope="session")
def winml(build_dir):
    return _need(build_dir, "winml", "WM_BUILD")


@pytest.fixture(scope="session")
def testtool(build_dir):
    return _need(build_dir, "wm_testtool", "WM_BUILD")


@pytest.fixture(scope="session")
def asan_dir(build_dir):
    """The sanitizer build folder, or the normal one when it is not there."""
    d = U.build_dir("WM_BUILD_ASAN", "build-asan")
    if U.have(d, "winml", "wm_testtool"):
        return d
    if os.environ.get("WM_REQUIRE_ASAN") == "1":
        pytest.fail(f"WM_REQUIRE_ASAN=1 but no ASan build (winml, wm_testtool) in {d}", pytrace=False)
    sys.stderr.write(f"note: no ASan build in {d}; hostile-input tests use {build_dir}\n")
    return build_dir


@pytest.fixture(params=["normal", "asan"])
def wm(request, build_dir, asan_dir):
    """winml of the normal build, then of the sanitizer build: a test taking `wm` runs once with each."""
    return _need(build_dir if request.param == "normal" else asan_dir, "winml",
                 "WM_BUILD" if request.param == "normal" else "WM_BUILD_ASAN")


@pytest.fixture(scope="session")
def winml_asan(asan_dir):
    return _need(asan_dir, "winml", "WM_BUILD_ASAN")


@pytest.fixture(scope="session")
def testtool_asan(asan_dir):
    return _need(asan_dir, "wm_testtool", "WM_BUILD_ASAN")


@pytest.fixture(params=["engine", "onnxruntime"])
def run_model(request):
    """Each builder test runs its export in our engine and in onnxruntime (builder_util.RUNNERS)."""
    import builder_util as BU
    return BU.RUNNERS[request.param]

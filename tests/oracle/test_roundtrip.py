"""Round trip of the ONNX backend test suites through our loader and writer.

Every model.onnx of the Debian libonnx-testdata suites and of the newer suites shipped in the
onnx wheel is loaded by wm_testtool and saved again; the saved model must be equal to the
original as a protobuf message (onnx.load(a) == onnx.load(b), field by field), and must pass
onnx.checker whenever the original does. Models are looped over inside a few test functions
(no pytest item per file) and failures are collected and reported together.
"""
import concurrent.futures as cf
import os
import sys
import time

import onnx
import pytest

import oracle_util as U
from oracle_util import DEBIAN, debian_models, wheel_data, wheel_models


def checker_ok(model):
    try:
        onnx.checker.check_model(model)
        return True, ""
    except Exception as e:  # onnx raises ValidationError and friends
        return False, str(e).split("\n")[0][:200]


def roundtrip_all(testtool, paths, tmp, label):
    """Round-trips paths; returns (stats, failures)."""
    t0 = time.monotonic()
    outs = [os.path.join(tmp, f"{label}_{i}.onnx") for i in range(len(paths))]

    def one(i):
        return U.run([testtool, "roundtrip", paths[i], outs[i]], timeout=120)

    with cf.ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as ex:
        results = list(ex.map(one, range(len(paths))))
    t_tool = time.monotonic() - t0

    st = dict(models=len(paths), equal=0, bytes_identical=0, checker_orig_ok=0, checker_out_ok=0,
              checker_orig_fail=0, tool_s=t_tool)
    failures = []
    for p, out, r in zip(paths, outs, results):
        if r.returncode != 0 or U.crashed(r):
            failures.append(f"{p}: wm_testtool roundtrip exit {r.returncode}: {r.stderr.strip()[:300]}")
            continue
        try:
            a = onnx.load(p)
            b = onnx.load(out)
        except Exception as e:
            failures.append(f"{p}: onnx.load failed on the original or the output: {e}")
            continue
        if a == b:
            st["equal"] += 1
        else:
            # name the first differing top-level field to make the report useful
            diff = [f.name for f in a.DESCRIPTOR.fields if getattr(a, f.name) != getattr(b, f.name)]
            failures.append(f"{p}: saved model differs from the original in {diff or 'unknown fields'}")
        with open(p, "rb") as f1, open(out, "rb") as f2:
            st["bytes_identical"] += f1.read() == f2.read()
        ok_a, why_a = checker_ok(a)
        if ok_a:
            st["checker_orig_ok"] += 1
            ok_b, why_b = checker_ok(b)
            st["checker_out_ok"] += ok_b
            if not ok_b:
                failures.append(f"{p}: the original passes onnx.checker, the output does not: {why_b}")
        else:
            st["checker_orig_fail"] += 1
        os.unlink(out)
    st["total_s"] = time.monotonic() - t0
    return st, failures


def report(label, st, failures):
    U.note(f"roundtrip {label}: {st['models']} models, {st['equal']} equal, "
           f"{st['bytes_identical']} byte-identical, checker ok on {st['checker_orig_ok']} originals "
           f"({st['checker_out_ok']} outputs ok, {st['checker_orig_fail']} originals fail the checker), "
           f"{len(failures)} failures, {st['total_s']:.1f} s (tool {st['tool_s']:.1f} s)")
    for f in failures[:50]:
        sys.stderr.write("  FAIL " + f + "\n")


_totals = {}


@pytest.mark.parametrize("suite", ["debian", "wheel"])
def test_roundtrip_suite(suite, testtool, tmp_path):
    paths = debian_models() if suite == "debian" else wheel_models()
    where = DEBIAN if suite == "debian" else wheel_data()
    assert len(paths) > 100, f"expected the ONNX backend suite under {where}, found {len(paths)} models"
    st, failures = roundtrip_all(testtool, paths, str(tmp_path), suite)
    report(suite, st, failures)
    _totals[suite] = st
    if len(_totals) == 2:
        d, w = _totals["debian"], _totals["wheel"]
        n = d["models"] + w["models"]
        U.note(f"roundtrip: {n} models (debian {d['models']}, wheel {w['models']}), "
               f"{d['equal'] + w['equal']} equal, checker ok on {d['checker_orig_ok'] + w['checker_orig_ok']} "
               f"originals and {d['checker_out_ok'] + w['checker_out_ok']} of their outputs, "
               f"{d['total_s'] + w['total_s']:.1f} s")
    assert st["checker_orig_ok"] > len(paths) // 2, "most suite models should pass the checker"
    assert not failures, f"{len(failures)} of {len(paths)} {suite} models failed the round trip:\n" + "\n".join(
        failures[:100])

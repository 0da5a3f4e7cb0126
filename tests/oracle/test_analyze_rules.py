"""Hostile and malformed EP rule files given to `winml analyze --rules DIR` (the ASan build when present):
every one is exit 2 with one stderr line naming the file, the rule index (rules[N] (Op)) and the field; no
crash, nothing on stdout. Also --ep names that try to leave the folder."""
import json
import os

import onnx
import pytest
from onnx import TensorProto, helper

import oracle_util as U

PROG = "winml analyze"
HEAD = {"ep": "bad", "source": "test", "devices": ["npu"]}
OK_RULE = {"op_type": "Relu", "since": 1, "level": "supported"}


def rules_with(*rules, **top):
    d = dict(HEAD, rules=list(rules))
    d.update(top)
    return json.dumps(d)


# (case name, file text, expected substrings of the message)
CASES = [
    ("bad_level", rules_with(OK_RULE, {"op_type": "Mul", "since": 1, "level": "maybe"}), ["rules[1] (Mul).level"]),
    ("level_unknown", rules_with({"op_type": "Mul", "since": 1, "level": "unknown"}), ["rules[0] (Mul).level"]),
    ("level_number", rules_with({"op_type": "Mul", "since": 1, "level": 3}), ["rules[0] (Mul).level"]),
    ("bad_dtype", rules_with({"op_type": "Add", "since": 1, "level": "supported", "dtypes": {"0": ["float33"]}}),
     ["rules[0] (Add).dtypes.0", "float33"]),
    ("dtype_not_string", rules_with({"op_type": "Add", "since": 1, "level": "supported", "dtypes": {"0": [7]}}),
     ["rules[0] (Add).dtypes.0"]),
    ("dtype_key", rules_with({"op_type": "Add", "since": 1, "level": "supported", "dtypes": {"x": ["float32"]}}),
     ["rules[0] (Add).dtypes", "'x'"]),
    ("dtype_key_negative", rules_with({"op_type": "Add", "since": 1, "level": "supported",
                                       "dtypes": {"-1": ["float32"]}}), ["rules[0] (Add).dtypes"]),
    ("dtype_key_huge", rules_with({"op_type": "Add", "since": 1, "level": "supported",
                                   "dtypes": {"99999999999999999999": ["float32"]}}), ["rules[0] (Add).dtypes"]),
    ("dtype_empty", rules_with({"op_type": "Add", "since": 1, "level": "supported", "dtypes": {"0": []}}),
     ["rules[0] (Add).dtypes.0"]),
    ("until_before_since", rules_with({"op_type": "Add", "since": 3, "until": 2, "level": "supported"}),
     ["rules[0] (Add).until"]),
    ("since_zero", rules_with({"op_type": "Add", "since": 0, "level": "supported"}), ["rules[0] (Add).since"]),
    ("since_float", rules_with({"op_type": "Add", "since": 1.5, "level": "supported"}), ["rules[0] (Add).since"]),
    ("since_missing", rules_with({"op_type": "Add", "level": "supported"}), ["rules[0] (Add).since"]),
    ("unknown_field", rules_with({"op_type": "Add", "since": 1, "level": "supported", "colour": 1}),
     ["rules[0] (Add).colour", "unknown field"]),
    ("device_not_listed", rules_with({"op_type": "Add", "since": 1, "level": "supported", "devices": ["gpu"]}),
     ["rules[0] (Add).devices"]),
    ("device_empty", rules_with({"op_type": "Add", "since": 1, "level": "supported", "devices": []}),
     ["rules[0] (Add).devices"]),
    ("const_inputs_bad", rules_with({"op_type": "Add", "since": 1, "level": "supported", "const_inputs": [99999]}),
     ["rules[0] (Add).const_inputs"]),
    ("const_inputs_type", rules_with({"op_type": "Add", "since": 1, "level": "supported", "const_inputs": "1"}),
     ["rules[0] (Add).const_inputs"]),
    ("max_rank_big", rules_with({"op_type": "Add", "since": 1, "level": "supported", "max_rank": 1000}),
     ["rules[0] (Add).max_rank"]),
    ("static_not_bool", rules_with({"op_type": "Add", "since": 1, "level": "supported", "static_shapes": 1}),
     ["rules[0] (Add).static_shapes"]),
    ("attr_object", rules_with({"op_type": "Add", "since": 1, "level": "supported", "attrs": {"axis": [{}]}}),
     ["rules[0] (Add).attrs.axis"]),
    ("attr_empty", rules_with({"op_type": "Add", "since": 1, "level": "supported", "attrs": {"axis": []}}),
     ["rules[0] (Add).attrs.axis"]),
    ("reason_number", rules_with({"op_type": "Add", "since": 1, "level": "supported", "reason": 5}),
     ["rules[0] (Add).reason"]),
    ("domain_number", rules_with({"op_type": "Add", "since": 1, "level": "supported", "domain": 1}),
     ["rules[0] (Add).domain"]),
    ("op_missing", rules_with(OK_RULE, {"since": 1, "level": "supported"}), ["rules[1].op_type"]),
    ("op_empty", rules_with({"op_type": "", "since": 1, "level": "supported"}), ["rules[0].op_type"]),
    ("rule_not_object", rules_with(OK_RULE, OK_RULE, 7), ["rules[2]"]),
    ("rules_not_array", json.dumps(dict(HEAD, rules={})), ["rules"]),
    ("no_source", json.dumps({"ep": "bad", "devices": ["npu"], "rules": []}), ["source"]),
    ("no_devices", json.dumps({"ep": "bad", "source": "s", "rules": []}), ["devices"]),
    ("bad_device", json.dumps(dict(HEAD, devices=["tpu"], rules=[])), ["devices"]),
    ("top_unknown", json.dumps(dict(HEAD, rules=[], extra=1)), ["extra", "unknown top-level field"]),
    ("top_array", "[1, 2]", ["top level"]),
    ("check_bad", json.dumps(dict(HEAD, rules=[], model_checks={"int64": "sometimes"})), ["model_checks.int64"]),
    ("check_unknown", json.dumps(dict(HEAD, rules=[], model_checks={"speed": True})), ["model_checks.speed"]),
    ("device_checks_other", json.dumps(dict(HEAD, rules=[], device_checks={"gpu": {}})), ["device_checks.gpu"]),
    ("repeated_attrs", rules_with({"op_type": "Add", "since": 1, "level": "supported", "attrs": {"a": [1]}})
     .replace('"attrs": {"a": [1]}', '"attrs": {"a": [1]}, "attrs": {"b": [1], "c": [2], "d": [3]}'),
     ["rules[0] (Add).attrs", "repeated field"]),
    ("repeated_dtypes", rules_with({"op_type": "Add", "since": 1, "level": "supported", "dtypes": {"0": ["float32"]}})
     .replace('"dtypes": {"0": ["float32"]}', '"dtypes": {"0": ["float32"]}, "dtypes": {"1": ["int8"], "2": ["int8"]}'),
     ["rules[0] (Add).dtypes", "repeated field"]),
    ("repeated_index", rules_with({"op_type": "Add", "since": 1, "level": "supported", "dtypes": {"0": ["float32"]}})
     .replace('{"0": ["float32"]}', '{"0": ["float32"], "0": ["int8"]}'), ["rules[0] (Add).dtypes.0", "repeated"]),
    ("repeated_attr_name", rules_with({"op_type": "Add", "since": 1, "level": "supported", "attrs": {"a": [1]}})
     .replace('{"a": [1]}', '{"a": [1], "a": [2]}'), ["rules[0] (Add).attrs.a", "repeated"]),
    ("repeated_top", rules_with(OK_RULE).replace('"ep": "bad"', '"ep": "bad", "ep": "bad"'), ["ep", "repeated"]),
    ("not_json", "{not json", ["not valid JSON"]),
    ("truncated", rules_with(OK_RULE)[:-7], ["not valid JSON"]),
    ("empty", "", ["not valid JSON"]),
    ("binary", "\x89PNG\r\n\x1a\n\xff\xfe", ["not valid JSON"]),
    ("nested", "[" * 100000 + "]" * 100000, ["not valid JSON"]),
    ("nul_inside", rules_with(OK_RULE) + "\0{}", ["NUL byte"]),
    ("huge_number", rules_with({"op_type": "Add", "since": 7, "level": "supported"}).replace(": 7", ": 1e400"),
     ["rules[0] (Add).since"]),
    ("beyond_int64", rules_with({"op_type": "Add", "since": 7, "level": "supported"}).replace(": 7", ": 1e19"),
     ["rules[0] (Add).since"]),
    ("nan_like", rules_with({"op_type": "Add", "since": 1, "level": "supported", "max_rank": 7}).replace(": 7", ": -1e19"),
     ["rules[0] (Add).max_rank"]),
]


@pytest.fixture(scope="module")
def tiny_model(request):
    d = U.scratch(request, "analyze_rules")
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="/model/act/Relu")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    p = str(d / "tiny.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), p)
    return p


@pytest.mark.parametrize("name,text,needles", CASES, ids=[c[0] for c in CASES])
def test_bad_rule_file(winml_asan, tiny_model, tmp_path, name, text, needles):
    d = tmp_path / "rules"
    d.mkdir()
    path = d / "bad.json"
    path.write_bytes(text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text)
    for extra in (["--ep", "bad"], []):  # the named EP, and every file of the folder
        r = U.run([winml_asan, "analyze", "-m", tiny_model, "--rules", str(d), *extra])
        U.assert_clean_error(r, PROG, "bad.json", *needles)
        r = U.run([winml_asan, "analyze", "-m", tiny_model, "--rules", str(d), "-f", "json", *extra])
        U.assert_clean_error(r, PROG, "bad.json", *needles)


def test_oversized_rule_file(winml_asan, tiny_model, tmp_path):
    d = tmp_path / "rules"
    d.mkdir()
    big = rules_with(*([OK_RULE] * 1)) + " " * (17 << 20)
    (d / "big.json").write_text(big)
    U.assert_clean_error(U.run([winml_asan, "analyze", "-m", tiny_model, "--rules", str(d)]), PROG, "big.json",
                         "larger than")


def test_good_rule_file_and_bad_ep_names(winml_asan, tiny_model, tmp_path):
    d = tmp_path / "rules"
    d.mkdir()
    (d / "good.json").write_text(rules_with(OK_RULE))
    r = U.run([winml_asan, "analyze", "-m", tiny_model, "--rules", str(d), "-f", "json"])
    assert r.returncode == 0 and not U.crashed(r), U.describe(r)  # static shapes, Relu has a rule: supported
    t = json.loads(r.stdout)["targets"][0]
    assert t["ep"] == "bad" and t["counts"]["supported"] == 1
    for ep in ("../good", "/etc/passwd", "", "nope"):
        U.assert_clean_error(U.run([winml_asan, "analyze", "-m", tiny_model, "--rules", str(d), "--ep", ep]), PROG,
                             any_of=["--ep"])
    U.assert_clean_error(U.run([winml_asan, "analyze", "-m", tiny_model, "--rules", str(d / "missing")]), PROG,
                         "--rules")
    U.assert_clean_error(U.run([winml_asan, "analyze", "-m", tiny_model, "--rules", str(d), "--device", "tpu"]), PROG,
                         "--device")

"""An input flag given twice is never silently reduced to its last value (issue 31): `winml run` gives one result
per --text (test_real_encoders.py); tokenize's --text / --pair / --decode and generate's --prompt, which take one
input per run, refuse a second one by name (exit 2) instead of dropping the first. The flags are checked before any
model is read, so no model is needed."""
import pytest

import oracle_util as U

CASES = [
    (["tokenize", "-m", "nowhere", "--text", "first", "--text", "second"], "--text given twice"),
    (["tokenize", "-m", "nowhere", "--text", "q", "--pair", "a", "--pair", "b"], "--pair given twice"),
    (["tokenize", "-m", "nowhere", "--decode", "1,2", "--decode", "3"], "--decode given twice"),
    (["generate", "-m", "nowhere", "--prompt", "first", "--prompt", "second"], "--prompt given twice"),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_second_input_refused_by_name(winml, case):
    args, needle = CASES[case]
    r = U.run([winml, *args])
    U.assert_clean_error(r, f"winml {args[0]}", needle)
    assert r.stdout == ""

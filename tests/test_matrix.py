"""Matrix validation: every defect gives one line naming the file, the key and what was
expected; the shipped matrix is valid; rules select the tests they name."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conformance.errors import ConfigError
from conformance.matrix import DEFAULT_MATRIX, load_matrix

GOOD = {
    "version": 1,
    "areas": {"demo": {"description": "d", "dtypes": ["float32"], "builtins": ["m:f"]}},
    "devices": {"cpu": {"dtypes": ["float32"], "areas": ["demo"]}},
}


def _write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "matrix.yaml"
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return path


def _broken(**changes: object) -> dict:
    data = yaml.safe_load(yaml.safe_dump(GOOD))
    for dotted, value in changes.items():
        node = data
        *parents, last = dotted.split("__")
        for p in parents:
            node = node[p]
        node[last] = value
    return data


def test_shipped_matrix_is_valid():
    matrix = load_matrix(DEFAULT_MATRIX)
    assert {"topk", "gemm"} <= set(matrix.areas)
    assert set(matrix.devices) == {"cpu", "cuda", "rocm", "mps", "xpu"}
    assert "float64" not in matrix.devices["mps"].dtypes


def test_top_level_matrix_is_the_shipped_one():
    top = Path(__file__).parents[1] / "device_matrix.yaml"
    assert top.resolve() == DEFAULT_MATRIX.resolve()


@pytest.mark.parametrize("data,key,expected", [
    (_broken(devices__cpu__dtypes="float32"), "devices.cpu.dtypes", "is not of type 'array'"),
    (_broken(devices__cpu__dtypes=["float17"]), "devices.cpu.dtypes[0]", "is not one of"),
    (_broken(version=2), "version", "1 was expected"),
    (_broken(devices__gpu={"dtypes": [], "areas": []}), "devices", "'gpu' is not one of"),
    (_broken(areas__demo__builtins=["not a spec"]), "areas.demo.builtins[0]", "does not match"),
    (_broken(devices__cpu__areas=["nope"]), "devices.cpu.areas[0]", "unknown area 'nope'"),
    (_broken(tolerances=[{"area": "demo", "match": "*", "factor": 0.5,
                          "reason": "tighter than default"}]),
     "tolerances[0].factor", "less than the minimum of 1"),
    (_broken(tolerances=[{"area": "demo", "match": "*", "factor": 2}]),
     "tolerances[0]", "'reason' is a required property"),
    (_broken(expected_failures=[{"area": "demo", "match": "*", "reason": "a known bug here"}]),
     "expected_failures[0]", "'link' is a required property"),
    (_broken(unsupported=[{"area": "other", "match": "*", "reason": "not for this area"}]),
     "unsupported[0].area", "unknown area 'other'"),
    (_broken(unsupported=[{"area": "demo", "match": "*", "reason": "a real reason", "x": 1}]),
     "unsupported[0]", "Additional properties are not allowed"),
])
def test_schema_errors_are_one_line(tmp_path, data, key, expected):
    path = _write(tmp_path, data)
    with pytest.raises(ConfigError) as info:
        load_matrix(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: {key}:"), message
    assert expected in message, message


@pytest.mark.parametrize("text,expected", [
    ("version: 1\nareas: [unclosed\n", "not valid YAML"),
    ("- just\n- a list\n", "expected a mapping"),
])
def test_yaml_errors_are_one_line(tmp_path, text, expected):
    with pytest.raises(ConfigError) as info:
        load_matrix(_write(tmp_path, text))
    assert "\n" not in str(info.value) and expected in str(info.value)


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="cannot read the device matrix"):
        load_matrix(tmp_path / "absent.yaml")


def test_rule_selection(tmp_path):
    data = _broken(expected_failures=[{
        "area": "demo", "match": ["*::test_a[*float32*]"], "devices": ["cuda"],
        "when": ["sm90"], "unless": ["hip"], "reason": "a known bug here",
        "link": "https://example.org/1"}])
    matrix = load_matrix(_write(tmp_path, data))
    (rule,) = matrix.rules_of("expected_failure")
    node = "x/test_d.py::test_a[float32-impl]"
    assert rule.applies(node, "demo", "cuda", frozenset({"sm90"}))
    assert not rule.applies(node, "demo", "cpu", frozenset({"sm90"}))
    assert not rule.applies(node, "demo", "cuda", frozenset({"sm100"}))
    assert not rule.applies(node, "demo", "cuda", frozenset({"sm90", "hip"}))
    assert not rule.applies("x/test_d.py::test_a[float64-impl]", "demo", "cuda",
                            frozenset({"sm90"}))


def test_broken_matrix_exits_4_with_one_line(suite, tmp_path):
    path = _write(tmp_path, _broken(devices__cpu__dtypes=["float17"]))
    run = suite("--device=cpu", f"--device-matrix={path}", "--co", "-q", report=False)
    assert run.returncode == 4, run.output
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert lines == [f"ERROR: {path}: devices.cpu.dtypes[0]: 'float17' is not one of "
                     "['bool', 'uint8', 'int8', 'int16', 'int32', 'int64', 'float16', "
                     "'bfloat16', 'float32', 'float64', 'complex64', 'complex128']"], lines

"""Matrix validation: every defect gives one line naming the file, the key and what was
expected; the shipped matrix is valid; rules select the tests they name."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conformance.harness.errors import ConfigError
from conformance.harness.matrix import DEFAULT_MATRIX, load_matrix

pytestmark = pytest.mark.harness_only  # no torch behaviour: newest torch only in CI

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
    (_broken(expected_failures=[{"area": "demo", "match": "*", "reason": "a known bug here",
                                 "expect": {"check": "*"}}]),
     "expected_failures[0]", "'link' is a required property"),
    (_broken(expected_failures=[{"area": "demo", "match": "*", "reason": "a known bug here",
                                 "link": "https://example.org/1"}]),
     "expected_failures[0]", "'expect' is a required property"),
    (_broken(expected_failures=[{"area": "demo", "match": "*", "reason": "a known bug here",
                                 "link": "https://example.org/1",
                                 "expect": {"check": "*", "raises": "TypeError"}}]),
     "expected_failures[0].expect", "should not be valid"),
    (_broken(expected_failures=[{"area": "demo", "match": "*", "reason": "a known bug here",
                                 "link": "https://example.org/1",
                                 "expect": {"raises": "TypeError", "message": "(unclosed"}}]),
     "expected_failures[0].expect.message", "is not a regular expression"),
    (_broken(expected_failures=[{"area": "demo", "match": "*", "reason": "a known bug here",
                                 "link": "https://example.org/1", "expect": {"check": "*"},
                                 "versions": {"torch": "<<2.13"}}]),
     "expected_failures[0].versions.torch", "is not a PEP 440 version specifier"),
    (_broken(tolerances=[{"area": "demo", "match": "*", "factor": 2, "reason": "a reason",
                          "versions": {"torch": "2.11"}}]),
     "tolerances[0].versions.torch", "is not a PEP 440 version specifier"),
    (_broken(unsupported=[{"area": "demo", "match": "*", "reason": "a real reason",
                           "versions": {"torch": 2.11}}]),
     "unsupported[0].versions.torch", "is not of type 'string'"),
    (_broken(unsupported=[{"area": "demo", "match": "*", "reason": "a real reason",
                           "versions": {}}]),
     "unsupported[0].versions", "should be non-empty"),
    (_broken(unsupported=[{"area": "other", "match": "*", "reason": "not for this area"}]),
     "unsupported[0].area", "unknown area 'other'"),
    (_broken(unsupported=[{"area": "dem.*", "match": "*", "reason": "no such family"}]),
     "unsupported[0].area", "unknown area 'dem.*'"),
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


def test_rule_naming_an_area_family(tmp_path):
    """``area: s.*`` covers every area named ``s.<something>`` and no other; a feature or
    dtype it names must be known to each of them."""
    data = _broken(budget=[{"area": "s.*", "match": "*::test_big[*]", "profiles": ["ci"],
                            "devices": ["cpu"],
                            "reason": "too slow for ci"}])
    for name in ("s.one", "s.two", "sx"):
        data["areas"][name] = {"description": "d", "dtypes": ["float32"], "builtins": ["m:f"]}
    matrix = load_matrix(_write(tmp_path, data))
    (rule,) = matrix.rules_of("budget")
    assert rule.areas == {"s.one", "s.two"}
    node = "x/test_s.py::test_big[float32]"
    assert rule.applies(node, "s.one", "cpu", frozenset())
    assert rule.applies(node, "s.two", "cpu", frozenset())
    assert not rule.applies(node, "sx", "cpu", frozenset())
    assert not rule.applies(node, "demo", "cpu", frozenset())
    data["areas"]["s.two"]["dtypes"] = ["float64"]
    data["unsupported"] = [{"area": "s.*", "impls": ["*"], "dtypes": ["float32"],
                            "reason": "no float32 here"}]
    with pytest.raises(ConfigError, match=r"unsupported\[0\]\.dtypes: .*area s\.two"):
        load_matrix(_write(tmp_path, data))


def test_rule_selection(tmp_path):
    data = _broken(expected_failures=[{
        "area": "demo", "match": ["*::test_a[*float32*]"], "devices": ["cuda"],
        "when": ["sm90"], "unless": ["hip"], "reason": "a known bug here",
        "link": "https://example.org/1", "expect": {"check": "*"}}])
    matrix = load_matrix(_write(tmp_path, data))
    (rule,) = matrix.rules_of("expected_failure")
    node = "x/test_d.py::test_a[float32-impl]"
    assert rule.applies(node, "demo", "cuda", frozenset({"sm90"}))
    assert not rule.applies(node, "demo", "cpu", frozenset({"sm90"}))
    assert not rule.applies(node, "demo", "cuda", frozenset({"sm100"}))
    assert not rule.applies(node, "demo", "cuda", frozenset({"sm90", "hip"}))
    assert not rule.applies("x/test_d.py::test_a[float64-impl]", "demo", "cuda",
                            frozenset({"sm90"}))


def test_except_patterns_leave_ids_out(tmp_path):
    data = _broken(unsupported=[{"area": "demo", "match": "*[impl-bfloat16*",
                                 "except": ["*::test_a[impl-bfloat16]"],
                                 "reason": "all but a sentinel"}])
    (rule,) = load_matrix(_write(tmp_path, data)).rules_of("unsupported")
    assert rule.applies("x.py::test_b[impl-bfloat16-m]", "demo", "cpu", frozenset())
    assert not rule.applies("x.py::test_a[impl-bfloat16]", "demo", "cpu", frozenset())



def test_an_entry_naming_the_shipped_one_in_its_match_applies_to_a_declared_wrapper(tmp_path):
    """Issue 64: an entry whose ``match`` names the shipped implementation in the test id
    (``*::test_b[torch.special.erfcx-*]``) applies to a wrapper that declares it calls it
    (``conformance_wraps``), under the wrapper's own id; not to a plain wrapper, nor to a
    wrapper of another, nor where the name is only part of a parameter."""
    from types import SimpleNamespace

    data = _broken(expected_failures=[{
        "area": "demo", "match": "*::test_b[torch.special.erfcx-*]",
        "except": ["*::test_b[torch.special.erfcx-float16]"],
        "reason": "torch's bug", "link": "https://example.org/2",
        "expect": {"check": "*"}}])
    (rule,) = load_matrix(_write(tmp_path, data)).rules_of("expected_failure")

    def impl(name: str, origin: str, wraps: tuple[str, str] | None) -> SimpleNamespace:
        shipped = (name, "impls.special:erfcx") if origin == "builtin" else wraps
        return SimpleNamespace(name=name, origin=origin, wraps=wraps, spec=f"m:{name}",
                               shipped_as=shipped)

    erfcx = ("torch.special.erfcx", "impls.special:erfcx")
    builtin = impl("torch.special.erfcx", "builtin", None)
    declared = impl("mine-erfcx", "--impl", erfcx)
    plain = impl("mine-erfcx", "--impl", None)
    other = impl("mine-erfcx", "--impl", ("torch.erfc", "impls.special:erfc"))
    at = "x.py::test_b[{}-float64]"
    assert rule.applies(at.format(builtin.name), "demo", "cpu", frozenset(), builtin)
    assert rule.applies(at.format(declared.name), "demo", "cpu", frozenset(), declared)
    assert not rule.applies(at.format(plain.name), "demo", "cpu", frozenset(), plain)
    assert not rule.applies(at.format(other.name), "demo", "cpu", frozenset(), other)
    # the entry's except list is read on the same id
    assert not rule.applies("x.py::test_b[mine-erfcx-float16]", "demo", "cpu", frozenset(),
                            declared)
    # the name must be a whole parameter, not a piece of one
    assert not rule.applies("x.py::test_b[xmine-erfcx-float64]", "demo", "cpu", frozenset(),
                            declared)

def test_broken_matrix_exits_4_with_one_line(suite, tmp_path):
    path = _write(tmp_path, _broken(devices__cpu__dtypes=["float17"]))
    run = suite("--device=cpu", f"--device-matrix={path}", "--co", "-q", report=False)
    assert run.returncode == 4, run.output
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert lines == [f"ERROR: {path}: devices.cpu.dtypes[0]: 'float17' is not one of "
                     "['bool', 'uint8', 'int8', 'int16', 'int32', 'int64', 'float16', "
                     "'bfloat16', 'float32', 'float64', 'complex64', 'complex128']"], lines


def test_version_gates(tmp_path, monkeypatch):
    """An entry applies only where every named distribution is installed at an admitted
    version (PEP 440: local labels ignored, a pre-release of 2.13 is not < 2.13)."""
    from conformance.harness import versions

    fake = {"torch": "2.11.0+cu130", "numpy": "2.4.6", "triton": "3.6.0"}
    monkeypatch.setattr(versions, "installed_version", fake.get)
    entry = {"area": "demo", "match": "*", "reason": "a known bug here",
             "link": "https://example.org/1", "expect": {"check": "*"}}
    cases = [({"torch": "<2.12"}, None), ({"torch": "==2.11.0"}, None),
             ({"torch": ">=2.12"}, "torch 2.11.0+cu130 is outside >=2.12"),
             ({"triton": "<3.7", "numpy": ">=2.4"}, None),
             ({"triton": "<3.7", "numpy": "<2.4"}, "numpy 2.4.6 is outside <2.4"),
             ({"executorch": ">=0"}, "executorch is not installed")]
    data = _broken(expected_failures=[{**entry, "versions": v} for v, _ in cases])
    rules = load_matrix(_write(tmp_path, data)).rules_of("expected_failure")
    for rule, (_, why) in zip(rules, cases, strict=True):
        got = rule.why_not("cpu", frozenset())
        assert (got is None) if why is None else (got is not None and why in got), got
        assert rule.applies("x::t", "demo", "cpu", frozenset()) is (why is None)
    fake["torch"] = "2.13.0.dev20261101+cpu"
    assert rules[0].why_not("cpu", frozenset()) == (
        "torch 2.13.0.dev20261101+cpu is outside <2.12")
    fake["torch"] = "2.12.0rc3"  # a release candidate of 2.12 already has 2.12's fixes
    assert rules[0].why_not("cpu", frozenset()) == "torch 2.12.0rc3 is outside <2.12"
    fake["torch"] = "2.11.1"
    assert rules[0].why_not("cpu", frozenset()) is None


@pytest.mark.parametrize("text,line,key", [
    ("version: 1\nareas: {}\ndevices: {}\nversion: 1\n", 4, "version"),
    ("version: 1\nareas:\n  topk: {description: a, dtypes: [float32], builtins: []}\n"
     "  topk: {description: b, dtypes: [float32], builtins: []}\ndevices: {}\n", 4, "topk"),
    ("version: 1\nareas: {}\ndevices:\n  cuda: {dtypes: [], areas: []}\n"
     "  cpu: {dtypes: [], areas: []}\n  cuda: {dtypes: [float32], areas: []}\n", 6, "cuda"),
    ("version: 1\nareas: {}\ndevices: {}\nunsupported:\n"
     "  - {area: a, reason: r, reason: s}\n", 5, "reason"),
])
def test_duplicate_keys_are_rejected(tmp_path, text, line, key):
    """YAML keeps only the last of two equal keys: a vendor's first entry would vanish."""
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_matrix(path)
    message = str(info.value)
    assert message.startswith(f"{path}: line {line}, column "), message
    assert f"duplicate key {key!r} (first given on line " in message and "\n" not in message


def test_strict_loader_is_still_safe(tmp_path):
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_matrix(_write(tmp_path, "version: !!python/object/apply:os.system ['true']\n"))


def test_a_budget_entry_skips_in_its_profiles_only(suite, tmp_path):
    """A budget entry leaves its cases out of the profiles it names (skipped, with the
    entry and the profile that runs them), and every other profile runs them."""
    from tests.conftest import SUITE

    data = yaml.safe_load(DEFAULT_MATRIX.read_text())
    data["budget"] = [{"area": "special.erfcx", "match": "*::test_forward[*",
                       "devices": ["cpu"], "profiles": ["ci"],
                       "reason": "a planted budget entry"}]
    path = _write(tmp_path, data)
    args = [str(SUITE / "special" / "test_erfcx.py"), "-n", "0", "-q", "--device=cpu",
            f"--device-matrix={path}", "-k", "test_forward and float32"]
    for profile, outcome in (("ci", "skipped"), ("dev", "passed")):
        # in ci nothing is left to run: a run that tests nothing needs --allow-empty
        run = suite(*args, f"--profile={profile}", "--allow-empty")
        assert run.returncode == 0, run.output
        got = {r["outcome"] for r in run.report["results"]}
        assert got == {outcome}, (profile, got)
        if outcome == "skipped":
            reason = run.report["results"][0]["reason"]
            assert "left out by the ci profile: matrix budget[0]: a planted budget" in reason
            assert "--profile dev or thorough runs it" in reason


def test_every_shipped_entry_names_the_releases_it_holds_for():
    """Every expected failure, unsupported and budget entry depends on what some release of
    torch (or of triton, for the interpreter's defects) does: each carries a `versions`
    gate, and the CPU releases they were measured on are listed (ci/release-matrix.sh)."""
    data = yaml.safe_load(DEFAULT_MATRIX.read_text())
    missing = [f"{key}[{i}]" for key in ("expected_failures", "unsupported", "budget")
               for i, e in enumerate(data.get(key) or [])
               if not {"torch", "triton"} & set(e.get("versions") or {})]
    assert not missing, f"entries without a torch / triton version gate: {missing}"
    measured = data["measured"]["cpu"]["torch"]
    assert measured[0] == "2.11.0" and len(measured) >= 4, measured


def test_measured_ranges_and_the_gate_to_narrow_to(monkeypatch):
    from conformance.harness import versions

    installed = {"torch": "2.16.0+cu130"}
    monkeypatch.setattr(versions, "installed_version", installed.get)
    measured = {"torch": ("2.11.0", "2.12.1", "2.13.0", "2.14.1", "2.15.0")}
    open_bug = versions.parse_gate("e", {"torch": ">=2.11"})
    fixed = versions.parse_gate("e", {"torch": "<2.14"})
    assert versions.measured_admitted(fixed, "torch", measured["torch"]) == (
        "2.11.0", "2.12.1", "2.13.0")
    assert versions.beyond_measured(open_bug, measured) == ("torch", "2.16.0+cu130", "2.15.0")
    assert versions.beyond_measured(open_bug, {}) is None  # never measured: no range
    installed["torch"] = "2.15.0"
    assert versions.beyond_measured(open_bug, measured) is None  # the newest measured
    installed["torch"] = "2.16.0.dev20261201"  # a nightly of a newer release: past them
    assert versions.beyond_measured(open_bug, measured)[2] == "2.15.0"
    assert versions.narrowed(open_bug, "torch", "2.16.0", "2.15.0") == ">=2.11,<2.16"
    assert versions.narrowed(open_bug, "torch", "2.15.1", "2.15.0") == ">=2.11,<2.15.1"
    assert versions.narrowed((), "torch", "2.16.0", "2.15.0") == "<2.16"

"""Environment probes of torch are labelled as such and attached to torch's own
implementations only: the CPU matmul library note must not read as a fact about a
plugged-in implementation."""

from __future__ import annotations

import types

import pytest

from tests.conftest import SUITE

pytestmark = pytest.mark.harness_only  # no torch behaviour: newest torch only in CI


def test_torch_probe_note_only_on_torch_builtins(suite):
    run = suite(str(SUITE / "gemm" / "test_gemm.py"), "--device=cpu", "-n", "0",
                "--impl=gemm=planted.gemm_faults:ragged_split_k",
                "-k", "cpu_fp16_blas_path and float16 and (torch.matmul or planted)")
    assert run.returncode == 0, run.output[-3000:]  # K = 4096 is a multiple of 16: exact
    notes = {r["impl"]: r["notes"] for r in run.report["results"]}
    assert set(notes) == {"torch.matmul", "planted.ragged_split_k"}, notes
    assert notes["planted.ragged_split_k"] == {}
    (key,) = notes["torch.matmul"]
    assert key == "torch probe: CPU matmul served by" and notes["torch.matmul"][key]
    summary = (run.report_dir / "summary.md").read_text()
    assert "- gemm / `torch.matmul` / float16: torch probe: CPU matmul served by" in summary
    assert "`planted.ragged_split_k` / float16:" not in summary


def test_an_extra_built_for_another_torch_says_which(monkeypatch):
    """Where executorch is absent on a torch its extra is not built for, the skip reason
    names the torch the extra needs (every executorch case is skipped with it)."""
    import torch

    from conformance.harness import probe

    monkeypatch.setattr(torch, "__version__", "2.15.0+cu130")
    why = probe._absent_reason("executorch", "executorch")
    assert why.startswith("package executorch is not installed, and its extra needs "
                          "torch==2.13.*, not torch 2.15.0+cu130 (executorch 1.5.1 is built")
    monkeypatch.setattr(torch, "__version__", "2.13.0+cpu")
    assert probe._absent_reason("executorch", "executorch") == (
        "package executorch is not installed (pip install -e '.[executorch]')")


def test_cutlass_dsl_is_tagged_only_where_cutlass_cute_imports(monkeypatch):
    """nvidia-cutlass-dsl without libs-core leaves a ``cutlass`` folder with no ``cute``:
    find_spec("cutlass") answers, the import does not. The tag is then absent, with why,
    and flash-attn-4 (written in the CuTe DSL) with it."""
    import importlib
    import importlib.util
    import os
    import types

    from conformance.harness import deps, probe

    real_find, real_import = importlib.util.find_spec, importlib.import_module
    spec = types.SimpleNamespace(submodule_search_locations=[])
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: (
        spec if name in ("cutlass", "flash_attn") else real_find(name, *a)))
    monkeypatch.setattr(deps, "_cached_cute", lambda key: None)  # no cached answer
    monkeypatch.setattr(deps, "_cache_cute", lambda key, why: None)

    def no_cute(name, *args):
        if name == "cutlass.cute":
            raise ModuleNotFoundError("No module named 'cutlass.cute'")
        return real_import(name, *args)

    monkeypatch.setattr(importlib, "import_module", no_cute)
    monkeypatch.delenv(deps.CUTE_ENV, raising=False)
    tags, absent = probe._package_tags()
    assert "cutlass-dsl" not in tags and "flash-attn-4" not in tags
    assert "cutlass.cute does not import (ModuleNotFoundError" in absent["cutlass-dsl"]
    assert "libs-core" in absent["cutlass-dsl"]
    assert absent["flash-attn-4"].startswith("flash_attn.cute needs cutlass.cute")
    assert os.environ[deps.CUTE_ENV] == absent["cutlass-dsl"]  # handed to workers


def test_an_empty_cutlass_cute_namespace_is_not_the_dsl(monkeypatch):
    """Without libs-core, libs-base's ``cutlass/cute/`` sub-folders make ``import
    cutlass.cute`` succeed as an empty namespace package: not the DSL."""
    import importlib
    import types

    from conformance.harness import deps

    real_import = importlib.import_module
    monkeypatch.setattr(importlib, "import_module", lambda name, *a: (
        types.ModuleType(name) if name == "cutlass.cute" else real_import(name, *a)))
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: types.SimpleNamespace(
        submodule_search_locations=[]))
    monkeypatch.setattr(deps, "_cached_cute", lambda key: None)
    monkeypatch.setattr(deps, "_cache_cute", lambda key, why: None)
    monkeypatch.delenv(deps.CUTE_ENV, raising=False)
    assert "empty namespace" in deps.probe_cute_dsl()


def test_the_cute_answer_is_cached_per_installation(monkeypatch, tmp_path):
    """The import (about 1 s) runs once per installation; the answer is keyed by the
    interpreter and the package's files, so a reinstall asks again."""
    import importlib

    from conformance.harness import deps

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    pkg = tmp_path / "site" / "cutlass"
    (pkg / "cute").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "cute" / "__init__.py").write_text("")
    spec = types.SimpleNamespace(submodule_search_locations=[str(pkg)])
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: spec)
    calls = []
    monkeypatch.setattr(deps, "_import_cute", lambda: calls.append(1) or None)
    for _ in range(2):
        monkeypatch.delenv(deps.CUTE_ENV, raising=False)
        assert deps.probe_cute_dsl() is None
    assert calls == [1]  # the second process read the cache
    (pkg / "cute" / "__init__.py").write_text("# reinstalled\n")
    monkeypatch.delenv(deps.CUTE_ENV, raising=False)
    deps.probe_cute_dsl()
    assert calls == [1, 1]

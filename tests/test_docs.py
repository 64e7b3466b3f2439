"""The front door (issue 39): a short README with the Quick start CI runs and one table of
exit codes, links that resolve, and a docs site that builds with warnings as errors with
every page in its navigation."""

from __future__ import annotations

import fnmatch
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.harness_only  # no torch behaviour: newest torch only in CI

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_README_LINES = 250
TABLE = re.compile(r"^<!-- exit-codes\b.*?-->\n(.*?)\n<!-- /exit-codes -->$", re.S | re.M)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _readme() -> str:
    return README.read_text(encoding="utf-8")


def _exit_table(text: str, where: str) -> list[list[str]]:
    found = TABLE.findall(text)
    assert len(found) == 1, f"{where}: one exit-code table between the exit-codes markers"
    rows = [line for line in found[0].splitlines() if line.strip()]
    # split on the cells' pipes, not on an escaped \| inside a cell
    return [[c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]] for row in rows]


def test_readme_is_short():
    n = len(_readme().splitlines())
    assert n <= MAX_README_LINES, f"README.md has {n} lines (at most {MAX_README_LINES}): " \
                                  "move reference text to docs/"


def test_readme_quick_start_runs_what_ci_runs():
    """The newest leg of .ci/run runs the Quick start's commands, word for word."""
    ci = (ROOT / ".ci" / "run").read_text()
    newest = ci.split("# ---- newest", 1)[1].split("# ---- executorch", 1)[0]
    commands = [line.strip().removeprefix("run_pytest ") for line in newest.splitlines()
                if re.match(r"\s*(run_pytest pytest|torch-conformance|pytest)\b", line)]
    assert commands, "no pytest / torch-conformance command found in .ci/run's newest leg"
    quick = _readme().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    for command in commands:
        assert f"\n{command}\n" in quick, f"README Quick start lacks CI's command: {command}"
    assert '\npython -m pip install -e ".[dev]"\n' in quick  # what the newest leg installs
    assert '-e ".[dev]"' in newest


def test_exit_code_table_lists_every_code():
    rows = _exit_table(_readme(), "README.md")
    header, rule, body = rows[0], rows[1], rows[2:]
    # pytest's exit codes, which the qualification's verdicts map onto
    codes = [str(int(c)) for c in pytest.ExitCode if c <= pytest.ExitCode.NO_TESTS_COLLECTED]
    assert header == ["command", *codes], header
    for later in (c for c in pytest.ExitCode if c > pytest.ExitCode.NO_TESTS_COLLECTED):
        assert f"exits {int(later)}" in _readme(), f"README: pytest's exit code {later!r}"
    assert all(set(c) <= set("-:") for c in rule)
    assert all(len(r) == len(header) for r in body), "a row with the wrong number of cells"
    from conformance.report.consistency import EXIT_OF

    assert {str(v) for v in EXIT_OF.values()} <= set(codes)
    qual = next(r for r in body if r[0].startswith("`pytest"))
    for verdict, code in EXIT_OF.items():
        assert verdict in qual[header.index(str(code))], (verdict, code)
    assert "usage error" in qual[header.index("4")]
    # every torch-conformance command has its row
    from conformance.cli.main import parser

    sub = next(a for a in parser()._actions if a.dest == "command")
    named = {r[0].strip("`").split()[1] for r in body if r[0].startswith("`torch-conformance ")}
    missing = set(sub.choices) - named
    assert not missing, f"exit-code table has no row for torch-conformance {sorted(missing)}"
    # every row says something for 0, and the usage-error column is filled where the
    # command has one line usage errors (argparse-based commands)
    for r in body:
        assert r[1] != "-", r[0]


def test_the_docs_exit_code_table_is_the_readmes():
    page = (DOCS / "reference" / "exit-codes.md").read_text(encoding="utf-8")
    assert _exit_table(page, "docs/reference/exit-codes.md") == _exit_table(_readme(),
                                                                           "README.md")


@pytest.mark.parametrize("path", ["README.md", "CHANGELOG.md"])
def test_front_door_links_resolve(path):
    text = (ROOT / path).read_text(encoding="utf-8")
    headings = {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
                for h in re.findall(r"^#+ (.*)$", text, re.M)}
    bad = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        if not file:
            if anchor not in headings:
                bad.append(target)
        elif not (ROOT / file).exists():
            bad.append(target)
    assert not bad, f"{path}: links that resolve to nothing: {bad}"
    if path == "README.md":
        assert any(t.startswith("docs/") for t in LINK.findall(text))


def test_license_and_changelog():
    assert "BSD 3-Clause" in (ROOT / "LICENSE").read_text()
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'license = { text = "BSD-3-Clause" }' in pyproject
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert "## Unreleased" in changelog
    for version in ("0.1.0", "0.2.0", "0.3.0"):
        assert f"## {version} - " in changelog


def _config() -> dict:
    return yaml.safe_load((ROOT / "mkdocs.yml").read_text())


def _nav_pages(nav) -> list[str]:
    out: list[str] = []
    for item in nav:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            for value in item.values():
                out += [value] if isinstance(value, str) else _nav_pages(value)
    return out


def _excluded(rel: str, patterns: str) -> bool:
    for pattern in (p.strip() for p in (patterns or "").splitlines()):
        if not pattern or pattern.startswith("#"):
            continue
        anchored = pattern.lstrip("/")
        if anchored.endswith("/"):
            if fnmatch.fnmatch(rel, anchored + "*"):
                return True
        elif fnmatch.fnmatch(rel, anchored) or fnmatch.fnmatch(Path(rel).name, anchored):
            return True
    return False


def test_every_docs_page_is_in_the_nav():
    config = _config()
    assert config["docs_dir"] == "docs" and config["theme"]["font"] is False
    nav = _nav_pages(config["nav"])
    assert len(nav) == len(set(nav)), "a page twice in the nav"
    missing = [p for p in nav if not (DOCS / p).is_file()]
    assert not missing, f"mkdocs.yml's nav names pages that do not exist: {missing}"
    pages = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    left_out = [p for p in pages if p not in nav
                and not _excluded(p, config.get("not_in_nav", ""))
                and not _excluded(p, config.get("exclude_docs", ""))]
    assert not left_out, f"docs pages neither in mkdocs.yml's nav nor excluded: {left_out}"


def test_the_site_is_offline_and_validated():
    config = _config()
    plugins = [p if isinstance(p, str) else next(iter(p)) for p in config.get("plugins", [])]
    assert set(plugins) <= {"search"}, plugins  # no plugin that fetches from the network
    links = config["validation"]["links"]
    assert links["anchors"] == links["not_found"] == "warn"
    assert config["validation"]["nav"]["omitted_files"] == "warn"


def test_mkdocs_build_strict(tmp_path):
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        pytest.skip("[skipped] mkdocs-material is not installed (pip install -e '.[docs]'; "
                    "the dev extra brings it)")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(tmp_path / "site")], cwd=ROOT, env=env, capture_output=True,
                          text=True, check=False, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "WARNING" not in out, out
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "reference" / "exit-codes.html").is_file()


def test_no_pointers_to_readme_sections():
    """The README is short now: comments point at the docs pages, not at README sections
    (the GPU campaign's own README.md and impls' package READMEs are other files)."""
    pattern = re.compile(r"README(?:'s)?,? \"|README, [A-Z]|\(README\b(?!\.md)")
    paths = [*(ROOT / "conformance").rglob("*.py"), *(ROOT / "conformance").rglob("*.yaml"),
             *(ROOT / "conformance").rglob("*.j2"), *(ROOT / "ci").glob("*.sh"),
             ROOT / ".ci" / "run"]
    stale = [f"{p.relative_to(ROOT)}:{i}" for p in paths
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if pattern.search(line)]
    assert not stale, f"pointers to README sections (point at docs/ instead): {stale}"

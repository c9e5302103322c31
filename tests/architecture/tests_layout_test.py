"""`tests/` mirrors the package and test doubles live in `testing/` (docs/architecture.md, "Tests").

- A test of `dsv4ops/<area>/<sub>/...` lives in `tests/<area>/<sub>/`, a test of a top-level module
  `dsv4ops/<module>.py` in `tests/<module>_test.py`, a test of the CLI verb `dsv4ops/cli/<verb>.py` in
  `tests/cli/<verb>_test.py` (or `<verb>_<aspect>_test.py`). `tests/architecture/` tests the whole.
- Under `tests/` there are only test modules, `conftest.py` (fixtures; their helpers live in
  `testing/`), `__init__.py` and `fixtures/` data trees; no class named Fake*/Scripted* and no
  subclass of one: doubles are shared from `testing/`.
- `testing/` holds one module per package area, named after it (`testing/<area>.py`), and the
  programs tests start as processes in `testing/programs/<area>_<thing>.py`.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "dsv4ops"
TESTS = ROOT / "tests"
TESTING = ROOT / "testing"

WHOLE_PACKAGE_DIRS = {"architecture"}  # tests of the package as a whole, not of one area
# dsv4ops/cli/__init__.py: the entry point (main_<aspect>_test.py too: the project, the tour), lazy imports
CLI_PACKAGE_TESTS = {"main", "imports"}
SUPPORT_FILES = {"conftest.py", "__init__.py"}
DATA_DIR = "fixtures"  # data trees (e.g. a synthetic SGLang source tree), never collected
# testing/ modules that serve every area rather than one: free ports, the package read as source,
# the suite's schedule over xdist workers.
SHARED_TESTING = {"__init__", "ports", "package_ast", "workers"}
DOUBLE_PREFIXES = ("Fake", "Scripted")


def _python_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if DATA_DIR not in p.relative_to(root).parts)


def _areas() -> set[str]:
    """Package areas and top-level modules: `canary`, `orchestrate`, `deployment`, `secrets`..."""
    dirs = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    return dirs | {p.stem for p in PACKAGE.glob("*.py") if not p.stem.startswith("_")}


def _layout_problem(path: Path) -> str | None:
    """Why a file under tests/ is out of place, or None."""
    rel = path.relative_to(TESTS)
    if path.name in SUPPORT_FILES:
        return None
    if not path.name.endswith("_test.py"):
        return "not a test module: a helper or double belongs in testing/"
    stem = path.name.removesuffix("_test.py")
    if len(rel.parts) == 1:
        return (
            None if (PACKAGE / f"{stem}.py").exists() else f"no top-level module dsv4ops/{stem}.py"
        )
    area_dirs = rel.parts[:-1]
    if area_dirs[0] in WHOLE_PACKAGE_DIRS:
        return None
    package_dir = PACKAGE.joinpath(*area_dirs)
    if not (package_dir / "__init__.py").exists():
        return f"no package dsv4ops/{'/'.join(area_dirs)}/ to mirror"
    if area_dirs == ("cli",):
        verbs = {p.stem for p in package_dir.glob("*.py") if not p.stem.startswith("_")}
        verb = next((v for v in sorted(verbs) if stem == v or stem.startswith(f"{v}_")), None)
        package_test = any(stem == t or stem.startswith(f"{t}_") for t in CLI_PACKAGE_TESTS)
        if verb is None and not package_test:
            return f"tests/cli/ holds <verb>_test.py for dsv4ops/cli/<verb>.py; {stem!r} is no verb"
    return None


def _doubles(path: Path, root: Path = ROOT) -> list[str]:
    """Classes in `path` named Fake*/Scripted* or derived from one (by the base's name)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if not isinstance(node, ast.ClassDef):
            continue
        bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases]
        if node.name.startswith(DOUBLE_PREFIXES) or any(
            b.startswith(DOUBLE_PREFIXES) for b in bases
        ):
            found.append(f"{path.relative_to(root)}:{node.lineno} class {node.name}")
    return found


def test_every_test_file_mirrors_a_package_area() -> None:
    problems = [
        f"{p.relative_to(ROOT)}: {why}"
        for p in _python_files(TESTS)
        if (why := _layout_problem(p)) is not None
    ]
    assert problems == []


def test_every_test_directory_is_a_package_area_with_an_init() -> None:
    dirs = {p.parent for p in _python_files(TESTS)} - {TESTS}
    missing = sorted(str(d.relative_to(ROOT)) for d in dirs if not (d / "__init__.py").exists())
    assert missing == []  # without it two `canary_test.py` in different areas collide


def test_no_test_doubles_under_tests() -> None:
    doubles = [d for p in _python_files(TESTS) for d in _doubles(p)]
    assert doubles == [], "shared doubles live in testing/<area>.py"


def _conftest_helpers(path: Path, root: Path = ROOT) -> list[str]:
    """Top-level functions and classes of a conftest.py that are not fixtures (pytest's own
    hooks, `pytest_*`, are what a conftest is for: not helpers)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        f"{path.relative_to(root)}:{node.lineno} {node.name}"
        for node in tree.body
        if isinstance(node, ast.ClassDef)
        or (
            isinstance(node, ast.FunctionDef)
            and not node.name.startswith("pytest_")
            and not any("fixture" in ast.unparse(d) for d in node.decorator_list)
        )
    ]


def test_conftest_files_hold_fixtures_only() -> None:
    helpers = [
        h for p in _python_files(TESTS) if p.name == "conftest.py" for h in _conftest_helpers(p)
    ]
    assert helpers == [], "helpers that tests import live in testing/<area>.py"


def test_testing_holds_one_module_per_package_area() -> None:
    areas = _areas()
    stray = sorted(
        p.name for p in TESTING.glob("*.py") if p.stem not in SHARED_TESTING and p.stem not in areas
    )
    assert (
        stray == []
    ), f"one testing/ module per package area, named after it: one of {sorted(areas)}"
    programs = sorted(
        p.name
        for p in (TESTING / "programs").glob("*.py")
        if p.stem != "__init__" and p.stem.split("_")[0] not in areas
    )
    assert programs == [], "name testing/programs/ modules <area>_<thing>.py"
    imported_as_module = sorted(
        p.name for p in TESTING.glob("*.py") if 'if __name__ == "__main__":' in p.read_text()
    )
    assert imported_as_module == [], "a program the tests start belongs in testing/programs/"
    assert sorted(p.name for p in TESTING.rglob("*_test.py")) == []  # tests live under tests/


def test_the_rules_catch_what_they_are_for(tmp_path: Path) -> None:
    """The checks above fail on the layouts they forbid (so their passing means something)."""
    assert _layout_problem(TESTS / "orchestrate" / "fake_control.py") is not None
    assert _layout_problem(TESTS / "nosuch" / "x_test.py") is not None
    assert _layout_problem(TESTS / "cli" / "nosuchverb_test.py") is not None
    assert _layout_problem(TESTS / "nosuchmodule_test.py") is not None
    assert _layout_problem(TESTS / "cli" / "deploy_ssh_test.py") is None
    assert _layout_problem(TESTS / "usecases" / "gate_test.py") is None
    double = tmp_path / "x_test.py"
    double.write_text(
        "class FakeThing:\n    pass\n\n\nclass Variant(mod.ScriptedServer):\n    pass\n"
    )
    assert [d.rsplit(" ", 1)[1] for d in _doubles(double, root=tmp_path)] == [
        "FakeThing",
        "Variant",
    ]
    conftest = TESTS / "conftest.py"
    assert _conftest_helpers(conftest) == []
    helper = tmp_path / "conftest.py"
    helper.write_text(
        "import pytest\n\n\n@pytest.fixture\ndef ok():\n    pass\n\n\ndef cli():\n    pass\n"
        "\n\ndef pytest_sessionstart(session):\n    pass\n"
    )
    assert [h.rsplit(" ", 1)[1] for h in _conftest_helpers(helper, root=tmp_path)] == ["cli"]

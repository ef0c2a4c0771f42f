"""The package's layout: the product (openwrt_wolf/) never imports the testbed (tests/: the
stand-in kit, the malta stand-in guest, the fake router), so test-only code cannot creep back
into what users run. Read from the source with ast, not by importing it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "openwrt_wolf"


def imported(source: str) -> list[str]:
    """Every module a Python source imports: import statements (relative ones keep their dots)
    and importlib.import_module / __import__ calls with a literal name."""
    names: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names.append("." * node.level + (node.module or ""))
        elif isinstance(node, ast.Call) and node.args:
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            arg = node.args[0]
            if name in ("import_module", "__import__") and isinstance(arg, ast.Constant):
                names.append(str(arg.value))
    return names


def is_testbed(module: str) -> bool:
    return module == "tests" or module.startswith("tests.")


def test_the_oracle_sees_every_kind_of_import() -> None:
    src = (
        "import tests.standin.kit\nfrom tests.standin import malta_guest\n"
        "import importlib\nimportlib.import_module('tests.fake_router')\n"
        "from . import proc\nimport os\n"
    )
    assert [m for m in imported(src) if is_testbed(m)] == [
        "tests.standin.kit",
        "tests.standin",
        "tests.fake_router",
    ]
    assert not is_testbed("testsuite") and not is_testbed(".tests")


def test_the_product_never_imports_the_testbed() -> None:
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 100  # the whole package was read
    found = [
        f"{f.relative_to(ROOT)}: {m}"
        for f in files
        for m in imported(f.read_text(encoding="utf-8"))
        if is_testbed(m)
    ]
    assert found == []


# --- docs/architecture.md names every module and folder ------------------------------------

DOC = ROOT / "docs" / "architecture.md"
ROW = re.compile(r"^\|[^|]*\|\s*`(?P<folder>[\w/]+/)`\s*\|(?P<rest>.*)$")


def package_layout(package: Path) -> dict[str, set[str]]:
    """Every folder of the package (``openwrt_wolf/`` for its top, else relative: ``perf/``,
    ``data/perf/``) -> the modules in it (``__init__.py`` aside: its folder names it)."""
    layout: dict[str, set[str]] = {}
    for d in [package, *sorted(p for p in package.rglob("*") if p.is_dir())]:
        if d.name == "__pycache__" or "__pycache__" in d.parts:
            continue
        key = "openwrt_wolf/" if d == package else f"{d.relative_to(package).as_posix()}/"
        layout[key] = {f.name for f in d.glob("*.py") if f.name != "__init__.py"}
    return layout


def problems(doc: str, layout: dict[str, set[str]], stages: set[str]) -> list[str]:
    """What the doc misses or names wrongly: each folder with modules has its row in the table
    (`folder/` in the second column) naming every module there and no other; every folder is
    named somewhere; every stage is in the diagram (the first ``` block)."""
    rows = {m["folder"]: m["rest"] for line in doc.splitlines() if (m := ROW.match(line))}
    diagram = doc.split("```")[1]
    out = []
    for folder, modules in sorted(layout.items()):
        if f"`{folder}`" not in doc and not in_diagram(folder, diagram):
            out.append(f"folder {folder} is not named")
        if not modules:
            continue
        if folder not in rows:
            out.append(f"folder {folder} has no row in the table")
            continue
        named = set(re.findall(r"`([\w]+\.py)`", rows[folder].split("|")[0]))
        out += [f"{folder}{m} is not named in its row" for m in sorted(modules - named)]
        out += [f"{folder}{m} is named but does not exist" for m in sorted(named - modules)]
    out += [f"row {f} names no folder of the package" for f in sorted(rows.keys() - layout.keys())]
    out += [
        f"stage {s}/ is not in the diagram" for s in sorted(stages) if not in_diagram(s, diagram)
    ]
    return out


def in_diagram(folder: str, diagram: str) -> bool:
    """``perf/`` as a name of its own there, not the tail of ``data/perf/``."""
    return re.search(rf"(?<![\w/]){re.escape(folder.rstrip('/'))}/", diagram) is not None


def stages(package: Path) -> set[str]:
    return {p.parent.name for p in package.glob("*/__init__.py")}


def test_architecture_doc_names_every_module_folder_and_stage() -> None:
    layout = package_layout(PACKAGE)
    assert {"perf/", "queue/", "targets/vm/", "openwrt_wolf/"} <= layout.keys()
    assert problems(DOC.read_text(encoding="utf-8"), layout, stages(PACKAGE)) == []


def test_the_doc_check_fails_on_what_it_should() -> None:
    doc = DOC.read_text(encoding="utf-8")
    layout = package_layout(PACKAGE)
    layout["perf/"] = layout["perf/"] | {"newthing.py"}  # a module added, the doc not
    layout["queue/"] = layout["queue/"] - {"url.py"}  # a module gone, the doc not
    layout["newstage/"] = {"a.py"}
    found = problems(doc, layout, stages(PACKAGE) | {"newstage"})
    assert found == [
        "folder newstage/ is not named",
        "folder newstage/ has no row in the table",
        "perf/newthing.py is not named in its row",
        "queue/url.py is named but does not exist",
        "stage newstage/ is not in the diagram",
    ]


def test_at_most_eight_loose_modules_at_the_package_root() -> None:
    """docs/conventions.md: what is not a stage lives in a folder that says what it is."""
    loose = sorted(p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py")
    assert len(loose) <= 8, f"{len(loose)} loose modules at openwrt_wolf/: {loose}"


# --- module names used twice: only those the doc explains --------------------------------

TWICE = re.compile(r"^- (?P<names>(?:`\w+\.py`(?:, | \(|:))+)", re.M)


def doubled(package: Path) -> set[str]:
    """Module names found in more than one folder of the package."""
    seen: dict[str, int] = {}
    for f in package.rglob("*.py"):
        if "__pycache__" not in f.parts:
            seen[f.name] = seen.get(f.name, 0) + 1
    return {n for n, count in seen.items() if count > 1}


def explained(doc: str) -> set[str]:
    """The names the doc's 'Module names used twice' list gives a reason for."""
    section = doc.split("## Module names used twice", 1)[1].split("\n## ", 1)[0]
    return {n for m in TWICE.finditer(section) for n in re.findall(r"`(\w+\.py)`", m["names"])}


def test_a_module_name_is_used_twice_only_where_the_doc_says_why() -> None:
    """'No two modules of one name where one would do' (issue 33): a new pair of names fails
    here until the doc explains it, and a pair gone must leave the doc too."""
    assert doubled(PACKAGE) == explained(DOC.read_text(encoding="utf-8"))


def test_the_doubled_names_check_sees_a_new_pair(tmp_path: Path) -> None:
    for f in ("a/model.py", "b/model.py", "a/one.py"):
        (tmp_path / f).parent.mkdir(exist_ok=True)
        (tmp_path / f).write_text("")
    assert doubled(tmp_path) == {"model.py"}

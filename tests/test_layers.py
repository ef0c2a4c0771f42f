"""The stage folders as layers (issue 33): a stage imports only the stages below it, and never
another stage's cli.py. Every import counts, the ones inside functions too (read with ast from
the source, never by importing it). KNOWN held the imports that broke the contract when the
test came (18); issue 33's moves took them all away, so it is empty and may only stay so: a
new upward import fails here."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "openwrt_wolf"

# lowest first; a stage may import the ones before it (docs/architecture.md, the flow:
# catalogue → patchset → build → firmware → footprint → targets → measure → perf → queue →
# report, on the floors trust, files, catalogue (the facts a record refers to), results and
# host)
LAYERS = ("trust", "files", "catalogue", "results", "host", "patchset", "firmware", "build",
          "footprint", "whatif", "targets", "measure", "perf", "queue", "report")  # fmt: skip

# (importing file, imported module) that may break the contract: none since issue 33's moves
KNOWN: set[tuple[str, str]] = set()


def imports(path: Path, root: Path = ROOT) -> set[str]:
    """The openwrt_wolf modules a file imports, inside functions too, each by the module
    itself: ``from .x import y`` is ``...x.y`` when y is a module, else ``...x``."""
    rel = path.relative_to(root).with_suffix("").parts
    package = rel[:-1]  # a module's package; an __init__.py's is its own folder
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = list(package[: len(package) - node.level + 1]) if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            for a in node.names:
                out.add(f"{mod}.{a.name}" if _is_module(f"{mod}.{a.name}", root) else mod)
    return {m for m in out if m.startswith("openwrt_wolf.")}


def _is_module(module: str, root: Path) -> bool:
    p = root.joinpath(*module.split("."))
    return p.with_suffix(".py").is_file() or (p / "__init__.py").is_file()


def stage_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def breaks(path: Path, root: Path = ROOT) -> set[tuple[str, str]]:
    """This file's imports that break the contract: a stage above its own, or another
    stage's cli module."""
    rel = path.relative_to(root / "openwrt_wolf")
    own = rel.parts[0] if len(rel.parts) > 1 and rel.parts[0] in LAYERS else None
    found: set[tuple[str, str]] = set()
    for mod in imports(path, root):
        stage = stage_of(mod)
        if own is None or stage is None or stage == own:
            continue
        if LAYERS.index(stage) > LAYERS.index(own) or mod.endswith(".cli"):
            found.add((rel.as_posix(), mod))
    return found


def test_the_reader_sees_imports_inside_functions_and_relative_ones(tmp_path: Path) -> None:
    """A planted upward import (firmware → report, inside a function), another stage's cli,
    and imports that keep to the layers, in a copy of the package's shape."""
    for mod in ("firmware/fit", "report/sizereport", "build/cli", "trust/untrusted"):
        (tmp_path / "openwrt_wolf" / mod).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "openwrt_wolf" / mod).with_suffix(".py").write_text("")
    for pkg in ("", "firmware", "report", "build", "trust"):
        (tmp_path / "openwrt_wolf" / pkg / "__init__.py").write_text("")
    planted = tmp_path / "openwrt_wolf" / "firmware" / "planted.py"
    planted.write_text(
        "def f():\n    from ..report import sizereport\n    from ..build import cli\n"
        "    from . import fit\n    import openwrt_wolf.trust.untrusted\n"
        "    from ..trust.untrusted import typed\n"
    )
    assert breaks(planted, tmp_path) == {
        ("firmware/planted.py", "openwrt_wolf.report.sizereport"),
        ("firmware/planted.py", "openwrt_wolf.build.cli"),
    }


def test_no_stage_imports_a_stage_above_it_or_another_stages_cli() -> None:
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 100  # the whole package was read
    found = set().union(*(breaks(f) for f in files))
    new = sorted(found - KNOWN)
    assert new == [], "imports against the layers (docs/architecture.md): " + ", ".join(
        f"{f} -> {m}" for f, m in new
    )
    gone = sorted(KNOWN - found)
    assert gone == [], f"listed in KNOWN but no longer there: strike them: {gone}"


# --- one writer: a finished file or tree is put in place by outputs.py alone -------------

WRITER = PACKAGE / "files" / "outputs.py"


def renames(path: Path) -> list[int]:
    """Lines of ``path`` that rename a file themselves: os.replace, os.rename, or a
    ``.rename(…)``/``.replace(…)`` call with one argument on something that is not a string
    (a Path's; str.replace takes two)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        f = node.func
        on_os = isinstance(f.value, ast.Name) and f.value.id == "os"
        if (on_os and f.attr in ("replace", "rename", "renames")) or (
            f.attr in ("rename", "replace")
            and len(node.args) == 1
            and not node.keywords  # dataclasses.replace(obj, field=...)
            and not isinstance(f.value, ast.Constant)
            and not (isinstance(f.value, ast.Name) and f.value.id == "dataclasses")
        ):
            out.append(node.lineno)
    return sorted(out)


def test_the_rename_reader_sees_each_way_of_renaming(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(
        "import os\nfrom pathlib import Path\n"
        "os.replace('a', 'b')\n"  # 3
        "os.rename('a', 'b')\n"  # 4
        "Path('a').rename(Path('b'))\n"  # 5
        "Path('a').replace('b')\n"  # 6
        "'x-y'.replace('-', '_')\n"  # a string's replace: not a rename
        "name.replace('-', '_')\n"
        "dataclasses.replace(rec, path='x')\n"
        "import dataclasses\ndataclasses.replace(rec)\n"
    )
    assert renames(planted) == [3, 4, 5, 6]


def test_only_the_writer_renames_files_into_place() -> None:
    found = {
        f.relative_to(PACKAGE).as_posix(): lines
        for f in sorted(PACKAGE.rglob("*.py"))
        if f != WRITER and (lines := renames(f))
    }
    assert found == {}, "rename a finished file or tree with outputs.publish: " + str(found)

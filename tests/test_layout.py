"""The package's layout: the product (openwrt_wolf/) never imports the testbed (tests/: the
stand-in kit, the malta stand-in guest, the fake router), so test-only code cannot creep back
into what users run. Read from the source with ast, not by importing it."""

from __future__ import annotations

import ast
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

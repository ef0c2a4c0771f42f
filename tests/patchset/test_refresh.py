"""`invoke patch --refresh`: quilt pushes and refreshes a series against another tree.

Oracles: GNU patch (`patch --dry-run`, which reports offsets and fuzz itself) and `git apply
--check` (which accepts no fuzz) on the refreshed patches; the real v25.12.5 tree for the
project's own series.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from openwrt_wolf.errors import WolfError
from openwrt_wolf.patchset import refresh, series
from tests.conftest import need_tools

LINES = [f"line {i}\n" for i in range(1, 41)]


def _tree(root: Path, lines: list[str]) -> Path:
    (root / "include").mkdir(parents=True)
    (root / "include" / "target.mk").write_text("# a stand-in OpenWrt tree\n")
    (root / "f.txt").write_text("".join(lines))
    return root


def _series(d: Path, patches: dict[str, str]) -> Path:
    d.mkdir()
    for name, text in patches.items():
        (d / name).write_text(text)
    (d / "series").write_text("".join(f"{n}\n" for n in patches))
    return d


# written against LINES; the target tree below has 5 more lines on top (offset) and a changed
# context line next to the second hunk (fuzz)
P1 = """--- a/f.txt
+++ b/f.txt
@@ -8,6 +8,7 @@
 line 8
 line 9
 line 10
+added after 10
 line 11
 line 12
 line 13
"""
P2 = """--- a/f.txt
+++ b/f.txt
@@ -27,7 +28,7 @@
 line 27
 line 28
 line 29
-line 30
+line thirty
 line 31
 line 32
 line 33
"""


def _shifted() -> list[str]:
    lines = [f"new {i}\n" for i in range(5)] + LINES
    lines[5 + 26] = "line 27 changed\n"  # first context line of P2's hunk
    return lines


def test_refresh_reports_offset_and_fuzz_and_writes_clean_patches(tmp_path: Path) -> None:
    need_tools("quilt", "patch", "git")
    tree = _tree(tmp_path / "t", _shifted())
    src = _series(tmp_path / "src", {"0001-a.patch": P1, "0002-b.patch": P2})
    into = tmp_path / "out"
    rep = refresh.refresh(tree, series.load(src), src, into)
    states = {p.name: p for p in rep.patches}
    assert states["0001-a.patch"].state == "offset"
    assert [(h.offset, h.fuzz) for h in states["0001-a.patch"].hunks] == [(5, 0)]
    assert states["0002-b.patch"].state == "fuzz"
    assert states["0002-b.patch"].hunks[0].fuzz >= 1
    assert (into / "series").read_text().splitlines()[1:] == ["0001-a.patch", "0002-b.patch"]
    # the oracle: GNU patch applies the refreshed series exactly, git apply without fuzz
    work = tmp_path / "check"
    work.mkdir()
    (work / "f.txt").write_text("".join(_shifted()))
    for name in ("0001-a.patch", "0002-b.patch"):
        out = subprocess.run(
            ["patch", "-p1", "--no-backup-if-mismatch"],
            input=(into / name).read_text(), cwd=work, capture_output=True, text=True,
        )  # fmt: skip
        assert out.returncode == 0 and "offset" not in out.stdout and "fuzz" not in out.stdout
    assert "line thirty" in (work / "f.txt").read_text()
    chk = subprocess.run(
        ["git", "apply", "--check", str(into / "0001-a.patch")],
        cwd=_tree(tmp_path / "g", _shifted()), capture_output=True, text=True,
    )  # fmt: skip
    assert chk.returncode == 0, chk.stderr
    assert (tree / "f.txt").read_text() == "".join(_shifted())  # the tree is never written


def test_refresh_stops_at_a_failing_patch(tmp_path: Path) -> None:
    need_tools("quilt")
    lines = LINES[:6] + LINES[14:]  # lines 7-14 gone: P1's hunk has no place to go
    tree = _tree(tmp_path / "t", lines)
    src = _series(tmp_path / "src", {"0001-a.patch": P1, "0002-b.patch": P2})
    rep = refresh.refresh(tree, series.load(src), src, tmp_path / "out")
    assert [p.state for p in rep.patches] == ["failed", "not tried"]
    assert rep.patches[0].hunks[0].failed and not rep.ok
    assert not (tmp_path / "out" / "series").exists()


def test_refresh_needs_a_tree(tmp_path: Path) -> None:
    src = _series(tmp_path / "src", {"0001-a.patch": P1})
    with pytest.raises(WolfError, match="is not an OpenWrt tree"):
        refresh.refresh(tmp_path, series.load(src), src, tmp_path / "out")


def test_parse_push_reads_gnu_patch_lines() -> None:
    out = (
        "Applying patch patches/x.patch\npatching file include/image.mk\n"
        "Hunk #1 succeeded at 965 (offset 8 lines).\npatching file config/Config-build.in\n"
        "Hunk #2 succeeded at 92 with fuzz 2 (offset -19 lines).\n"
        "Hunk #3 succeeded at 5 with fuzz 1.\nHunk #4 FAILED at 106.\n"
    )
    notes = refresh.parse_push(out)
    assert [(n.file, n.hunk, n.offset, n.fuzz, n.failed) for n in notes] == [
        ("include/image.mk", 1, 8, 0, False),
        ("config/Config-build.in", 2, -19, 2, False),
        ("config/Config-build.in", 3, 0, 1, False),
        ("config/Config-build.in", 4, 0, 0, True),
    ]


def test_project_series_is_clean_on_its_release(openwrt_tree_25125: Path, tmp_path: Path) -> None:
    """The committed 25.12.5 series needs no refresh on the real v25.12.5 tree."""
    need_tools("quilt")
    src = series.PATCHES_DIR
    rep = refresh.refresh(openwrt_tree_25125, series.load(src), src, tmp_path / "out")
    assert {(p.name, p.state) for p in rep.patches if p.series == "openwrt"} == {
        (p.name, "clean") for p in series.load(src)[0].patches
    }
    assert [p.state for p in rep.patches if p.series == "feeds/luci"] == ["copied"]


def test_cli_option_errors(tmp_path: Path) -> None:
    from openwrt_wolf.patchset import cli

    with pytest.raises(WolfError, match="--into goes with --refresh"):
        cli.main(str(tmp_path), into=str(tmp_path / "x"))
    with pytest.raises(WolfError, match="exclude each other"):
        cli.main(str(tmp_path), refresh=True, check=True)
    with pytest.raises(WolfError, match=r"no USE_WOLFSSL series for OpenWrt 24\.10\.8"):
        cli.main(str(tmp_path), release="24.10.8")
    with pytest.raises(WolfError, match="--patches and --release exclude each other"):
        cli.main(str(tmp_path), release="snapshot", patches=str(tmp_path))


def test_release_data_names_existing_series() -> None:
    from openwrt_wolf.catalogue import releases

    for name in ("25.12.5", "snapshot"):
        d = releases.get(name).patches_dir()
        assert (d / "series").is_file() and series.load(d)[0].patches

"""The patch engine on small trees of our own: apply, re-apply, conflict, revert, status, feeds,
on a plain directory and on a git checkout. Oracles: file contents we wrote by hand, `git
status`/`git diff` of the checkout, GNU patch's own --dry-run. The real series runs only when
the v25.12.5 tree is at hand (fixture openwrt_tree_25125)."""

from __future__ import annotations

import filecmp
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from openwrt_wolf.errors import WolfError
from openwrt_wolf.patchset import series as patchset
from tests.conftest import need_tools

ROOT = Path(__file__).resolve().parents[2]

BASE = {
    "include/target.mk": "A\nB\nlibustream-mbedtls\nC\nD\n",
    "package/libs/wolfssl/Config.in": "menu\nconfig X\nendmenu\n",
    "README": "untouched\n",
}
FEED_BASE = {"net/foo/Makefile": "PKG_NAME:=foo\nDEPENDS:=+libmbedtls\n"}

P1 = """--- a/include/target.mk
+++ b/include/target.mk
@@ -1,5 +1,5 @@
 A
 B
-libustream-mbedtls
+libustream-wolfssl
 C
 D
"""
P2 = """--- a/package/libs/wolfssl/Config.in
+++ b/package/libs/wolfssl/Config.in
@@ -1,3 +1,4 @@
 menu
+config WOLFSSL_MINIMAL
 config X
 endmenu
--- /dev/null
+++ b/feeds-new/NOTE
@@ -0,0 +1 @@
+created by a patch
"""
FEED_P = """--- a/net/foo/Makefile
+++ b/net/foo/Makefile
@@ -1,2 +1,2 @@
 PKG_NAME:=foo
-DEPENDS:=+libmbedtls
+DEPENDS:=+libwolfssl
"""


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def _snapshot(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): p.read_text()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.parts
    }


@pytest.fixture
def patches(tmp_path: Path) -> Path:
    d = tmp_path / "patches"
    _write(d, {"0001-target.patch": P1, "0002-wolfssl.patch": P2})
    (d / "series").write_text("# ours\n0001-target.patch\n0002-wolfssl.patch -p1\n")
    _write(d / "feeds" / "packages", {"0001-foo.patch": FEED_P, "series": "0001-foo.patch\n"})
    return d


@pytest.fixture(params=["plain", "git"])
def tree(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    need_tools("git")
    t = tmp_path / "tree"
    _write(t, BASE)
    _write(t / "feeds" / "packages", FEED_BASE)
    if request.param == "git":
        subprocess.run(["git", "init", "-q", str(t)], check=True)
        subprocess.run(["git", "-C", str(t), "add", "-A"], check=True)
        subprocess.run(
            [
                "git",
                "-C",
                str(t),
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-qm",
                "b",
            ],
            check=True,
        )
    return t


def test_apply_reapply_revert(tree: Path, patches: Path) -> None:
    before = _snapshot(tree)
    series = patchset.load(patches)
    out = patchset.apply(tree, series)
    assert [o.action for o in out] == ["applied", "applied"]
    assert (tree / "include/target.mk").read_text() == "A\nB\nlibustream-wolfssl\nC\nD\n"
    assert "config WOLFSSL_MINIMAL" in (tree / "package/libs/wolfssl/Config.in").read_text()
    assert (tree / "feeds-new/NOTE").read_text() == "created by a patch\n"
    assert "+libwolfssl" in (tree / "feeds/packages/net/foo/Makefile").read_text()
    after = _snapshot(tree)

    again = patchset.apply(tree, series)  # recognised: nothing applied twice
    assert [o.action for o in again] == ["already-applied", "already-applied"]
    assert _snapshot(tree) == after

    st = patchset.status(tree, series)
    assert [s.state for s in st] == ["applied", "applied"]

    rev = patchset.revert(tree, series)
    assert [o.action for o in rev] == ["reverted", "reverted"]
    assert _snapshot(tree) == before
    assert not (tree / patchset.STAMP).exists()
    assert not (tree / "feeds-new").exists()  # the directory the created file needed is gone


def test_git_tree_clean_after_revert(patches: Path, tmp_path: Path) -> None:
    need_tools("git")
    t = tmp_path / "g"
    _write(t, BASE)
    subprocess.run(["git", "init", "-q", str(t)], check=True)
    subprocess.run(["git", "-C", str(t), "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(t), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "b"],
        check=True,
    )
    series = patchset.load(patches)
    out = patchset.apply(t, series)
    assert [o.action for o in out] == ["applied", "skipped"]  # no feeds/packages here
    changed = subprocess.run(
        ["git", "-C", str(t), "diff", "--name-only"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert sorted(changed) == ["include/target.mk", "package/libs/wolfssl/Config.in"]
    patchset.revert(t, series)
    porcelain = subprocess.run(
        ["git", "-C", str(t), "status", "--porcelain"], capture_output=True, text=True, check=True
    ).stdout
    assert porcelain == ""


def test_conflict_is_atomic_and_named(tree: Path, patches: Path) -> None:
    # The second hunk target changed: 0001 would apply, 0002 must not, and nothing is written.
    (tree / "package/libs/wolfssl/Config.in").write_text("menu\nconfig Y\nendmenu\n")
    before = _snapshot(tree)
    series = patchset.load(patches)
    with pytest.raises(WolfError) as e:
        patchset.apply(tree, series)
    msg = str(e.value)
    assert "0002-wolfssl.patch" in msg
    assert "package/libs/wolfssl/Config.in" in msg
    assert "hunk #1" in msg
    assert _snapshot(tree) == before
    assert not (tree / patchset.STAMP).exists()
    st = patchset.status(tree, series)[0]
    assert st.state == "conflict"
    assert [p.state for p in st.patches] == ["unapplied", "conflict"]


def test_conflict_names_second_hunk(tmp_path: Path) -> None:
    need_tools("git", "patch")
    t = tmp_path / "t"
    lines = [f"line{i}" for i in range(1, 31)]
    _write(t, {"f.txt": "\n".join(lines) + "\n"})
    d = tmp_path / "p"
    patch_text = (
        "--- a/f.txt\n+++ b/f.txt\n"
        "@@ -2,3 +2,3 @@\n line2\n-line3\n+LINE3\n line4\n"
        "@@ -20,3 +20,3 @@\n line20\n-line21\n+LINE21\n line22\n"
    )
    _write(d, {"0001-two.patch": patch_text, "series": "0001-two.patch\n"})
    lines[20] = "edited21"
    (t / "f.txt").write_text("\n".join(lines) + "\n")
    # independent oracle: GNU patch also rejects exactly hunk 2
    dry = subprocess.run(
        ["patch", "-p1", "--dry-run", "-i", str(d / "0001-two.patch")],
        cwd=t,
        capture_output=True,
        text=True,
    )
    assert "Hunk #2 FAILED" in dry.stdout
    with pytest.raises(WolfError, match=r"f\.txt, hunk #2"):
        patchset.apply(t, patchset.load(d))
    assert (t / "f.txt").read_text().splitlines()[2] == "line3"


def test_edited_after_patching_is_refused(tree: Path, patches: Path) -> None:
    series = patchset.load(patches)
    patchset.apply(tree, series)
    p = tree / "include/target.mk"
    p.write_text(p.read_text() + "local edit\n")
    assert patchset.status(tree, series)[0].state == "modified"
    with pytest.raises(WolfError, match=r"changed after patching: include/target\.mk"):
        patchset.apply(tree, series)
    with pytest.raises(WolfError, match=r"include/target\.mk"):
        patchset.revert(tree, series)


def test_applied_by_hand_is_recognised(tree: Path, patches: Path) -> None:
    need_tools("patch")
    for name in ("0001-target.patch", "0002-wolfssl.patch"):
        subprocess.run(["patch", "-s", "-p1", "-i", str(patches / name)], cwd=tree, check=True)
    series = patchset.load(patches)
    out = patchset.apply(tree, series)
    assert out[0].action == "already-applied"
    assert out[1].action == "applied"  # the feed was not patched by hand


def test_check_changes_nothing(tree: Path, patches: Path) -> None:
    before = _snapshot(tree)
    out = patchset.apply(tree, patchset.load(patches), check=True)
    assert [o.action for o in out] == ["would-apply", "would-apply"]
    assert _snapshot(tree) == before


@pytest.mark.parametrize(
    ("series_text", "match"),
    [
        ("0009-missing.patch\n", "0009-missing.patch not found"),
        ("0001-target.patch -p0\n", "option -p0 not supported"),
    ],
)
def test_bad_series(patches: Path, series_text: str, match: str) -> None:
    (patches / "series").write_text(series_text)
    with pytest.raises(WolfError, match=match):
        patchset.load(patches)


def test_not_a_diff(patches: Path) -> None:
    (patches / "0001-target.patch").write_text("just text\n")
    with pytest.raises(WolfError, match="no unified diff"):
        patchset.load(patches)


def test_cli_errors_are_one_line(tmp_path: Path, patches: Path) -> None:
    wolf = [sys.executable, "-m", "invoke", "--search-root", str(ROOT), "patch"]
    r = subprocess.run(
        [*wolf, "--tree", str(tmp_path / "nope"), "--patches", str(patches)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert r.returncode == 2
    assert r.stderr.strip().splitlines()[-1].startswith("error: no OpenWrt tree at")
    assert "Traceback" not in r.stderr
    r = subprocess.run(
        [*wolf, "--check", "--revert", "--tree", "x"], capture_output=True, text=True
    )
    assert r.returncode == 2
    assert "exclude each other" in r.stderr


# --- the real series on a real tree ---------------------------------------------------------


def test_real_series_on_openwrt_tree(openwrt_tree_25125: Path, tmp_path: Path) -> None:
    need_tools("git")
    src = openwrt_tree_25125
    t = tmp_path / "openwrt"
    shutil.copytree(src, t, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    series = patchset.load()
    assert patchset.apply(t, series)[0].action == "applied"
    text = (t / "include/target.mk").read_text()
    assert "libustream-mbedtls:libustream-wolfssl" in text
    assert "config USE_WOLFSSL" in (t / "config/Config-build.in").read_text()
    assert patchset.apply(t, series)[0].action == "already-applied"
    patchset.revert(t, series)
    assert _differences(filecmp.dircmp(src, t, ignore=[".git"])) == []


def _differences(cmp: filecmp.dircmp[str]) -> list[str]:
    out = [*cmp.diff_files, *cmp.left_only, *cmp.right_only]
    for sub in cmp.subdirs.values():
        out += _differences(sub)
    return out


def test_series_changed_after_apply_reverts_the_applied_version(tree: Path, patches: Path) -> None:
    before = _snapshot(tree)
    patchset.apply(tree, patchset.load(patches))
    # the project's patch is edited later: a new line in the added text
    (patches / "0002-wolfssl.patch").write_text(
        P2.replace(
            "+config WOLFSSL_MINIMAL\n", "+config WOLFSSL_MINIMAL\n+config WOLFSSL_ECC\n"
        ).replace("@@ -1,3 +1,4 @@", "@@ -1,3 +1,5 @@")
    )
    series = patchset.load(patches)
    st = patchset.status(tree, series)[0]
    assert st.state == "outdated"
    assert "0002-wolfssl.patch" in st.detail
    with pytest.raises(WolfError, match="run --revert first"):
        patchset.apply(tree, series)
    patchset.revert(tree, series)  # uses the copies kept in the stamp
    assert _snapshot(tree) == before
    out = patchset.apply(tree, series)
    assert out[0].action == "applied"
    assert "config WOLFSSL_ECC\n" in (tree / "package/libs/wolfssl/Config.in").read_text()


def test_note_edits_takes_an_edit_that_still_reverts(tree: Path, patches: Path) -> None:
    """`invoke sources` edits a patched file: the stamp takes its new digest when the series
    still reverts from it (oracle: sha256 of the file, and --status's verdict)."""
    import hashlib

    series = patchset.load(patches)
    patchset.apply(tree, series)
    p = tree / "include/target.mk"
    p.write_text(p.read_text() + "E\n")
    assert patchset.status(tree, series)[0].state == "modified"
    assert patchset.note_edits(tree, ["include/target.mk", "README"]) == ["include/target.mk"]
    stamp = json.loads((tree / patchset.STAMP).read_text())
    assert stamp["files"]["include/target.mk"] == hashlib.sha256(p.read_bytes()).hexdigest()
    assert patchset.status(tree, series)[0].state == "applied"

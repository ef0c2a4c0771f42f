"""The patch engine on hostile trees, patches and stamps (issue 32, part A), run as a user runs
it: `invoke patch --tree T --patches P [--check|--status|--revert|--refresh]` in a fresh
process, as root on this machine.

Oracles: lstat of every entry beside the tree (bytes, mode, link target, existence) before and
after the run, the victim paths a case aims at, `git apply` run on a copy of the tree for what
a patch does to it, the secret file's bytes searched in every file of the tree, of --into and
in all output, and a child's timeout for a read that would hang on a FIFO. A refused input is
exit 2 with one `error:` line and no traceback."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import need_tools

from .patch_lab import (
    PATCH,
    Lab,
    git_oracle,
    make,
    outside,
    secret_holders,
    series,
    special,
    tree_state,
)

ROOT = Path(__file__).resolve().parents[2]
MODES = ("", "--check", "--status", "--revert", "--refresh")


@pytest.fixture
def lab(tmp_path: Path) -> Lab:
    need_tools("git", "quilt", "patch")
    return make(Lab(tmp_path / "lab"))


def run(lab: Lab, mode: str = "", timeout: float = 60) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "invoke", "patch", "--tree", str(lab.tree)]
    argv += ["--patches", str(lab.patches)]
    if mode == "--refresh":
        argv += ["--refresh", "--into", str(lab.into)]
    elif mode:
        argv.append(mode)
    return subprocess.run(
        argv,
        cwd=ROOT,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def no_secret(lab: Lab, p: subprocess.CompletedProcess[str]) -> None:
    assert lab.secret.decode() not in p.stdout + p.stderr
    assert lab.secret not in secret_holders(lab), "the secret is in the tree or in --into"


def refused(p: subprocess.CompletedProcess[str], match: str = "") -> None:
    assert "Traceback" not in p.stderr, p.stderr[-2000:]
    assert p.returncode == 2, (p.returncode, p.stderr[-2000:])
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, p.stderr[-2000:]
    assert match in errors[0], errors[0]


def applied(p: subprocess.CompletedProcess[str]) -> bool:
    """--status said the series is applied (rich wraps its lines in a pipe)."""
    return p.returncode == 0 and "): applied" in " ".join(p.stdout.split())


def stamp_text(lab: Lab) -> str:
    return (lab.tree / ".wolf-patches.json").read_text()


# --- 1. the stamp: names out of the tree, JSON that crashed the reader ---------------------


@pytest.mark.parametrize("mode", ["--revert", "--status", "--check", ""])
@pytest.mark.parametrize("kind", ["absolute", "dotdot", "dotdot-deep"])
def test_stamp_naming_a_patch_outside_writes_nothing(lab: Lab, mode: str, kind: str) -> None:
    """The reviewer's case: `--revert` wrote the stamp's text at the name it gave."""
    target = lab.victim / "PWNED"
    name = {
        "absolute": str(target),
        "dotdot": "../../victim/PWNED",
        "dotdot-deep": "a/" + "../" * 8 + str(target).lstrip("/"),
    }[kind]
    stamp = {
        "series": "openwrt",
        "patches": [{"name": name, "sha256": "0", "text": "x"}],
        "files": {},
    }
    (lab.tree / ".wolf-patches.json").write_text(json.dumps(stamp))
    before, tree_before = outside(lab), tree_state(lab.tree)
    p = run(lab, mode)
    assert not os.path.lexists(target)
    assert not os.path.lexists(lab.tree / "PWNED")
    assert outside(lab) == before
    assert tree_state(lab.tree) == tree_before
    refused(p, "not a patch name")


STAMPS = {
    "nested 100,000": "[" * 100_000 + "]" * 100_000,
    "5,000 digits": '{"series": "openwrt", "patches": [], "files": {}, "x": ' + "9" * 5000 + "}",
    "files a list": '{"series": "openwrt", "patches": [], "files": []}',
    "files naming ../": '{"series": "openwrt", "patches": [], "files": {"../victim/file": "0"}}',
    "files naming /": '{"series": "openwrt", "patches": [], "files": {"/etc/hostname": "0"}}',
    "patches a string": '{"series": "openwrt", "patches": "x", "files": {}}',
    "NaN": '{"series": NaN, "patches": [], "files": {}}',
    "a list": "[1, 2]",
    "not UTF-8": b'{"series": "\xff\xfe"}',
    "not JSON": "{",
}


@pytest.mark.parametrize("mode", ["--status", "--revert", "--check"])
@pytest.mark.parametrize("name", list(STAMPS))
def test_hostile_stamp_is_one_error_line(lab: Lab, name: str, mode: str) -> None:
    """Read with json.loads, a deep one was a RecursionError, a long number a ValueError and
    "files": [] an AssertionError in series_status."""
    body = STAMPS[name]
    (lab.tree / ".wolf-patches.json").write_bytes(
        body if isinstance(body, bytes) else body.encode()
    )
    before = outside(lab)
    refused(run(lab, mode), "patch stamp")
    assert outside(lab) == before


def test_stamp_fifo_and_link(lab: Lab) -> None:
    """A FIFO at the stamp's name was taken for no stamp (and replaced by apply); a link to a
    file outside was read as the stamp."""
    stamp = lab.tree / ".wolf-patches.json"
    os.mkfifo(stamp)
    for mode in ("", "--status", "--revert"):
        refused(run(lab, mode, timeout=30), "FIFO")
        assert stat.S_ISFIFO(stamp.lstat().st_mode)
    stamp.unlink()
    stamp.symlink_to(lab.victim / "file")
    before = outside(lab)
    for mode in ("", "--status", "--revert"):
        refused(run(lab, mode), "symbolic link")
    assert outside(lab) == before and stamp.is_symlink()


# --- 2. patch text: line breaks git does not see, paths out of the tree --------------------

BREAKS = ["\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
AIMS = ["../victim/fifo", "../victim/sock", "../victim/dirlink", "../t/f"]


def _smuggling(ch: str) -> str:
    """A patch of f whose added lines hold, after ``ch``, file headers that only a reader
    splitting lines at ``ch`` sees: one per victim."""
    added = [f"+x{ch}--- a/{v}{ch}+++ b/{v}{ch}@@ -1 +1 @@{ch}-hello{ch}+pwned" for v in AIMS]
    return (
        f"--- a/f\n+++ b/f\n@@ -1 +1,{1 + len(added)} @@\n-hello\n+bye\n" + "\n".join(added) + "\n"
    )


@pytest.mark.parametrize("ch", BREAKS, ids=[f"U+{ord(c):04X}" for c in BREAKS])
def test_line_breaks_git_does_not_see(lab: Lab, ch: str) -> None:
    """splitlines() broke lines where git does not: the FIFO, the socket and the directory
    link beside the tree were unlinked and <tree>/../t/f overwritten, and the run said
    "applied". Now the patch does what git apply does with it, and only that."""
    text = _smuggling(ch)
    series(lab, {"0001-f.patch": text})
    before, pristine = outside(lab), tree_state(lab.tree)
    want = git_oracle(lab, text.encode())
    p = run(lab, "--refresh")  # against the pristine tree, into a directory of its own
    assert p.returncode == 0, p.stderr[-2000:]
    assert outside(lab) == before
    p = run(lab)
    assert p.returncode == 0, p.stderr[-2000:]
    assert outside(lab) == before
    got = tree_state(lab.tree)
    assert got.pop(".wolf-patches.json")[0] == stat.S_IFREG
    assert got == want
    assert applied(run(lab, "--status"))
    assert run(lab, "--revert").returncode == 0
    assert tree_state(lab.tree) == pristine
    assert outside(lab) == before


def test_crlf_patch_as_git_reads_it(lab: Lab) -> None:
    """A CRLF patch: git names the same file (the CR ends the name) but its lines keep the
    CR, so it does not apply to an LF file; on a CRLF file it does, as for git."""
    crlf = PATCH.replace("\n", "\r\n")
    series(lab, {"0001-f.patch": crlf})
    refused(run(lab), "does not apply at f")
    (lab.tree / "f").write_bytes(b"hello\r\n")
    want = git_oracle(lab, crlf.encode())
    assert run(lab).returncode == 0
    got = tree_state(lab.tree)
    got.pop(".wolf-patches.json")
    assert got == want and (lab.tree / "f").read_bytes() == b"bye\r\n"


def _creating(path: str) -> str:
    return f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+pwned\n"


PATHS = {
    "dotdot": "../victim/new",
    "dotdot to t": "../t/f",
    "absolute": "/VICTIM/new",
    "absolute: the tree's own f": "/TREE/f",
    "deep dotdot": "sub/../../victim/new",
    "dot": "./f",
    ".git": ".git/config",
    "empty part": "sub//f",
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", list(PATHS))
def test_paths_out_of_the_tree(lab: Lab, kind: str, mode: str) -> None:
    """A ---/+++ path with ../ or one absolute after -p1 ended in shutil.SameFileError (or
    wrote beside the tree); now one line naming the patch and the path."""
    path = PATHS[kind].replace("/VICTIM", str(lab.victim)).replace("/TREE", str(lab.tree))
    modify = f"--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-hello\n+pwned\n"
    series(lab, {"0001-f.patch": PATCH + (modify if kind.startswith("abs") else _creating(path))})
    before, tree_before = outside(lab), tree_state(lab.tree)
    refused(run(lab, mode), "0001-f.patch")
    assert outside(lab) == before
    assert tree_state(lab.tree) == tree_before


def test_series_not_utf8(lab: Lab) -> None:
    """A series file that was not UTF-8 ended in a UnicodeDecodeError traceback."""
    series(lab, {"0001-f.patch": PATCH}, b"# \xff\xfe\n0001-f.patch\n")
    for mode in MODES:
        refused(run(lab, mode), "series:1: not UTF-8 text")


@pytest.mark.parametrize("name", ["../patches/0001-f.patch", "/etc/hostname", "x\x1bq", "-p1"])
def test_series_names_outside(lab: Lab, name: str) -> None:
    series(lab, {"0001-f.patch": PATCH}, f"{name}\n")
    refused(run(lab), "not a patch name")


@pytest.mark.parametrize("what", ["series", "patch"])
def test_fifo_as_series_or_patch(lab: Lab, what: str) -> None:
    target = lab.patches / ("series" if what == "series" else "0001-f.patch")
    target.unlink()
    os.mkfifo(target)
    refused(run(lab, timeout=30), "FIFO")


@pytest.mark.parametrize("what", ["series", "patch"])
def test_series_or_patch_linking_to_the_secret(lab: Lab, what: str) -> None:
    """A series file linked to the secret printed its first line as a patch name "not
    found" (bench family patches found it)."""
    target = lab.patches / ("series" if what == "series" else "0001-f.patch")
    target.unlink()
    target.symlink_to(lab.victim / "secret")
    for mode in MODES:
        p = run(lab, mode)
        no_secret(lab, p)
        refused(p, "is a link out of")


# --- 3. links: created by a patch, planted in the tree --------------------------------------


def _link_patch(target: str) -> str:
    return (
        f"diff --git a/evil b/evil\nnew file mode 120000\nindex 0000000..1111111\n"
        f"--- /dev/null\n+++ b/evil\n@@ -0,0 +1 @@\n+{target}\n"
        "\\ No newline at end of file\n"
    )


def test_link_made_by_a_patch_stays_a_link(lab: Lab) -> None:
    """A patch making evil -> the secret left a regular copy of the secret in the tree
    (is_file() and copy2 followed the link). Now it is a link, as git makes it."""
    text = PATCH + _link_patch(str(lab.victim / "secret"))
    series(lab, {"0001-f.patch": text})
    before, pristine = outside(lab), tree_state(lab.tree)
    want = git_oracle(lab, text.encode())
    p = run(lab)
    assert p.returncode == 0, p.stderr[-2000:]
    evil = lab.tree / "evil"
    assert evil.is_symlink() and os.readlink(evil) == str(lab.victim / "secret")
    got = tree_state(lab.tree)
    got.pop(".wolf-patches.json")
    assert got == want
    no_secret(lab, p)
    p = run(lab, "--status")
    assert applied(p)
    no_secret(lab, p)
    assert run(lab, "--revert").returncode == 0
    assert tree_state(lab.tree) == pristine
    assert outside(lab) == before


def test_link_to_a_fifo_is_never_read(lab: Lab) -> None:
    """A link made by a patch to a FIFO: reading its target would hang; the link was not
    made at all before (is_file() of the staged link was False), with 'applied' said."""
    series(lab, {"0001-f.patch": PATCH + _link_patch(str(lab.victim / "fifo"))})
    p = run(lab, timeout=30)
    assert p.returncode == 0, p.stderr[-2000:]
    assert os.readlink(lab.tree / "evil") == str(lab.victim / "fifo")
    assert run(lab, "--status", timeout=30).returncode == 0
    assert run(lab, "--revert", timeout=30).returncode == 0
    assert not os.path.lexists(lab.tree / "evil")


def test_refresh_refuses_a_link_made_by_a_patch(lab: Lab) -> None:
    """quilt's diff follows links: the refreshed patch would carry the secret's bytes."""
    series(lab, {"0001-f.patch": PATCH + _link_patch(str(lab.victim / "secret"))})
    p = run(lab, "--refresh")
    no_secret(lab, p)
    refused(p, "symbolic link")


@pytest.mark.parametrize("mode", MODES)
def test_package_directory_link_out_of_the_tree(lab: Lab, mode: str) -> None:
    """A package directory that is a link out of the tree was written through."""
    (lab.tree / "pkg").symlink_to(lab.victim / "pkgdir")
    patch = "--- a/pkg/Makefile\n+++ b/pkg/Makefile\n@@ -1 +1 @@\n-hello\n+pwned\n"
    series(lab, {"0001-pkg.patch": patch})
    before = outside(lab)
    refused(run(lab, mode), "pkg is a symbolic link")
    assert outside(lab) == before
    assert (lab.victim / "pkgdir" / "Makefile").read_text() == "hello\n"


def test_feed_directory_link(lab: Lab) -> None:
    """feeds/<feed> as a link (scripts/feeds' src-link) out of the tree: refused, not patched
    through."""
    (lab.tree / "feeds").mkdir()
    (lab.tree / "feeds" / "luci").symlink_to(lab.victim / "pkgdir")
    feed = lab.patches / "feeds" / "luci"
    feed.mkdir(parents=True)
    (feed / "0001-m.patch").write_text(
        PATCH.replace("a/f", "a/Makefile").replace("b/f", "b/Makefile")
    )
    (feed / "series").write_text("0001-m.patch\n")
    before = outside(lab)
    for mode in ("", "--status", "--revert", "--refresh"):
        refused(run(lab, mode), "feeds/luci is a symbolic link")
    assert outside(lab) == before


def test_link_planted_at_the_stamps_temporary_name(lab: Lab) -> None:
    """The stamp was written to .wolf-patches.tmp and renamed: a link planted there led the
    stamp's text into the file it named."""
    planted = lab.tree / ".wolf-patches.tmp"
    planted.symlink_to(lab.victim / "file")
    before = outside(lab)
    p = run(lab)
    assert p.returncode == 0, p.stderr[-2000:]
    assert outside(lab) == before
    assert os.readlink(planted) == str(lab.victim / "file")
    assert json.loads(stamp_text(lab))["series"] == "openwrt"


def test_touched_file_that_is_a_link_to_the_secret(lab: Lab) -> None:
    """A file the patch changes is a link to the secret: it is staged as the link (git sees
    its target's name, not its bytes); the secret reaches neither the tree nor the output."""
    (lab.tree / "f").unlink()
    (lab.tree / "f").symlink_to(lab.victim / "secret")
    for mode in MODES:
        p = run(lab, mode)
        if mode in ("--status", "--revert"):  # a conflict, not-applied: nothing to do
            assert p.returncode == 0 and ("conflict" in p.stdout or "not-applied" in p.stdout)
        else:
            refused(p, "symbolic link" if mode == "--refresh" else "does not apply at f")
        no_secret(lab, p)
    assert os.readlink(lab.tree / "f") == str(lab.victim / "secret")


@pytest.mark.parametrize("kind", ["fifo", "socket", "directory"])
def test_special_file_where_a_patched_file_belongs(lab: Lab, kind: str) -> None:
    f = lab.tree / "f"
    f.unlink()
    special(f, kind)
    for mode in MODES:
        refused(run(lab, mode, timeout=30), "in the tree, not a file")
    assert f.exists()

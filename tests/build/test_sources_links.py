"""`sources --tree T` on a tree from elsewhere (issue 53): links planted in its bookkeeping
(.wolf-sources, .wolf-sources/orig, wolf-substitutions.json) and in its dl/ are never
followed. Before, `--revert`, `--redo X` and every run's put-back moved each regular file of
the folder a linked .wolf-sources/orig named into T and unlinked the originals; dl/<file>
and dl/<file>.part links were written through; a dangling wolf-substitutions.json made its
target. The oracle is a victim folder outside the tree: every entry's bytes, before and
after; the tree is the few files Tree() checks (no make runs)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from openwrt_wolf.build.sources import dl, edit, listing
from openwrt_wolf.build.sources.listing import Needed
from openwrt_wolf.errors import WolfError

ROOT = Path(__file__).resolve().parents[2]
MAKEFILE = "tools/x/Makefile"


def _snapshot(d: Path) -> dict[str, bytes | str]:
    out: dict[str, bytes | str] = {}
    for p in sorted(d.rglob("*")):
        rel = str(p.relative_to(d))
        out[rel] = "link" if p.is_symlink() else "dir" if p.is_dir() else p.read_bytes()
    return out


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A tree (what Tree() checks), an edit of an earlier run listed in its substitutions
    file, and a victim folder beside it laid out as .wolf-sources is."""
    t = tmp_path / "openwrt"
    for rel in ("Makefile", "include/target.mk", "config/Config-build.in", MAKEFILE):
        (t / rel).parent.mkdir(parents=True, exist_ok=True)
        (t / rel).write_text("PKG_VERSION:=1.1\n" if rel == MAKEFILE else "")
    entry = {"file": "x-1.0.tar.gz", "expected": "0" * 64, "dirs": ["tools/x"],
             "class": "substitute", "origin": "debian:x", "placed": "x-1.0.tar.gz",
             "sha256": "1" * 64, "version": "1.0", "note": "",
             "edits": [{"path": MAKEFILE, "what": "PKG_VERSION", "old": "1.1",
                        "new": "1.0"}]}  # fmt: skip
    (t / dl.SUBSTITUTIONS).write_text(json.dumps({"schema": 1, "tree": str(t), "created": "x",
                                                  "allow": [], "files": [entry]}))  # fmt: skip
    victim = tmp_path / "outside" / "bookkeeping"
    for rel, text in ((f"orig/{MAKEFILE}", "the victim's Makefile\n"), ("orig/passwd", "root\n"),
                      ("orig/sub/secret", "s3cret\n")):  # fmt: skip
        (victim / rel).parent.mkdir(parents=True, exist_ok=True)
        (victim / rel).write_text(text)
    return t


def _raised(run: Callable[[], object]) -> WolfError | None:
    """The one-line error a step ended in (None: it ended well); the oracle looks first."""
    try:
        run()
    except WolfError as e:
        return e
    return None


def _plant(tree: Path, where: str) -> Path:
    victim = tree.parent / "outside" / "bookkeeping"
    if where == ".wolf-sources":
        (tree / ".wolf-sources").symlink_to(victim)
    else:
        (tree / ".wolf-sources").mkdir()
        (tree / ".wolf-sources" / "orig").symlink_to(victim / "orig")
    return tree / where


RUNS = {
    "--revert": lambda t: edit.revert(t),
    "--redo": lambda t: dl.redo(t, ["x-1.0.tar.gz"]),
    "a plain run's put-back": lambda t: dl.put_back_unlisted(t),
}


@pytest.mark.parametrize("where", [".wolf-sources", ".wolf-sources/orig"])
@pytest.mark.parametrize("run", list(RUNS))
def test_linked_bookkeeping_moves_nothing_into_the_tree(run: str, where: str, tree: Path) -> None:
    planted = _plant(tree, where)
    outside = tree.parent / "outside"
    before, tree_before = _snapshot(outside), (tree / MAKEFILE).read_bytes()
    e = _raised(lambda: RUNS[run](tree))
    assert _snapshot(outside) == before
    assert (tree / MAKEFILE).read_bytes() == tree_before and not (tree / "passwd").exists()
    assert e is not None and e.message == (
        f"{planted} is a symbolic link; links inside the OpenWrt tree we edit are not followed"
    )


def test_linked_orig_through_the_task_is_one_line(tree: Path) -> None:
    """`./wolf sources --tree T --revert` as a user runs it: exit 2, one error line."""
    _plant(tree, ".wolf-sources/orig")
    before = _snapshot(tree.parent / "outside")
    p = subprocess.run([sys.executable, "-m", "invoke", "sources", "--tree", str(tree),
                        "--revert"], cwd=ROOT, capture_output=True, text=True,
                       timeout=300, env={**os.environ, "COLUMNS": "1000"})  # fmt: skip
    assert _snapshot(tree.parent / "outside") == before
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert p.returncode == 2 and len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert "orig is a symbolic link" in lines[0]


def test_a_linked_folder_inside_orig_is_not_followed(tree: Path) -> None:
    """A folder of .wolf-sources/orig that links out (orig/tools -> outside): `--redo`'s path
    from the substitutions file reached the victim's file through it and moved it in."""
    (tree / edit.ORIG_DIR).mkdir(parents=True)
    (tree / edit.ORIG_DIR / "tools").symlink_to(tree.parent / "outside" / "bookkeeping" /
                                                "orig" / "tools")  # fmt: skip
    before = _snapshot(tree.parent / "outside")
    e = _raised(lambda: dl.redo(tree, ["x-1.0.tar.gz"]))
    assert _snapshot(tree.parent / "outside") == before
    assert (tree / MAKEFILE).read_text() == "PKG_VERSION:=1.1\n"
    assert e is not None and "orig/tools is a symbolic link" in e.message


# --- dl/ and the substitutions file --------------------------------------------------------

PINNED = b"the pinned bytes\n"
NEAR = b"other bytes of the same version\n"


def _needed() -> Needed:
    return Needed(file="x-1.0.tar.gz", hash=hashlib.sha256(PINNED).hexdigest(),
                  dirs=("tools/x",), name="x", version="1.0")  # fmt: skip


def _victim(tree: Path) -> Path:
    v = tree.parent / "outside" / "victim"
    v.write_bytes(b"the victim's own bytes\n")
    return v


@pytest.mark.parametrize("how", ["absolute", "relative"])
def test_a_link_at_a_dl_file_is_replaced_not_written_through(how: str, tree: Path) -> None:
    """dl/<file> a link (Filler._place copied a --sources file with other bytes through it,
    outputs.copy_file): the link is replaced by the file; the victim keeps its bytes."""
    n = _needed()
    (tree / "tools/x/Makefile").write_text(f"PKG_HASH:={n.hash}\n")
    victim = _victim(tree)
    src = tree.parent / "sources"
    src.mkdir()
    (src / n.file).write_bytes(NEAR)
    (tree / "dl").mkdir()
    (tree / "dl" / n.file).symlink_to(victim if how == "absolute" else "../../outside/victim")
    f = dl.Filler(tree, local=[src], allow=("same-version",), archive=None,
                  log=tree.parent / "log")  # fmt: skip
    r = f.resolve(n)
    assert victim.read_bytes() == b"the victim's own bytes\n"
    assert (r.cls, r.origin) == ("same-version", str(src / n.file)), r.note
    placed = tree / "dl" / n.file
    assert not placed.is_symlink() and placed.read_bytes() == NEAR


def test_a_link_at_a_dl_part_is_not_written_through(tree: Path) -> None:
    """dl/<file>.part a link: the fetcher wrote the --sources file's bytes into its target
    (files/fetch.py _into). Now that source fails with the link named; the victim is kept."""
    n = _needed()
    victim = _victim(tree)
    src = tree.parent / "sources"
    src.mkdir()
    (src / n.file).write_bytes(PINNED)
    (tree / "dl").mkdir()
    (tree / "dl" / f"{n.file}.part").symlink_to(victim)
    f = dl.Filler(tree, local=[src], allow=(), archive=None, log=tree.parent / "log")
    r = f.resolve(n)
    assert victim.read_bytes() == b"the victim's own bytes\n"
    assert r.cls == "missing" and f"{n.file}.part is a symbolic link" in r.note, r
    assert not (tree / "dl" / n.file).exists()


@pytest.mark.parametrize("how", ["dangling", "to a file"])
def test_a_linked_substitutions_file_is_refused(how: str, tree: Path) -> None:
    """A dangling wolf-substitutions.json: it read as absent and the run's write made its
    target outside the tree. Now a link there is one line before anything is read or written."""
    outside = tree.parent / "outside"
    target = outside / ("made.json" if how == "dangling" else "victim")
    if how != "dangling":
        _victim(tree)
    (tree / dl.SUBSTITUTIONS).unlink()
    (tree / dl.SUBSTITUTIONS).symlink_to(target)
    before = _snapshot(outside)
    e = _raised(lambda: dl.fill(tree, [], local=[], allow=(), debian=False,
                                log=tree.parent / "log"))  # fmt: skip
    assert _snapshot(outside) == before
    assert e is not None and f"{dl.SUBSTITUTIONS} is a symbolic link" in e.message


@pytest.mark.parametrize("how", ["absolute", "relative"])
def test_a_link_at_config_is_replaced_by_list_for_tree(
    how: str, tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`sources --tree T --config C` copies each seed over T/.config (shutil.copyfile, which
    followed a link there) and puts the old one back: both replace a link, never write
    through it; `make defconfig`'s own write (buildroot.Tree.defconfig) too."""
    from openwrt_wolf.build import buildroot

    victim = tree.parent / "outside" / "config"
    victim.write_text("the victim's config\n")
    (tree / ".config").symlink_to(victim if how == "absolute" else "../outside/config")
    seed = tree.parent / "seed.config"
    seed.write_text("CONFIG_TARGET_malta=y\n")
    seen: list[str] = []
    monkeypatch.setattr(buildroot.Tree, "_make", lambda self, *a, **k: None)

    def listed(t: Path, log: Path, on_step: object = None) -> list[Needed]:
        seen.append((t / ".config").read_text())
        return []

    monkeypatch.setattr(listing, "list_needed", listed)
    dl.list_for_tree(tree, tree.parent / "log", [seed])
    assert victim.read_text() == "the victim's config\n"
    assert seen == ["CONFIG_TARGET_malta=y\n"]
    assert not (tree / ".config").is_symlink()

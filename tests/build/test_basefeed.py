"""build/basefeed.py `prepare` on a user's --tree (`build --backend sdk --tree T`): the tree is
copied into the cache and stamped there. What the tree holds must not reach outside the cache
(issue 53): a link planted at the stamp's name, a FIFO anywhere in the tree. The oracle is a
victim file outside both, its bytes; a small tree (what Tree() checks, a `version` file) and a
patch set of no patches, so the copy is the whole work."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from openwrt_wolf.build import basefeed
from openwrt_wolf.errors import WolfError
from tests.conftest import need_tools

VICTIM = b"the victim's own bytes\n"


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    need_tools("git")
    monkeypatch.setenv("OPENWRT_WOLF_CACHE", str(tmp_path / "cache"))
    t = tmp_path / "openwrt"
    for rel in ("Makefile", "include/target.mk", "config/Config-build.in", "package/x/Makefile"):
        (t / rel).parent.mkdir(parents=True, exist_ok=True)
        (t / rel).write_text("")
    (t / "version").write_text("r1-0123456789\n")  # the tree's identity (Tree.identity)
    (tmp_path / "patches").mkdir()
    (tmp_path / "patches" / "series").write_text("")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "victim").write_bytes(VICTIM)
    return t


def _prepare(tree: Path) -> basefeed.Base:
    return basefeed.prepare(tree, "25.12.5", tree.parent / "patches", lambda _: None, copy=True)


@pytest.mark.parametrize("how", ["absolute", "relative", "dangling"])
def test_a_link_at_the_stamp_is_not_written_through(how: str, tree: Path) -> None:
    """T/.wolf-base.json a link: copytree(symlinks=True) kept it in the copy and the stamp
    was written through it (the victim replaced by the stamp, a dangling link's target
    made). Now the copy's stamp is a file of the copy; the victim is as it was."""
    victim = tree.parent / "outside" / ("victim" if how != "dangling" else "made")
    # relative: as the copy reads it (<cache>/base-feeds/.<name>.<random>/tree/)
    target = str(victim) if how != "relative" else "../../../../outside/victim"
    (tree / basefeed.STAMP).symlink_to(target)
    base = _prepare(tree)
    assert (tree.parent / "outside" / "victim").read_bytes() == VICTIM
    assert sorted(os.listdir(tree.parent / "outside")) == ["victim"]
    stamp = base.top / basefeed.STAMP
    assert stamp.is_file() and not stamp.is_symlink()
    assert base.top.is_relative_to(tree.parent / "cache")


def test_a_fifo_in_the_tree_is_one_line(tree: Path) -> None:
    """A FIFO anywhere in T: shutil.Error's traceback from the copy. Now one line naming it,
    and nothing is left in the cache but the lock."""
    os.mkfifo(tree / "package" / "x" / "fifo")
    with pytest.raises(WolfError) as e:
        _prepare(tree)
    assert e.value.message == (
        f"{tree}/package/x/fifo is a FIFO (named pipe); a tree we copy holds files, folders "
        "and links"
    )
    left = [p.name for p in (tree.parent / "cache" / "base-feeds").iterdir()]
    assert all(n.endswith(".lock") for n in left), left

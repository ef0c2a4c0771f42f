"""The stamp beside an ImageBuilder tree (build/trees.py tree_stamp): beside an
--imagebuilder tree, `IB/../.openwrt-wolf-extracted` is the user's file. A FIFO there hung
`build`, a link to /dev/zero ended in MemoryError; now anything but the stamp
download.extract writes is not ours, and the build goes on as without one.

Oracles: `build --imagebuilder` on the minimal ImageBuilder (tests/build/mini_ib.py) reaches
make (its manifest-saw file) and ends as make tells it to, within a deadline (the hang
detector) and an address-space limit (a run reading /dev/zero stops at it)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from openwrt_wolf.build import download, trees
from tests.build import mini_ib as mini_ib_kit
from tests.conftest import need_tools

ROOT = Path(__file__).resolve().parent.parent.parent
MEMORY = 2 << 30  # address space for the run: a build needs a few hundred MiB


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


@pytest.fixture
def mini_ib(tmp_path: Path) -> Path:
    need_tools("make")
    return mini_ib_kit.make(tmp_path / "ib")


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "big", "foreign"])
def test_a_stamp_that_is_not_ours_is_ignored(kind: str, mini_ib: Path, tmp_path: Path) -> None:
    mark = mini_ib.parent / download.EXTRACTED_MARK
    if kind == "fifo":
        os.mkfifo(mark)
    elif kind == "dev-zero":
        mark.symlink_to("/dev/zero")
    elif kind == "big":
        with mark.open("wb") as fh:
            fh.truncate(20 << 30)  # sparse
    else:
        victim = tmp_path / "secret"
        victim.write_text("root:$6$secret:19000:0:99999:7:::\n")
        mark.symlink_to(victim)
    env = {**os.environ, "OPENWRT_WOLF_CACHE": str(tmp_path / "cache"),
           "OPENWRT_WOLF_STORE": str(tmp_path / "store")}  # fmt: skip
    p = subprocess.run(
        [sys.executable, "-m", "invoke", "build", "--no-report", "-f", "wolfssl,mbedtls", "--stock",
         "-d", "tl-wr902ac", "--imagebuilder", str(mini_ib), "-j", "2"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, preexec_fn=_limited,
    )  # fmt: skip
    assert "Traceback" not in p.stderr and "MemoryError" not in p.stderr, p.stderr[-2000:]
    assert p.returncode == 2, p.stderr  # the stand-in's make image fails, as it is told to
    assert (mini_ib / "manifest-saw").is_file()
    copies = list((tmp_path / "cache").rglob(".openwrt-wolf-slot"))
    assert copies  # -j 2: one working copy beside the tree
    for c in copies:  # the working copy's stamp holds no byte of the foreign file
        assert "secret" not in c.read_text()


def test_our_stamp_is_taken(tmp_path: Path) -> None:
    top = tmp_path / "tree" / "openwrt-imagebuilder-x"
    top.mkdir(parents=True)
    (top / "Makefile").write_text("all:\n")
    line = "openwrt-imagebuilder-25.12.5-ath79-generic.Linux-x86_64.tar.zst " + "ab" * 32 + "\n"
    (top.parent / download.EXTRACTED_MARK).write_text(line)
    assert trees.tree_stamp(top) == line
    (top.parent / download.EXTRACTED_MARK).write_text("not a stamp\n")
    assert trees.tree_stamp(top) == f"{top}:{(top / 'Makefile').stat().st_mtime_ns}"

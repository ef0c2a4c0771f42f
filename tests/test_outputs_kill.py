"""A file written by outputs.py when its writer is SIGKILLed halfway (issue 32): the old file
is intact and nothing is left beside it. The oracle is the directory's listing and the old
file's bytes, after a real SIGKILL of a process that is writing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

WRITER = """
import sys, time
from pathlib import Path
from openwrt_wolf.files import outputs
from openwrt_wolf.results import store

def fill(out):
    out.write(b"half of a new report")
    out.flush()
    print("writing", flush=True)
    time.sleep(600)

if sys.argv[2] == "record":  # a store record goes through the same writer
    outputs.write = lambda path, f, **kw: outputs._replace(Path(path), 0o644, fill)
    store.write_atomic(Path(sys.argv[1]), "x")
else:
    outputs.write(sys.argv[1], fill)
"""


@pytest.mark.parametrize("what", ["report", "record"])
def test_sigkill_while_writing_leaves_the_old_file_and_nothing_else(
    what: str, tmp_path: Path
) -> None:
    old = tmp_path / ("report.html" if what == "report" else "key.json")
    old.write_bytes(b"the old file\n")
    p = subprocess.Popen([sys.executable, "-c", WRITER, str(old), what], cwd=ROOT,
                         stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "writing"
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert sorted(os.listdir(tmp_path)) == [old.name]  # a .report.html.*.tmp stayed
    assert old.read_bytes() == b"the old file\n"


def test_a_whole_file_still_replaces_the_old_one(tmp_path: Path) -> None:
    from openwrt_wolf.files import outputs

    out = tmp_path / "r.md"
    out.write_text("old")
    out.chmod(0o640)
    outputs.write_text(out, "new")
    assert out.read_text() == "new" and os.listdir(tmp_path) == ["r.md"]
    assert out.stat().st_mode & 0o777 == 0o640
    outputs.write_text(tmp_path / "new.md", "x")
    assert (tmp_path / "new.md").stat().st_mode & 0o777 == 0o666 & ~_umask()


def _umask() -> int:
    old = os.umask(0o022)
    os.umask(old)
    return old


def test_without_linkat_the_bytes_are_copied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # where neither linkat(AT_EMPTY_PATH) nor /proc/self/fd may name the file, its bytes are
    # copied into a named temporary file: the result is the same
    from openwrt_wolf.files import outputs

    monkeypatch.setattr(outputs._libc, "linkat", lambda *a: -1)
    monkeypatch.setattr(os, "link", lambda *a, **k: (_ for _ in ()).throw(OSError(18, "no")))
    data = os.urandom(3 << 20)
    outputs.write(tmp_path / "big.bin", lambda out: out.write(data))
    assert (tmp_path / "big.bin").read_bytes() == data and os.listdir(tmp_path) == ["big.bin"]


SLOT_COPIER = """
import shutil, sys, time
from pathlib import Path
from openwrt_wolf import signals
from openwrt_wolf.build import trees
from openwrt_wolf.build.imagebuilder import ImageBuilder

tree = shutil.copytree
def slow(src, dst, **kw):  # one file copied, then stuck: SIGTERM arrives mid-tree
    shutil.copy2(src, dst, **kw)
    print("copying", flush=True)
    time.sleep(600)
shutil.copytree = lambda src, dst, **kw: tree(src, dst, copy_function=slow, **kw)
with signals.as_interrupt():
    trees.slot_dirs(ImageBuilder(Path(sys.argv[1])), 2)
"""


def test_a_termination_signal_while_a_slot_is_copied_leaves_no_work_tree(
    tmp_path: Path,
) -> None:
    """build/trees.py copies the ImageBuilder into a slot under a work name; a SIGTERM halfway
    (a CI timeout) must remove it, not only an OSError (before outputs.work, '.copying' was
    left). The oracle: the slot root's listing after a real SIGTERM."""
    ib = tmp_path / "ib"
    ib.mkdir()
    for n in ("Makefile", "a", "b"):
        (ib / n).write_text(n)
    env = {**os.environ, "OPENWRT_WOLF_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, "-c", SLOT_COPIER, str(ib)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert p.stdout is not None and p.stdout.readline() == "copying\n"
        (root,) = list((tmp_path / "cache" / "slots").iterdir())
        assert [c.name for c in root.iterdir()] == ["slot-1.copying"]  # the work name, half
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=30)
    finally:
        p.kill()
    assert p.returncode != 0
    assert list(root.iterdir()) == []

"""locks.work_dir: a run's private directory, removed by a later run once its owner is dead
(SIGKILL leaves it), never while the owner lives. The oracles: /proc (is the owner alive),
the directory listing, a victim directory a planted link points to."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from openwrt_wolf.files import locks

ROOT = Path(__file__).resolve().parent.parent
HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from openwrt_wolf.files import locks
    with locks.work_dir(Path(sys.argv[1]), "run-") as d:
        (d / "work").write_text("x")
        print(d, flush=True)
        time.sleep(600)
""")


def _holder(top: Path) -> tuple[subprocess.Popen[str], Path]:
    p = subprocess.Popen([sys.executable, "-c", HOLDER, str(top)], cwd=ROOT,
                         stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert p.stdout is not None
    return p, Path(p.stdout.readline().strip())


def test_a_killed_runs_directory_goes_a_live_ones_stays(tmp_path: Path) -> None:
    top = tmp_path / "what-if"
    live, live_dir = _holder(top)
    dead, dead_dir = _holder(top)
    try:
        dead.send_signal(signal.SIGKILL)
        dead.wait(30)
        assert not Path(f"/proc/{dead.pid}").exists() and dead_dir.is_dir()  # left behind
        with locks.work_dir(top, "run-") as mine:
            assert not dead_dir.exists()
            assert Path(f"/proc/{live.pid}").exists() and (live_dir / "work").is_file()
            assert mine.is_dir()
        assert not mine.exists()
        assert sorted(p.name for p in top.iterdir() if p.name.startswith("run-")) == [live_dir.name]
    finally:
        for p in (live, dead):
            p.kill()
            p.wait(30)


def test_older_versions_dirs_and_planted_links(tmp_path: Path) -> None:
    """A run directory without the mark (made before run directories were locked) goes only
    when a day old; a link named like a run directory is neither followed nor removed."""
    top = tmp_path / "what-if"
    top.mkdir()
    fresh, stale = top / "run-fresh", top / "run-stale"
    for d in (fresh, stale):
        d.mkdir()
        (d / "root").mkdir()
    day_ago = time.time() - 2 * 86400
    os.utime(stale, (day_ago, day_ago))
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "f").write_text("precious")
    (top / "run-link").symlink_to(victim)
    with locks.work_dir(top, "run-"):
        pass
    assert fresh.is_dir() and not stale.exists()
    assert (top / "run-link").is_symlink() and (victim / "f").read_text() == "precious"


def _one_line(top: Path, lock: str) -> str:
    """Take the lock in a child (a FIFO would block it for ever: the timeout is the oracle)."""
    code = ("import sys\nfrom pathlib import Path\nfrom openwrt_wolf.files import locks\n"
            "from openwrt_wolf.errors import WolfError\n"
            "try:\n    with locks.locked(Path(sys.argv[1])):\n        print('held')\n"
            "except WolfError as e:\n    print('error:', e)\n    sys.exit(2)\n")  # fmt: skip
    r = subprocess.run([sys.executable, "-c", code, str(top / lock)], cwd=ROOT,
                       capture_output=True, text=True, timeout=30)  # fmt: skip
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert len(r.stdout.strip().splitlines()) == 1, r.stdout
    return r.stdout


def test_a_lock_folder_or_file_that_is_not_one_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")  # as CI's shared cache link was
    assert "link to a missing folder" in _one_line(tmp_path, "dangling/x.lock")
    (tmp_path / "file").write_text("")
    assert "not a directory" in _one_line(tmp_path, "file/x.lock")
    os.mkfifo(tmp_path / "fifo.lock")
    assert "fifo.lock cannot be opened" in _one_line(tmp_path, "fifo.lock")  # ENXIO, no wait
    (tmp_path / "victim").write_text("kept")
    (tmp_path / "link.lock").symlink_to(tmp_path / "victim")
    assert "cannot be opened" in _one_line(tmp_path, "link.lock")
    assert (tmp_path / "victim").read_text() == "kept"
    assert not (tmp_path / "nowhere").exists()

"""size-report's (and history's) --output and --release under bad input: one error line each,
nothing left behind, no device, FIFO or input file replaced. Oracles: data/releases.toml read
here, the files on disk, a full tmpfs, the target's file type before and after (lstat), the
bytes a FIFO's reader got, the exit status a shell sees."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import textwrap
import threading
import tomllib
from pathlib import Path

import pytest

from tests.conftest import need_tools, unavailable
from tests.results.test_store import GOOD

ROOT = Path(__file__).resolve().parent.parent.parent
XZ = "431484"  # the footprint record's xz size (GOOD), which the CSV report shows


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "invoke", *args], cwd=ROOT, capture_output=True, text=True,
        timeout=timeout, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def report(*args: str, store: Path) -> subprocess.CompletedProcess[str]:
    return run("size-report", "--store", str(store), *args)


def one_error(p: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr, p.stderr
    assert len(lines) == 1, p.stderr
    return lines[0]


@pytest.fixture
def store(tmp_path: Path) -> Path:
    (tmp_path / "store" / "footprint").mkdir(parents=True)
    (tmp_path / "store" / "footprint" / "good.json").write_text(json.dumps(GOOD))
    return tmp_path / "store"


def test_output_an_existing_directory(store: Path, tmp_path: Path) -> None:
    line = one_error(report("--output", str(tmp_path), store=store))
    assert f"--output {tmp_path} is a directory" in line


def test_unknown_release_names_the_known_ones(store: Path) -> None:
    known = tomllib.loads((ROOT / "openwrt_wolf/data/releases.toml").read_text())["release"]
    line = one_error(report("--release", "0.1", store=store))
    assert "unknown release '0.1'" in line
    assert all(r in line for r in known), line


def test_output_honours_the_umask_and_writes_through_a_symlink(store: Path, tmp_path: Path) -> None:
    real = tmp_path / "real.csv"
    real.write_text("old\n")
    real.chmod(0o644)
    link = tmp_path / "link.csv"
    link.symlink_to(real)
    assert report("--format", "csv", "--output", str(link), store=store).returncode == 0
    assert link.is_symlink() and XZ in real.read_text()
    assert stat.S_IMODE(real.stat().st_mode) == 0o644  # the mode of the file it replaced
    new = tmp_path / "new.csv"
    p = subprocess.run(
        ["sh", "-c", f"umask 027 && exec {sys.executable} -m invoke size-report --store "
         f"{store} --format csv --output {new}"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert stat.S_IMODE(new.stat().st_mode) == 0o640  # 0666 less the umask, as `touch` does


def full_tmpfs_shell(mountpoint: Path, then: str) -> list[str]:
    """A 64 KiB tmpfs, filled up, in a private mount namespace (no trace on the host)."""
    need_tools("unshare")
    return ["unshare", "-m", "sh", "-c",
            f"mount -t tmpfs -o size=64k tmpfs {mountpoint} && "
            f"(dd if=/dev/zero of={mountpoint}/fill bs=4k count=64 2>/dev/null; true) && "
            f"{then}"]  # fmt: skip


def test_output_on_a_full_disk(store: Path, tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    out = disk / "report.md"
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True, timeout=30)
    if probe.returncode != 0:
        unavailable("cannot make a mount namespace here (unshare -m needs root)")
    script = (f"{sys.executable} -m invoke size-report --store {store} --format markdown "
              f"--output {out}; echo rc=$?; ls -a {disk}")  # fmt: skip
    p = subprocess.run(full_tmpfs_shell(disk, script), cwd=ROOT, capture_output=True,
                       text=True, timeout=120)  # fmt: skip
    assert "rc=2" in p.stdout, p.stdout + p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and f"cannot write {out}: disk full" in lines[0], p.stderr
    assert "Traceback" not in p.stderr
    left = sorted(set(p.stdout.split()) - {"rc=2", ".", ".."})
    assert left == ["fill"], p.stdout  # no temporary file left on the full disk


# --- --output targets of each kind (openwrt_wolf/files/outputs.py) -----------------------------


def _mknod(path: Path, kind: int, major: int, minor: int) -> None:
    try:
        os.mknod(path, kind | 0o666, os.makedev(major, minor))
    except PermissionError:
        unavailable("making a device node needs root (CAP_MKNOD)")


def _kind(path: Path) -> str:
    return stat.filemode(path.lstat().st_mode)[0]


def test_a_character_device_is_written_into_not_replaced(store: Path, tmp_path: Path) -> None:
    null = tmp_path / "null"
    _mknod(null, stat.S_IFCHR, 1, 3)  # the null device, as /dev/null is
    p = run("size-report", "--store", str(store), "--format", "csv", "--output", str(null))
    assert p.returncode == 0, p.stderr
    assert _kind(null) == "c" and os.major(null.lstat().st_rdev) == 1
    assert sorted(q.name for q in tmp_path.iterdir()) == sorted([store.name, "null"])


def test_a_fifo_with_a_reader_gets_the_report(store: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    p = run("size-report", "--store", str(store), "--format", "csv", "--output", str(fifo))
    reader.join(30)
    assert p.returncode == 0, p.stderr
    assert _kind(fifo) == "p" and XZ in got[0].decode()


def test_a_fifo_without_a_reader_is_one_line_not_a_hang(store: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    line = one_error(run("size-report", "--store", str(store), "--output", str(fifo), timeout=60))
    assert "no process reads" in line and _kind(fifo) == "p"


@pytest.mark.parametrize("task", ["size-report", "history"])
@pytest.mark.parametrize("kind", ["block device", "socket"])
def test_a_block_device_or_socket_is_refused(
    task: str, kind: str, store: Path, tmp_path: Path
) -> None:
    target = tmp_path / "target"
    if kind == "block device":
        _mknod(target, stat.S_IFBLK, 240, 7)  # a local-use major: no such disk, whatever happens
    else:
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(target))
    before = _kind(target)
    args = ["--device", "tl-wr902ac"] if task == "history" else []
    line = one_error(run(task, "--store", str(store), *args, "--output", str(target)))
    assert f"is a {kind}" in line and _kind(target) == before


def test_the_store_is_never_the_output(store: Path, tmp_path: Path) -> None:
    record = store / "footprint" / "good.json"
    other_name = tmp_path / "alias.json"
    os.link(record, other_name)  # the same file under a name outside the store
    before = record.read_bytes()
    for target in (record, other_name):
        line = one_error(
            run("size-report", "--store", str(store), "--format", "json", "--output", str(target))
        )
        assert "a file this run reads" in line
    assert record.read_bytes() == before


# --- SIGTERM while the report is made ------------------------------------------------------

HARNESS = textwrap.dedent("""
    import os, signal, sys
    from openwrt_wolf.report.render import html

    real = html.render_html

    class Lost:
        # Python drops an exception raised while a finalizer runs: a signal handled here
        # loses its KeyboardInterrupt, as it can in any __del__ or weakref callback
        def __del__(self):
            os.kill(os.getpid(), signal.SIGTERM)

    def render_html(report):
        text = real(report)
        if sys.argv[1] == "plain":
            os.kill(os.getpid(), signal.SIGTERM)
        else:
            Lost()
        return text

    html.render_html = render_html
    from invoke.main import program
    program.run(["invoke", "size-report", *sys.argv[2:]])
""")


@pytest.mark.parametrize("how", ["plain", "in a finalizer"])
def test_sigterm_while_the_report_is_made(how: str, store: Path, tmp_path: Path) -> None:
    out = tmp_path / "out" / "report.html"
    out.parent.mkdir()
    p = subprocess.run(
        [sys.executable, "-c", HARNESS, how.split()[0], "--store", str(store),
         "--format", "html", "--output", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert p.returncode == 128 + 15, p.stderr[-2000:]  # what a shell shows for SIGTERM
    assert "error: interrupted by SIGTERM" in p.stderr and "Traceback" not in p.stderr
    assert list(out.parent.iterdir()) == []  # no report, no temporary file

"""size-report's --output and --release under bad input: one error line each, nothing left
behind. Oracles: data/releases.toml read here, the files on disk, a full tmpfs."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import need_tools, unavailable
from tests.results.test_store import GOOD

ROOT = Path(__file__).resolve().parent.parent.parent


def report(*args: str, store: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "invoke", "size-report", "--store", str(store), *args],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env=dict(os.environ),
    )  # fmt: skip


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
    assert link.is_symlink() and "431484" in real.read_text()  # the footprint record's xz
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

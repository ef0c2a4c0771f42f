"""fit --image on files that are not images: a device, a FIFO, a huge sparse file. One
error line each, promptly, without reading them (the oracle for "unread": the run stays
within a 1 GiB address-space limit)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent


def _limit_memory() -> None:
    # 1 GiB of address space: a run that read the file (GiBs, sparse) fails with a traceback
    # instead of an error line. getrusage's ru_maxrss cannot be the oracle: a child carries
    # its parent's (the pytest worker's) peak across fork and exec.
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def fit(*args: str, limit: bool = False) -> subprocess.CompletedProcess[str]:
    # a wall-clock bound only so a regression fails instead of hanging the suite
    return subprocess.run(
        [sys.executable, "-m", "invoke", "fit", "--device", "tl-wr902ac", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        preexec_fn=_limit_memory if limit else None,
    )  # fmt: skip


def one_error(p: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert len(lines) == 1, p.stderr
    return lines[0]


def test_dev_zero_is_refused() -> None:
    line = one_error(fit("--image", "/dev/zero"))
    assert "/dev/zero is a character device, not a file" in line


def test_fifo_is_refused_without_hanging(tmp_path: Path) -> None:
    fifo = tmp_path / "image.bin"
    os.mkfifo(fifo)
    line = one_error(fit("--image", str(fifo)))
    assert "is a FIFO (named pipe), not a file" in line


def test_directory_is_refused(tmp_path: Path) -> None:
    assert "is a directory, not a file" in one_error(fit("--image", str(tmp_path)))


@pytest.mark.parametrize("size", [4 << 30, 100 << 30])
def test_huge_sparse_file_is_refused_unread(tmp_path: Path, size: int) -> None:
    big = tmp_path / "big.bin"
    with big.open("wb") as fh:
        fh.truncate(size)  # sparse: no disk used, but reading it would take `size` of RAM
    line = one_error(fit("--image", str(big), limit=True))  # never held the file
    assert f"has {size:,} bytes, more than any flash" in line


def test_kernel_and_rootfs_pieces_are_bounded_too(tmp_path: Path) -> None:
    fifo = tmp_path / "root.squashfs"
    os.mkfifo(fifo)
    line = one_error(fit("--kernel", "/dev/zero", "--rootfs", str(fifo)))
    assert "kernel /dev/zero is a character device" in line

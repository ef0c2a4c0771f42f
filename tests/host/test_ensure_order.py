"""A path option is checked before a task installs its host tools (docs/conventions.md:
"a value a task can check without running anything is checked before it installs or runs
anything"). `perf --toolchain /nonexistent` ran apt-get first (issue 53; in a real image
after booting it), and so did
`build --imagebuilder/--sdk`, `patch --tree`, `patch-defaults --tree` and
`wolfssl-consumers --wolfssl` with a path that is not there.

Oracle: PATH holds only a stand-in apt-get that leaves a marker file, so every host tool is
missing and hosttools.ensure would call it; the marker must not appear, and the one error
line names the option's path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GONE = "/nonexistent/wolf-path"

CASES = {
    "perf --toolchain": ["perf", "--target", "qemu", "--toolchain", GONE],
    "perf --test crypto --toolchain": ["perf", "--target", "qemu", "--test", "crypto",
                                       "--toolchain", GONE],
    "perf in a real image --toolchain": ["perf", "--target", "vm", "--test", "memory", "-f",
                                         "wolfssl", "--image", "{tmp}/k.elf", "--rootfs",
                                         "{tmp}/rootfs.img", "--toolchain", GONE],
    "build --imagebuilder": ["build", "--no-report", "-f", "mbedtls", "--stock", "-d",
                             "tl-wr902ac", "--imagebuilder", GONE],
    "build --sdk": ["build", "--no-report", "-f", "wolfssl", "-d", "tl-wr902ac", "--sdk", GONE],
    "patch --tree": ["patch", "--tree", GONE],
    "patch-defaults --tree": ["patch-defaults", "--tree", GONE],
    "wolfssl-consumers --wolfssl": ["wolfssl-consumers", "--wolfssl", GONE],
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_a_missing_path_is_refused_before_apt_get(tmp_path: Path, case: str) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    marker = tmp_path / "apt-get-ran"
    (fake / "apt-get").write_text(f'#!/bin/sh\necho "$@" >> {marker}\nexit 1\n')
    (fake / "apt-get").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENWRT_")}
    env |= {"PATH": str(fake), "OPENWRT_WOLF_CACHE": str(tmp_path / "cache"),
            "OPENWRT_WOLF_STORE": str(tmp_path / "store")}  # fmt: skip
    (tmp_path / "k.elf").write_bytes(b"\x7fELF")  # files that are there (a real image's)
    (tmp_path / "rootfs.img").write_bytes(bytes(512))
    argv = [a.replace("{tmp}", str(tmp_path)) for a in CASES[case]]
    p = subprocess.run([sys.executable, "-m", "invoke", *argv], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert not marker.exists(), f"apt-get ran: {marker.read_text()}"
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1 and GONE in errors[0], p.stderr
    assert "$ apt-get" not in p.stderr

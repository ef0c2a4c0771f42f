"""apt's lock held by a competing process: the install waits with a message instead of
dying with `E: Could not get lock`. The kernel's own lock (fcntl) is the oracle; apt-get is
a stand-in that records how it was called, so no package is installed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import unavailable

ROOT = Path(__file__).resolve().parent.parent.parent
FRONTEND = "/var/lib/dpkg/lock-frontend"

HOLD = textwrap.dedent(f"""
    import fcntl, sys, time
    f = open({FRONTEND!r}, "a")
    fcntl.lockf(f, fcntl.LOCK_EX)  # apt's own kind of lock (F_SETLK)
    print("held", flush=True)
    time.sleep(float(sys.argv[1]))
""")

# The stand-in apt-get: was the frontend lock free when it started (the kernel says), and
# with which options was it called; `install` makes the missing tool appear.
APT_GET = textwrap.dedent(f"""\
    #!{sys.executable}
    import fcntl, os, sys
    with open({FRONTEND!r}, "a") as f:
        try:
            fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            free = "free"
        except OSError:
            free = "HELD"
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "apt.log"), "a") as log:
        log.write(free + " " + " ".join(sys.argv[1:]) + "\\n")
    if "install" in sys.argv:
        with open(os.path.join(here, "cpio"), "w") as fh:
            fh.write("#!/bin/sh\\n")
        os.chmod(os.path.join(here, "cpio"), 0o755)
""")


def test_install_waits_for_a_held_apt_lock(tmp_path: Path) -> None:
    if os.geteuid() != 0 or not os.path.exists(FRONTEND):
        unavailable(f"holding {FRONTEND} needs root and dpkg")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "apt-get").write_text(APT_GET)
    (fake / "apt-get").chmod(0o755)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, "4"], stdout=subprocess.PIPE,
                              text=True)  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        code = ("from openwrt_wolf import cli; from openwrt_wolf.host import hosttools; "
                "cli.setup_logging(); hosttools.ensure(['cpio'])")  # fmt: skip
        p = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
            timeout=300, env={**os.environ, "PATH": str(fake), "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
    finally:
        holder.kill()
        holder.wait()
    assert p.returncode == 0, p.stderr
    assert f"apt is busy: {FRONTEND} is held by process {holder.pid}" in p.stderr
    calls = (fake / "apt.log").read_text().splitlines()
    assert [c.split()[0] for c in calls] == ["free", "free"], calls
    assert all("-o DPkg::Lock::Timeout=600" in c for c in calls), calls
    assert "update" in calls[0] and "install" in calls[1] and calls[1].endswith("cpio")

"""`invoke perf --target router` against the project's stand-in router (tests/sshd_router.py): a
real OpenSSH sshd on 127.0.0.1 whose "router" is this machine, x86_64 with glibc. The lab must
find that out over SSH, build x86_64 programs (the footprint lab's x86_64 arch), upload them,
run the libraries' own benchmark tools there, store records labelled router (not emulated) and
remove everything again, also when interrupted.

Oracles: a listing of the upload directory taken over SSH by OpenSSH's own client while the lab
runs (md5sum there against hashlib on the footprint build here) and after it; `uname -m` over
SSH and os.uname() here; /proc here (the router's processes); the figures read from the tools'
printed lines with the test's own regular expressions (tests/perf/test_lab.py)."""

from __future__ import annotations

import hashlib
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from openwrt_wolf.footprint import lab as fp_lab
from openwrt_wolf.perf import crypto
from openwrt_wolf.results import store
from openwrt_wolf.results.perf import CRYPTO, CryptoSpeed
from tests import sshd_router
from tests.conftest import need_tools
from tests.perf.test_lab import _mbedtls_value, _wolfcrypt_mib, _wolfcrypt_ms
from tests.sshd_router import FakeRouter

router_sftp = sshd_router.router_sftp
router = sshd_router.router

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ("gcc", "x86_64-linux-gnu-gcc", "cmake", "autoreconf", "libtoolize", "perl", "make",
         "patch", "ssh")  # fmt: skip
DIR = re.compile(r"mkdir -m 700 (/tmp/wolf-perf-[0-9a-f]+)")


def _ssh(r: FakeRouter, command: str) -> subprocess.CompletedProcess[str]:
    """OpenSSH's client, not the lab's paramiko."""
    return subprocess.run(
        ["ssh", "-i", str(r.userkey), "-p", str(r.port), "-o",
         f"UserKnownHostsFile={r.known_hosts}", "-o", "StrictHostKeyChecking=yes", "-o",
         "BatchMode=yes", "-o", "LogLevel=ERROR",
         f"{r.user}@{r.host}", command],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip


class Watch:
    """Runs `invoke perf` and, once the lab has made its upload directory (its own log line),
    lists that directory over SSH every 0.3 s until the run ends: {path: md5} ever seen."""

    def __init__(self, r: FakeRouter, *args: str) -> None:
        self.r = r
        self.dir = ""
        self.seen: dict[str, str] = {}
        self.stderr: list[str] = []
        self.running = threading.Event()  # a benchmark program of the lab is running
        argv = [str(ROOT / "wolf"), "perf", "--target", "router", "--host", r.host, "--port",
                str(r.port), "--user", r.user, "--key", str(r.userkey), "--known-hosts",
                str(r.known_hosts), *args]  # fmt: skip
        self.p = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, start_new_session=True,
                                  env={**os.environ, "COLUMNS": "200"})  # fmt: skip
        self.readers = [threading.Thread(target=self._read, daemon=True),
                        threading.Thread(target=self._poll, daemon=True)]  # fmt: skip
        for t in self.readers:
            t.start()

    def _read(self) -> None:
        assert self.p.stderr is not None
        for line in self.p.stderr:
            self.stderr.append(line)
            m = DIR.search(line)
            if m and not self.dir:
                self.dir = m.group(1)

    def _poll(self) -> None:
        while self.p.poll() is None:
            if self.dir:
                out = _ssh(self.r, f"find {self.dir} -type f -exec md5sum {{}} + 2>/dev/null")
                for line in out.stdout.splitlines():
                    digest, path = line.split(maxsplit=1)
                    self.seen[path] = digest
                if _pids_under(self.dir):
                    self.running.set()
            time.sleep(0.3)

    def wait(self, timeout: float = 3600) -> tuple[int, str, str]:
        assert self.p.stdout is not None
        out = self.p.stdout.read()
        rc = self.p.wait(timeout=timeout)
        for t in self.readers:
            t.join(timeout=60)
        return rc, out, "".join(self.stderr)


def _pids_under(directory: str) -> list[int]:
    """Processes on the "router" (this machine) running something from the upload directory:
    their command line names it (the shell that waits for a benchmark does too)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if directory in cmd and "find " not in cmd:
                out.append(int(d.name))
    return out


def _gone(r: FakeRouter, directory: str) -> None:
    after = _ssh(r, f"ls -d {directory}")
    assert after.returncode != 0 and "No such file" in after.stderr, after
    deadline = time.monotonic() + 10  # a SIGKILLed process takes a moment to be reaped
    while _pids_under(directory) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _pids_under(directory) == []


def test_crypto_on_router_over_ssh(router: FakeRouter, tmp_path: Path) -> None:
    need_tools(*TOOLS)
    st = tmp_path / "store"
    w = Watch(router, "--flavour", "mbedtls,wolfssl", "--quick", "--store", str(st))
    rc, out, err = w.wait()
    assert rc == 0, err[-4000:]

    # the platform, from the router itself: uname -m over SSH is this machine's
    machine = _ssh(router, "uname -m").stdout.strip()
    assert machine == os.uname().machine == "x86_64"
    assert f"perf: router {os.uname().nodename}: x86_64 little-endian, glibc" in err

    recs = {r.flavour: CryptoSpeed.from_dict(r.data) for r in store.FileStore(st).query(CRYPTO)}
    assert set(recs) == {"mbedtls", "wolfssl"}
    for flavour, rec in recs.items():
        assert rec.where.target == "router" and not rec.where.emulated
        assert rec.where.machine == f"{os.uname().nodename} (x86_64, little-endian, glibc)"
        # the library build the tool ran against is the footprint lab's x86_64 one
        build = fp_lab.build_root() / rec.footprint_key
        assert '"arch": "x86_64"' in (build / "footprint.json").read_text()
        # each program ran from the upload directory, through SSH
        # (env LD_LIBRARY_PATH=… LD_PRELOAD=… PROGRAM ARGS)
        assert all(c.split()[3].startswith(f"{w.dir}/{flavour}-") for c in rec.commands)
        # uploaded: the library build byte for byte (md5sum on the router, hashlib here)
        for lib in (build / "installed").iterdir():
            if not lib.is_symlink():
                want = hashlib.md5(lib.read_bytes()).hexdigest()
                assert w.seen.get(f"{w.dir}/{flavour}-lib/{lib.name}") == want, lib.name
        assert f"{w.dir}/{flavour}-cpuclock.so" in w.seen
    assert {p for p in w.seen if "benchmark" in p} == {
        f"{w.dir}/mbedtls-benchmark-1024", f"{w.dir}/mbedtls-benchmark-16384",
        f"{w.dir}/wolfssl-benchmark-all",
    }  # fmt: skip
    # ... and removed: nothing left there, nothing running
    _gone(router, w.dir)

    # the figures are the tools' own printed lines
    mb = recs["mbedtls"]
    tool = crypto.settings()["tool"]["mbedtls"]
    for ident, label in tool["operations"].items():
        per_s = _mbedtls_value("\n".join(mb.outputs), label)
        assert mb.ms_per_op[ident] == pytest.approx(1000 / per_s, rel=1e-3)
    for ident, label in tool["ciphers"].items():
        for i, size in enumerate((1024, 16384)):
            o = mb.outputs[i * len(tool["cipher_args"]) + list(tool["ciphers"]).index(ident)]
            kib = _mbedtls_value(o, f"{label} KiB")
            assert mb.mib_per_s[ident][str(size)] == pytest.approx(kib / 1024, rel=1e-3)
    wf = recs["wolfssl"]
    tool = crypto.settings()["tool"]["wolfssl"]
    text = "\n".join(wf.outputs)
    for ident in ("p256-ecdh", "p256-sign", "p256-verify", "rsa2048-sign", "rsa2048-verify"):
        assert wf.ms_per_op[ident] == pytest.approx(_wolfcrypt_ms(text, tool["operations"][ident]))
    for ident, label in tool["ciphers"].items():
        for size in (1024, 16384):
            assert wf.mib_per_s[ident][str(size)] == pytest.approx(
                _wolfcrypt_mib(text, label, size), rel=1e-3
            )
    # the table printed from the store names the target
    assert "Performance on router" in out


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_run_leaves_nothing(
    router: FakeRouter, tmp_path: Path, sig: signal.Signals
) -> None:
    """Ctrl-C (SIGINT to the process group, as a terminal sends it) or SIGTERM while a
    benchmark runs on the router: the program is ended and the upload directory removed."""
    need_tools(*TOOLS)
    w = Watch(router, "--flavour", "mbedtls", "--store", str(tmp_path / "store"))
    assert w.running.wait(timeout=1800) or w.p.poll() is not None, "no benchmark ever ran"
    assert w.p.poll() is None, "the run ended before it could be interrupted"
    # the watcher saw a benchmark start; one look could fall between two of its programs
    deadline = time.monotonic() + 60
    while not (w.dir and _pids_under(w.dir)) and w.p.poll() is None:
        assert time.monotonic() < deadline, "no benchmark process under the upload directory"
        time.sleep(0.05)
    assert w.p.poll() is None, "the run ended before it could be interrupted"
    if sig == signal.SIGINT:
        os.killpg(w.p.pid, sig)
    else:
        w.p.send_signal(sig)
    rc, _out, err = w.wait(timeout=300)
    assert rc != 0
    assert "Traceback" not in err
    assert any(f"{w.dir}/mbedtls-benchmark-" in p for p in w.seen)
    _gone(router, w.dir)
    assert not list((tmp_path / "store").glob("perf-crypto/*.json"))


def test_router_options_need_router_target(tmp_path: Path) -> None:
    cases = {
        ("--target", "router"): "error: --target router needs --host ADDR",
        ("--target", "qemu", "--host", "127.0.0.1"): "error: --host: only with --target router",
        ("--target", "router", "--host", "127.0.0.1", "--image", "k.elf"):
            "error: --image: only with --target vm",
        ("--target", "qemu", "--key", "id"): "error: --key: only with --target router",
    }  # fmt: skip
    for args, want in cases.items():
        p = subprocess.run([str(ROOT / "wolf"), "perf", *args, "--store", str(tmp_path)],
                           cwd=ROOT, capture_output=True, text=True, timeout=120)  # fmt: skip
        assert p.returncode == 2, (args, p.stderr)
        assert "Traceback" not in p.stderr
        lines = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
        assert len(lines) == 1 and lines[0].startswith(want), (args, p.stderr)

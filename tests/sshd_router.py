"""A fake OpenWrt router on 127.0.0.1 for the router tests: OpenSSH's sshd with its own config,
a throwaway host key and user key, and the stand-ins in tests/fake_router on its PATH
(sysupgrade, ubus, apk, opkg, df, sha256sum). A watcher thread plays the router's reboot:
when a stand-in asks for it, every sshd process of this router is killed (the sessions drop),
the port refuses connections for a while, then sshd starts again (with a new host key when the
config was wiped, as dropbear would generate one)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import free_port, need_tools, unavailable

HERE = Path(__file__).resolve().parent
STANDINS = HERE / "fake_router"
# the stand-ins' python3: this interpreter itself, ahead of the host's PATH (a pyenv shim
# first on it ran `pyenv rehash` inside dropbear's namespace and wrote its errors into the
# output of `ubus call system board`)
PYTHON_DIR = Path(sys.executable).resolve().parent
SSHD = "/usr/sbin/sshd"
SFTP_SERVER = "/usr/lib/openssh/sftp-server"
DROPBEAR = "/usr/sbin/dropbear"

# the firmware the fake router runs before a test flashes it
BASE_STATE: dict[str, Any] = {
    "board_name": "tplink,tl-wr902ac-v1",
    "model": "TP-Link TL-WR902AC v1",
    "compat_version": "1.0",
    "pkg_manager": "apk",
    "packages": {
        "base-files": "1680-r1",
        "libustream-mbedtls": "2025.10.03~5a5d9a5b-r1",
        "libmbedtls21": "3.6.6-r1",
        "apk-mbedtls": "3.0.2-r1",
    },
    "faults": [],
    "downtime": 1.5,
    "tmp_avail_kb": None,
}


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(d.name))
    return kids


def _tree(pid: int) -> set[int]:
    kids = _children()
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        if p not in out:
            out.add(p)
            todo += kids.get(p, [])
    return out


class FakeRouter:
    """server "openssh" (with or without its sftp subsystem) or "dropbear" (what OpenWrt
    runs; never has SFTP here, as on OpenWrt)."""

    def __init__(self, base: Path, *, sftp: bool, server: str = "openssh") -> None:
        need_tools(SSHD, "ssh-keygen", "python3")
        if server == "dropbear":
            need_tools(DROPBEAR, "dropbearkey", "unshare")
            if os.geteuid() != 0:
                unavailable("the dropbear router needs root (a private mount namespace)")
        self.base = base
        self.server = server
        self.sftp = sftp and server == "openssh"
        self.root = base / "root"  # $FAKEROOT: the router's files
        self.port = free_port()
        self.host = "127.0.0.1"
        self.user = "root" if server == "dropbear" else __import__("getpass").getuser()
        self.proc: subprocess.Popen[bytes] | None = None
        self.pids_seen: dict[int, str] = {}  # pid -> start time (pids get reused)
        self.events: list[str] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.hostkey = base / "ssh_host_ed25519_key"
        self.userkey = base / "id_ed25519"
        self.known_hosts = base / "known_hosts"
        self._keygen(self.userkey)
        self.new_hostkey()
        (base / "authorized_keys").write_text((base / "id_ed25519.pub").read_text())
        if os.geteuid() == 0:
            Path("/run/sshd").mkdir(exist_ok=True)  # privilege separation dir of Debian's sshd
        if server == "dropbear":
            # dropbear reads ~root/.ssh/authorized_keys and has no SetEnv: give root a home of
            # our own inside a private mount namespace; bash sourced .bashrc sets PATH
            home = base / "home"
            (home / ".ssh").mkdir(parents=True, mode=0o700)
            home.chmod(0o700)
            (home / ".ssh" / "authorized_keys").write_text((base / "authorized_keys").read_text())
            (home / ".bashrc").write_text(f"export PATH={STANDINS}:{PYTHON_DIR}:$PATH\n")
            # the router's /etc inside the namespace: the host's, plus /etc/openwrt_release
            # (the fake firmware's), and like a new or wiped OpenWrt root has no password
            # (dropbear -B lets it in)
            etc = base / "etc"
            shutil.copytree("/etc", etc, symlinks=True, ignore_dangling_symlinks=True)
            shadow = [
                ":".join([f[0], "", *f[2:]]) if f[0] == "root" else ":".join(f)
                for f in (ln.split(":") for ln in (etc / "shadow").read_text().splitlines())
            ]
            (etc / "shadow").write_text("\n".join(shadow) + "\n")
            (etc / "openwrt_release").unlink(missing_ok=True)
            (etc / "openwrt_release").symlink_to(self.root / "etc" / "openwrt_release")
        (base / "home").mkdir(mode=0o700, exist_ok=True)
        self._write_config()
        self.reset()
        self.watcher = threading.Thread(target=self._watch, daemon=True)
        self.watcher.start()

    # -- sshd ----------------------------------------------------------------------------

    def _keygen(self, path: Path) -> None:
        for p in (path, path.with_suffix(".pub")):
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "wolf-test", "-f", str(path)],
            check=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )

    def new_hostkey(self) -> None:
        if self.server == "dropbear":
            with contextlib.suppress(FileNotFoundError):
                self.hostkey.unlink()
            subprocess.run(
                ["dropbearkey", "-t", "ed25519", "-f", str(self.hostkey)],
                check=True, timeout=30, stdin=subprocess.DEVNULL, capture_output=True,
            )  # fmt: skip
        else:
            self._keygen(self.hostkey)

    def host_pub(self) -> tuple[str, str]:
        """(key type, base64) of the server's current host key, from the key tools."""
        if self.server == "dropbear":
            out = subprocess.run(
                ["dropbearkey", "-y", "-f", str(self.hostkey)],
                check=True, timeout=30, capture_output=True, text=True,
            ).stdout  # fmt: skip
            line = next(ln for ln in out.splitlines() if ln.startswith("ssh-"))
        else:
            line = self.hostkey.with_suffix(".pub").read_text()
        kind, b64 = line.split()[:2]
        return kind, b64

    def _env(self) -> dict[str, str]:
        """dropbear -e hands its environment to sessions. bash reads ~/.bashrc when run by an
        SSH server only as a top-level shell (no SHLVL inherited), else $BASH_ENV: set both."""
        env = {k: v for k, v in os.environ.items() if k != "SHLVL"}
        return env | {"FAKEROOT": str(self.root), "BASH_ENV": str(self.base / "home" / ".bashrc")}

    def _argv(self) -> list[str]:
        if self.server == "openssh":
            return [
                SSHD,
                "-D",
                "-f",
                str(self.base / "sshd_config"),
                "-E",
                str(self.base / "sshd.log"),
            ]
        dropbear = (
            f"exec {DROPBEAR} -F -E -e -B -p 127.0.0.1:{self.port} -r {self.hostkey} "
            f"-P {self.base / 'dropbear.pid'} 2>>{self.base / 'sshd.log'}"
        )
        # OpenWrt has no sftp-server: hide Debian's (the private mount namespace only)
        hide = "mount -t tmpfs none /usr/lib/openssh"
        hide += f" && mount --bind {self.base / 'etc'} /etc"
        return [
            "unshare",
            "-m",
            "sh",
            "-c",
            f"mount --bind {self.base / 'home'} /root && {hide} && {dropbear}",
        ]

    def _write_config(self) -> None:
        path = f"{STANDINS}:{PYTHON_DIR}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
        lines = [
            f"Port {self.port}",
            "ListenAddress 127.0.0.1",
            f"HostKey {self.hostkey}",
            "PidFile none",
            f"AuthorizedKeysFile {self.base / 'authorized_keys'}",
            "StrictModes no",
            "UsePAM no",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "PermitRootLogin prohibit-password",
            f"AllowUsers {self.user}",
            "PrintMotd no",
            "MaxStartups 100",
            "MaxSessions 50",
            "LogLevel ERROR",
            # HOME of our own: Debian's bash reads ~/.bashrc when sshd runs it, and a CI
            # machine's (pyenv init, run by concurrent sessions) wrote "rm: ..." into the
            # output of `cat /proc/uptime`; OpenWrt's ash -c reads no rc file
            f"SetEnv PATH={path} FAKEROOT={self.root} HOME={self.base / 'home'}",
        ]
        if self.sftp:
            lines.append(f"Subsystem sftp {SFTP_SERVER}")
        (self.base / "sshd_config").write_text("\n".join(lines) + "\n")

    def start(self) -> None:
        with self.lock:
            if self.proc and self.proc.poll() is None:
                return
            self.proc = subprocess.Popen(
                self._argv(),
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env=self._env(),
            )
            self.pids_seen[self.proc.pid] = _start_time(self.proc.pid)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError),
                socket.create_connection((self.host, self.port), 1) as s,
            ):
                if s.recv(64).startswith(b"SSH-"):
                    return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        log = (self.base / "sshd.log").read_text() if (self.base / "sshd.log").exists() else ""
        raise RuntimeError(f"sshd did not start on port {self.port}: {log[-500:]}")

    def kill_all(self) -> None:
        """Stop this router's sshd and every session under it (as a reboot would).

        Session children call setsid(), so a process group kill misses them: freeze the whole
        tree with SIGSTOP (nothing can fork any more), then SIGKILL every pid in it."""
        with self.lock:
            if self.proc is None:
                return
            stopped: set[int] = set()
            while True:
                new = _tree(self.proc.pid) - stopped
                if not new:
                    break
                for pid in new:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGSTOP)
                stopped |= new
            self.pids_seen |= {pid: _start_time(pid) for pid in stopped}
            for pid in stopped:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
            self.proc = None

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # -- the router's reboot -------------------------------------------------------------

    def _watch(self) -> None:
        req = self.root / "control" / "request.json"
        while not self.stopping.is_set():
            if req.exists():
                what = json.loads(req.read_text())
                req.unlink()
                self.events.append(f"request {what}")
                self.kill_all()
                if what.get("regen_hostkey"):  # sysupgrade -n: /etc/dropbear is gone
                    self.new_hostkey()
                    if self.server == "dropbear":
                        (self.base / "home" / ".ssh" / "authorized_keys").unlink()
                time.sleep(float(what.get("downtime", 1.5)))
                if what.get("come_back", True) and not self.stopping.is_set():
                    self.start()
                    self.events.append("back")
            time.sleep(0.05)

    def reset(self, **state: Any) -> None:
        """Fresh firmware state for a test; sshd running with the original host key."""
        if self.root.exists():
            shutil.rmtree(self.root)
        (self.root / "tmp").mkdir(parents=True)
        (self.root / "etc").mkdir()
        (self.root / "control").mkdir()
        st = json.loads(json.dumps(BASE_STATE)) | state
        (self.root / "state.json").write_text(json.dumps(st, indent=1))
        (self.root / "etc" / "openwrt_release").write_text(
            "DISTRIB_ID='OpenWrt'\nDISTRIB_RELEASE='24.10.8'\nDISTRIB_REVISION='r28900-0b795ce79e'\n"
            "DISTRIB_TARGET='ath79/generic'\nDISTRIB_ARCH='mips_24kc'\n"
            "DISTRIB_DESCRIPTION='OpenWrt 24.10.8 r28900-0b795ce79e'\nDISTRIB_TAINTS=''\n"
        )
        self.events.clear()
        if self.server == "dropbear":
            auth = (self.base / "authorized_keys").read_text()
            (self.base / "home" / ".ssh" / "authorized_keys").write_text(auth)
        if not self.running():
            self.start()

    def state(self) -> dict[str, Any]:
        return dict(json.loads((self.root / "state.json").read_text()))

    def set_state(self, **kw: Any) -> None:
        st = self.state() | kw
        (self.root / "state.json").write_text(json.dumps(st, indent=1))

    def trust_hostkey(self) -> None:
        """known_hosts with this router's current key, as after a first --accept-new."""
        kind, b64 = self.host_pub()
        self.known_hosts.write_text(f"[{self.host}]:{self.port} {kind} {b64}\n")

    def close(self) -> None:
        self.stopping.set()
        self.watcher.join(timeout=10)
        self.kill_all()
        deadline = time.monotonic() + 10
        while True:  # SIGKILLed processes may take a moment to be gone
            alive = [p for p, t in self.pids_seen.items() if t and _alive(p, t)]
            if not alive or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert not alive, f"sshd processes left running: {alive}"


def _start_time(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def _alive(pid: int, start: str) -> bool:
    """The same process (not a reused pid) still exists and is not a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z" and fields[19] == start


def _router(
    tmp_path_factory: pytest.TempPathFactory, sftp: bool, server: str = "openssh"
) -> Iterator[FakeRouter]:
    base = tmp_path_factory.mktemp(f"{server}-{'sftp' if sftp else 'scp'}-router")
    r = FakeRouter(base, sftp=sftp, server=server)
    try:
        yield r
    finally:
        r.close()


@pytest.fixture(scope="session")
def router_sftp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeRouter]:
    yield from _router(tmp_path_factory, sftp=True)


@pytest.fixture(scope="session")
def router_scp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeRouter]:
    yield from _router(tmp_path_factory, sftp=False)


@pytest.fixture(scope="session")
def router_dropbear(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeRouter]:
    yield from _router(tmp_path_factory, sftp=False, server="dropbear")


@pytest.fixture
def router(router_sftp: FakeRouter) -> FakeRouter:
    router_sftp.reset()
    router_sftp.trust_hostkey()
    return router_sftp


def make_image(
    path: Path,
    *,
    supported: list[str] | None = None,
    version: str = "25.12.5",
    revision: str = "r32071-f0a60eee2f",
    packages: dict[str, str] | None = None,
    pkg_manager: str = "apk",
    metadata: bool = True,
    compat: str = "1.0",
    size: int = 300_000,
) -> Path:
    """A stand-in sysupgrade image: fake payload, random filler, and (optionally) the fwtool
    metadata block OpenWrt's append-metadata writes (include/image-commands.mk's JSON)."""
    import sys

    sys.path.insert(0, str(STANDINS))
    import fakefw

    payload = {"packages": packages or {}, "pkg_manager": pkg_manager}
    body = fakefw.FAKE_MAGIC + json.dumps(payload).encode() + b"\n"
    body += os.urandom(max(0, size - len(body)))
    if metadata:
        meta: dict[str, Any] = {"metadata_version": "1.1", "compat_version": compat}
        devs = supported if supported is not None else ["tplink,tl-wr902ac-v1", "tl-wr902ac-v1"]
        if compat == "1.0":
            meta["supported_devices"] = devs
        else:
            meta["new_supported_devices"] = devs
            meta["supported_devices"] = [f"{' '.join(devs)} - Image version mismatch"]
        meta["version"] = {
            "dist": "OpenWrt",
            "version": version,
            "revision": revision,
            "target": "ath79/generic",
            "board": "tplink_tl-wr902ac-v1",
        }
        body = fakefw.append_metadata(body, meta)
    path.write_bytes(body)
    return path


WOLFSSL_PACKAGES = {
    "base-files": "1680-r1",
    "libustream-wolfssl": "2025.10.03~5a5d9a5b-r1",
    "libwolfssl5.9.1.e624513f": "5.9.1-r1",
    "apk-openssl": "3.0.2-r1",
    "libopenssl3": "3.5.7-r1",
    "kmod-8021q": "6.12.94-r1",
}

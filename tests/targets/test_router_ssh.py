"""The SSH Target against a real OpenSSH sshd on 127.0.0.1 (tests/sshd_router.py)."""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
from pathlib import Path

import pytest

from openwrt_wolf.errors import WolfError
from openwrt_wolf.targets.router import hostkeys, ssh
from openwrt_wolf.targets.router.failures import CommandTimeout
from openwrt_wolf.targets.router.login import Login, login_from_cli
from openwrt_wolf.targets.router.reachable import wait_down, wait_up
from openwrt_wolf.targets.target import CommandResult
from tests import sshd_router
from tests.sshd_router import STANDINS, FakeRouter

# the fake routers' fixtures (session-scoped sshd), used by name below
router_sftp = sshd_router.router_sftp
router_scp = sshd_router.router_scp
router_dropbear = sshd_router.router_dropbear
router = sshd_router.router


def login(r: FakeRouter, **kw: object) -> Login:
    args: dict[str, object] = dict(
        host=r.host, port=r.port, user=r.user, key=r.userkey, known_hosts=r.known_hosts
    )
    args.update(kw)
    return Login(**args)  # type: ignore[arg-type]


def test_run_exit_status_and_output(router: FakeRouter) -> None:
    t = ssh.SSHTarget(login(router))
    try:
        res = t.run("echo out; echo err >&2; exit 3")
        assert res.exit_status == 3
        assert res.output.splitlines() == ["out", "err"]
        assert "$ echo out; echo err >&2; exit 3" in t.console_log()
        with pytest.raises(CommandTimeout, match="did not finish within 1 s"):
            t.run("sleep 5", timeout=1)
        assert t.run("true").exit_status == 0  # the connection survives a timed-out command
    finally:
        t.close()


def test_meminfo_through_target_matches_host(router: FakeRouter) -> None:
    """What measure-memory reads on a router: /proc/meminfo over the Target. The sshd runs on
    this machine, so the host's own /proc/meminfo is the oracle."""
    t = ssh.open_target(  # what `invoke measure-memory --host` builds from its options
        router.host, port=router.port, user=router.user,
        key=str(router.userkey), known_hosts=str(router.known_hosts),
    )  # fmt: skip
    try:
        remote = t.run("cat /proc/meminfo").output
    finally:
        t.close()

    def field(text: str, name: str) -> int:
        line = next(ln for ln in text.splitlines() if ln.startswith(name + ":"))
        return int(line.split()[1])

    host = Path("/proc/meminfo").read_text()
    assert field(remote, "MemTotal") == field(host, "MemTotal")
    assert (
        abs(field(remote, "MemAvailable") - field(host, "MemAvailable"))
        < field(host, "MemTotal") // 10
    )


@pytest.mark.parametrize("method", ["auto", "scp", "cat"])
def test_put_copies_exact_bytes(router: FakeRouter, tmp_path: Path, method: str) -> None:
    data = bytes(range(256)) * 4000 + b"tail"
    src = tmp_path / "img.bin"
    src.write_bytes(data)
    dest = router.root / "tmp" / f"copy-{method}.bin"
    t = ssh.SSHTarget(login(router))
    try:
        t.put(src, str(dest), method=method)
        assert t.copy_method == ("sftp" if method == "auto" else method)
    finally:
        t.close()
    assert hashlib.sha256(dest.read_bytes()).hexdigest() == hashlib.sha256(data).hexdigest()


def test_put_without_sftp_falls_back_to_scp(router_scp: FakeRouter, tmp_path: Path) -> None:
    r = router_scp
    r.reset()
    r.trust_hostkey()
    src = tmp_path / "img.bin"
    src.write_bytes(b"\x00\xff" * 150_000)
    dest = r.root / "tmp" / "img.bin"
    t = ssh.SSHTarget(login(r))
    try:
        t.put(src, str(dest))
        assert t.copy_method == "scp"
        with pytest.raises(WolfError, match="no SFTP server"):
            t.put(src, str(dest), method="sftp")
    finally:
        t.close()
    assert dest.read_bytes() == src.read_bytes()


def test_scp_sink_error_is_one_line(router: FakeRouter, tmp_path: Path) -> None:
    src = tmp_path / "x.bin"
    src.write_bytes(b"x" * 1000)
    t = ssh.SSHTarget(login(router))
    try:
        with pytest.raises(WolfError, match="scp on the router refused the copy") as e:
            t.put(src, "/nonexistent-dir/x.bin", method="scp")
        assert "\n" not in str(e.value)
    finally:
        t.close()


def test_unknown_host_key_refused_then_accept_new(router: FakeRouter) -> None:
    router.known_hosts.unlink()
    with pytest.raises(WolfError, match=r"is not in .*known_hosts.*--accept-new"):
        ssh.SSHTarget(login(router))
    t = ssh.SSHTarget(login(router, accept_new=True))
    t.close()
    # the oracle: the public key ssh-keygen wrote for the server
    kind, b64 = router.hostkey.with_suffix(".pub").read_text().split()[:2]
    assert router.known_hosts.read_text() == f"[{router.host}]:{router.port} {kind} {b64}\n"
    ssh.SSHTarget(login(router)).close()  # now known: no --accept-new needed


def test_changed_host_key_refused(router: FakeRouter, tmp_path: Path) -> None:
    other = tmp_path / "other"
    router._keygen(other)
    kind, b64 = other.with_suffix(".pub").read_text().split()[:2]
    router.known_hosts.write_text(f"# keep me\n[{router.host}]:{router.port} {kind} {b64}\n")
    for accept_new in (False, True):  # --accept-new never accepts a *changed* key
        with pytest.raises(hostkeys.HostKeyChanged, match=r"changed.*refusing to connect") as e:
            ssh.SSHTarget(login(router, accept_new=accept_new))
        assert "\n" not in str(e.value)
    hostkeys.forget_host(router.known_hosts, f"[{router.host}]:{router.port}")
    assert router.known_hosts.read_text() == "# keep me\n"


def test_connection_refused() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: the kernel refuses
        with pytest.raises(WolfError, match=f"connection refused by 127.0.0.1:{port}"):
            ssh.SSHTarget(Login("127.0.0.1", port, connect_timeout=3))


def test_authentication_failure(router: FakeRouter, tmp_path: Path) -> None:
    stranger = tmp_path / "stranger"
    router._keygen(stranger)
    with pytest.raises(WolfError, match=f"authentication failed for {router.user}@"):
        ssh.SSHTarget(login(router, key=stranger))
    with pytest.raises(WolfError, match=r"authentication failed.*password"):
        ssh.SSHTarget(login(router, key=None, password="wrong"))


def test_reboot_waits_for_the_router(router: FakeRouter) -> None:
    t = ssh.SSHTarget(login(router))
    try:
        # the stand-in `reboot` (first on the fake router's PATH) makes the fixture kill sshd
        # and its sessions, then start it again
        assert t.run("command -v reboot").output.strip() == str(STANDINS / "reboot")
        connected = t.started_at
        t.reboot(timeout=30)
        assert t.run("echo back").output == "back\n"
        assert t.started_at > connected
        assert any("request" in e for e in router.events) and "back" in router.events
    finally:
        t.close()


def test_cli_login_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(WolfError, match="--key or --password, not both"):
        login_from_cli("192.0.2.1", key="k", password=True)
    with pytest.raises(WolfError, match="key file not found"):
        login_from_cli("192.0.2.1", key=str(tmp_path / "nope"))
    monkeypatch.setenv("OPENWRT_WOLF_ROUTER_PASSWORD", "s3cret")
    got = login_from_cli("192.0.2.1", port="2222", password=True)  # type: ignore[arg-type]
    assert (got.password, got.port, got.host_entry) == ("s3cret", 2222, "[192.0.2.1]:2222")


def test_dropbear_target(router_dropbear: FakeRouter, tmp_path: Path) -> None:
    """OpenWrt's own SSH server: no SFTP, so the copy falls back to the scp protocol."""
    r = router_dropbear
    r.reset()
    r.trust_hostkey()
    src = tmp_path / "img.bin"
    src.write_bytes(os.urandom(500_000))
    t = ssh.SSHTarget(login(r))
    try:
        assert t.run("echo $FAKEROOT; exit 7") == CommandResult(
            "echo $FAKEROOT; exit 7", 7, f"{r.root}\n"
        )
        t.put(src, str(r.root / "tmp" / "img.bin"))
        assert t.copy_method == "scp"
    finally:
        t.close()
    assert (r.root / "tmp" / "img.bin").read_bytes() == src.read_bytes()
    # a new or wiped OpenWrt: root without a password, no keys (dropbear logs how it let us in)
    ssh.SSHTarget(login(r, key=None, password="")).close()
    assert "Auth succeeded with blank password for 'root'" in (r.base / "sshd.log").read_text()


def test_empty_password_refused_by_openssh(router: FakeRouter) -> None:
    with pytest.raises(WolfError, match=r"authentication failed .* empty password"):
        ssh.SSHTarget(login(router, key=None, password=""))


def test_forget_host_handles_hashed_known_hosts(router: FakeRouter, tmp_path: Path) -> None:
    """known_hosts hashed by ssh-keygen -H (the oracle): only our router's line goes."""
    kind, b64 = router.host_pub()
    kh = router.known_hosts
    kh.write_text(f"[{router.host}]:{router.port} {kind} {b64}\nother.example {kind} {b64}\n")
    subprocess.run(["ssh-keygen", "-H", "-f", str(kh)], check=True, capture_output=True)
    assert kh.read_text().count("|1|") == 2
    ssh.SSHTarget(login(router)).close()  # paramiko matches the hashed entry
    hostkeys.forget_host(kh, f"[{router.host}]:{router.port}")
    out = subprocess.run(
        ["ssh-keygen", "-F", "other.example", "-f", str(kh)], capture_output=True, text=True
    )
    assert out.returncode == 0 and len(kh.read_text().splitlines()) == 1
    with pytest.raises(WolfError, match="is not in"):
        ssh.SSHTarget(login(router))


def test_wait_down_and_up_say_what_was_seen(router: FakeRouter) -> None:
    with pytest.raises(WolfError, match=r"still answered SSH .*last seen: SSH answering \(SSH-2"):
        wait_down(login(router), timeout=0.3, interval=0.1)
    assert wait_up(login(router), timeout=5, interval=0.1).startswith("SSH-2.0-OpenSSH")


def test_close_after_a_signal_inside_open_session(
    router: FakeRouter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SIGTERM that lands as paramiko registers a new channel (seen on a loaded CI machine)
    leaves the channel without its transport; closing the target must still close the socket
    instead of raising (the flash task's cleanup ended in a traceback, exit 1, not 143)."""
    import paramiko

    t = ssh.SSHTarget(login(router))
    sock = t.client.get_transport().sock  # type: ignore[union-attr]

    def interrupted(self: paramiko.Channel, transport: paramiko.Transport) -> None:
        raise KeyboardInterrupt  # where signals._handler raised it

    monkeypatch.setattr(paramiko.Channel, "_set_transport", interrupted)
    # the traceback keeps the half-made channel alive (paramiko's map holds it weakly), as
    # the flash task's `finally` did while its KeyboardInterrupt was being handled
    with pytest.raises(KeyboardInterrupt) as caught:
        t.run("true")
    monkeypatch.undo()
    t.close()
    assert caught.traceback  # still held up to here
    assert sock.fileno() == -1  # the OS socket is closed

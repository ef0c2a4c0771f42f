"""Flashing when things go wrong: no image left in the router's /tmp (its RAM) after a dropped
connection or SIGTERM, no new host key or blank password taken unless asked, known_hosts
files that are garbage or symlinks. Oracles: the fake router's own /tmp and sshd log,
ssh-keygen's fingerprint of its host key, the files on disk."""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
from pathlib import Path

import paramiko
import pytest

from openwrt_wolf.errors import WolfError
from openwrt_wolf.targets.router import hostkeys
from openwrt_wolf.targets.router.connect import open_client
from openwrt_wolf.targets.router.login import Login
from tests import sshd_router
from tests.sshd_router import WOLFSSL_PACKAGES, FakeRouter, make_image
from tests.targets.test_router_flash import do_flash, tmp_files

router_sftp = sshd_router.router_sftp
router_dropbear = sshd_router.router_dropbear
router = sshd_router.router
PROJECT = Path(__file__).resolve().parent.parent.parent


@pytest.fixture(params=["openssh", "dropbear"])
def any_router(request: pytest.FixtureRequest) -> FakeRouter:
    name = "router_sftp" if request.param == "openssh" else "router_dropbear"
    r: FakeRouter = request.getfixturevalue(name)
    r.reset()
    r.trust_hostkey()
    return r


def keygen_fingerprint(pub: str) -> str:
    """OpenSSH's own fingerprint of a public key line (ssh-keygen -l)."""
    out = subprocess.run(["ssh-keygen", "-l", "-E", "sha256", "-f", "-"], input=pub,
                         capture_output=True, text=True, check=True, timeout=30).stdout  # fmt: skip
    return out.split()[1]


def test_new_key_after_wipe_is_not_trusted_unless_asked(
    any_router: FakeRouter, tmp_path: Path
) -> None:
    r = any_router
    before = r.known_hosts.read_text()
    img = make_image(tmp_path / "wolf-sysupgrade.bin", packages=WOLFSSL_PACKAGES)
    with pytest.raises(WolfError) as e:
        do_flash(r, img, flavour="wolfssl", trust=False)
    msg = str(e.value)
    kind, b64 = r.host_pub()
    assert msg.startswith("reconnect: ") and "new host key after the settings were wiped" in msg
    assert keygen_fingerprint(f"{kind} {b64}\n") in msg
    assert f"ssh-keygen -f {r.known_hosts} -R" in msg and "--trust-new-key-after-wipe" in msg
    assert r.known_hosts.read_text() == before  # nothing written
    log = (r.base / "sshd.log").read_text()
    assert "blank password" not in log  # no empty password was ever tried


def test_dropped_connection_removes_the_copy(router: FakeRouter, tmp_path: Path) -> None:
    router.set_state(faults=["drop-at-test"])  # sshd restarts, the router stays up
    img = make_image(tmp_path / "dropped.bin")
    with pytest.raises(WolfError, match="dropped before sysupgrade"):
        do_flash(router, img)
    assert img.name not in tmp_files(router)
    assert "flashed" not in router.state()


def test_sigterm_between_copy_and_flash_removes_the_copy(
    router_dropbear: FakeRouter, tmp_path: Path
) -> None:
    """The CLI with the router's real paths: dropbear's namespace has the fake /etc; its
    /tmp is this machine's."""
    router = router_dropbear
    router.reset()
    router.trust_hostkey()
    router.set_state(faults=["slow-test"])
    img = make_image(tmp_path / f"term-{os.getpid()}.bin")
    p = subprocess.Popen(
        [sys.executable, "-m", "invoke", "flash", "--device", "tl-wr902ac", "--host",
         router.host, "--port", str(router.port), "--key", str(router.userkey),
         "--known-hosts", str(router.known_hosts), "--image", str(img)],
        cwd=PROJECT, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "OPENWRT_WOLF_STORE": str(tmp_path / "s")},
    )  # fmt: skip
    assert p.stderr is not None
    seen = []
    for line in p.stderr:
        seen.append(line)
        if line.strip() == "test-image":  # copied and checked; sysupgrade -T is running
            break
    p.send_signal(signal.SIGTERM)
    _out, rest = p.communicate(timeout=120)
    err = "".join(seen) + rest
    assert p.returncode == 143 and "error: interrupted by SIGTERM" in err, err
    assert "Traceback" not in err
    assert f"removed /tmp/{img.name} from the router" in err
    assert not (Path("/tmp") / img.name).exists(), err
    assert "flashed" not in router.state()


def test_garbage_known_hosts_is_one_line(tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_bytes(os.urandom(4096) + b"\xff\xfe")
    p = subprocess.run(
        [sys.executable, "-m", "invoke", "flash", "--device", "tl-wr902ac", "--host",
         "127.0.0.1", "--port", "9", "--known-hosts", str(kh), "--image", str(kh)],
        cwd=PROJECT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert len(errors) == 1, p.stderr


def test_garbage_known_hosts_when_connecting(tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_bytes(b"\x00\xff" * 100)
    login = Login("127.0.0.1", port=9, known_hosts=kh)
    with pytest.raises(WolfError, match="is not a known_hosts file"):
        open_client(login)


def test_known_hosts_symlink_is_written_through(tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "known_hosts"
    real.parent.mkdir()
    real.write_text("# mine\n")
    real.chmod(0o600)
    link = tmp_path / "known_hosts"
    link.symlink_to(real)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "k")],
                   check=True, timeout=30)  # fmt: skip
    kind, b64 = (tmp_path / "k.pub").read_text().split()[:2]
    key = paramiko.PKey.from_type_string(kind, base64.b64decode(b64))
    hostkeys.remember_host(link, "[127.0.0.1]:2222", key)
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text() == f"# mine\n[127.0.0.1]:2222 {kind} {b64}\n"
    assert (real.stat().st_mode & 0o777) == 0o600  # its own mode kept
    # ssh itself reads the entry back (independent parser)
    found = subprocess.run(["ssh-keygen", "-F", "[127.0.0.1]:2222", "-f", str(link)],
                           capture_output=True, text=True, timeout=30)  # fmt: skip
    assert found.returncode == 0 and b64 in found.stdout

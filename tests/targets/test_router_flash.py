"""`invoke flash` end to end against the fake router (tests/sshd_router.py): a real sshd on
127.0.0.1 with stand-ins for sysupgrade, ubus, apk/opkg that follow OpenWrt's interfaces.
Oracles are the fake router's own files: what the sysupgrade stand-in recorded, its /tmp,
its host key, its release file."""

from __future__ import annotations

import hashlib
import io
import json
import os
import socket
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from openwrt_wolf.catalogue import devices
from openwrt_wolf.errors import WolfError
from openwrt_wolf.results.flash import FlashResult
from openwrt_wolf.results.store import FileStore, Record
from openwrt_wolf.targets.router import sysupgrade as images
from openwrt_wolf.targets.router.flash import (
    ORDER,
    Flasher,
    FlashRequest,
    State,
    Timeouts,
    store_result,
)
from openwrt_wolf.targets.router.login import Login
from tests import sshd_router
from tests.sshd_router import BASE_STATE, WOLFSSL_PACKAGES, FakeRouter, make_image

router_sftp = sshd_router.router_sftp
router_scp = sshd_router.router_scp
router_dropbear = sshd_router.router_dropbear
router = sshd_router.router

FAST = Timeouts(
    connect=5, command=20, copy=60, test_image=20, upgrade=20, wait_down=10, wait_up=20, poll=0.2
)
PROJECT = Path(__file__).resolve().parents[2]


def do_flash(
    r: FakeRouter,
    img: Path,
    *,
    flavour: str | None = None,
    keep: bool = False,
    timeouts: Timeouts = FAST,
    trust: bool = True,
    **login: Any,
) -> tuple[FlashResult, str]:
    dev = devices.resolve("tl-wr902ac")
    fi = images.inspect(img, dev, flavour=flavour)
    args: dict[str, Any] = dict(host=r.host, port=r.port, user=r.user, key=r.userkey)
    args |= dict(known_hosts=r.known_hosts) | login
    req = FlashRequest(Login(**args), dev, fi, flavour, keep, timeouts, sysroot=str(r.root),
                       trust_new_key_after_wipe=trust)  # fmt: skip
    out = io.StringIO()
    return Flasher(req, console=Console(file=out, width=200)).run(), out.getvalue()


def fakefw_release(r: FakeRouter) -> str:
    text = (r.root / "etc" / "openwrt_release").read_text()
    return next(ln.split("=")[1].strip("'") for ln in text.splitlines() if "RELEASE" in ln)


def tmp_files(r: FakeRouter) -> list[str]:
    return sorted(p.name for p in (r.root / "tmp").iterdir())


@pytest.fixture(params=["openssh", "dropbear"])
def any_router(request: pytest.FixtureRequest) -> FakeRouter:
    """The OpenSSH router with SFTP, and dropbear (OpenWrt's own server, no SFTP)."""
    name = "router_sftp" if request.param == "openssh" else "router_dropbear"
    r: FakeRouter = request.getfixturevalue(name)
    r.reset()
    r.trust_hostkey()
    return r


def test_flash_wolfssl_wipes_settings(any_router: FakeRouter, tmp_path: Path) -> None:
    router = any_router
    old_key = router.host_pub()
    img = make_image(tmp_path / "wolf-sysupgrade.bin", packages=WOLFSSL_PACKAGES)
    res, out = do_flash(router, img, flavour="wolfssl")
    st = router.state()
    remote = f"{router.root}/tmp/wolf-sysupgrade.bin"
    assert st["last_sysupgrade"] == ["-n", "-v", remote]  # what really ran on the "router"
    assert st["flashed"] == 1
    assert [s.state for s in res.states] == [str(s) for s in ORDER if s is not State.DONE]
    want_copy = "sftp" if router.sftp else "scp"
    assert res.ok and res.copy_method == want_copy and res.board_name == "tplink,tl-wr902ac-v1"
    assert res.before["DISTRIB_RELEASE"] == "24.10.8"
    assert "upgrade: Commencing upgrade. Closing all shell sessions." in res.sysupgrade_output
    assert "$ ubus call system board" in res.session_log  # first session, kept across reboot
    assert "$ apk list --installed" in res.session_log  # second session
    table = out.split(f"flash tplink_tl-wr902ac-v1 at [{router.host}]:{router.port}")[1]
    assert [ln.split()[1] for ln in table.splitlines() if ln.startswith("│ wait-up")]
    assert res.after["DISTRIB_RELEASE"] == "25.12.5"
    assert "libwolfssl5.9.1.e624513f" in res.tls_packages and res.package_manager == "apk"
    # sysupgrade -n loses dropbear's keys: the new one replaced the old, with a warning
    kind, b64 = new_key = router.host_pub()
    assert new_key != old_key and res.host_key_changed
    assert router.known_hosts.read_text() == f"[{router.host}]:{router.port} {kind} {b64}\n"
    assert "new host key after the settings were wiped" in out
    if router.server == "dropbear":  # the wipe took authorized_keys too: blank root login
        assert "key refused after the wipe" in out
        assert "Auth succeeded with blank password" in (router.base / "sshd.log").read_text()
    assert any(e.startswith("request") for e in router.events) and "back" in router.events
    rec = store_result(FileStore(tmp_path / "results"), devices.resolve("tl-wr902ac"), res)
    stored = json.loads(rec.read_text())
    assert (stored["kind"], stored["flavour"]) == ("flash", "wolfssl")
    assert stored["data"]["after"]["DISTRIB_RELEASE"] == fakefw_release(router)


def test_flash_keep_settings_over_scp_with_opkg(router_scp: FakeRouter, tmp_path: Path) -> None:
    r = router_scp
    r.reset(pkg_manager="opkg")
    r.trust_hostkey()
    before = r.known_hosts.read_text()
    pkgs = {"libustream-mbedtls20201210": "2024.07.28~99bd3d2b-r1", "libmbedtls21": "3.6.6-r1"}
    img = make_image(
        tmp_path / "old.bin", version="24.10.8", revision="r28900-0b795ce79e",
        packages=pkgs, pkg_manager="opkg",
    )  # fmt: skip
    res, _ = do_flash(r, img, flavour="mbedtls", keep=True)
    assert r.state()["last_sysupgrade"] == ["-v", f"{r.root}/tmp/old.bin"]
    assert res.copy_method == "scp" and res.package_manager == "opkg"
    assert res.after["DISTRIB_REVISION"] == "r28900-0b795ce79e"
    assert not res.host_key_changed and r.known_hosts.read_text() == before


def test_wrong_device_refused_before_copy(router: FakeRouter, tmp_path: Path) -> None:
    router.set_state(board_name="glinet,gl-ar300m16", model="GL.iNet GL-AR300M16")
    img = make_image(tmp_path / "a.bin")
    with pytest.raises(WolfError, match=r"^identify: the router is a glinet,gl-ar300m16") as e:
        do_flash(router, img)
    assert "refusing before copying" in str(e.value) and "\n" not in str(e.value)
    assert tmp_files(router) == [] and "flashed" not in router.state()


def test_not_enough_space(router: FakeRouter, tmp_path: Path) -> None:
    router.set_state(tmp_avail_kb=200)
    img = make_image(tmp_path / "a.bin", size=400_000)
    with pytest.raises(WolfError, match=r"^check-space: not enough space in /tmp.*200 KiB free"):
        do_flash(router, img)
    assert tmp_files(router) == []


def test_checksum_mismatch_after_copy(router: FakeRouter, tmp_path: Path) -> None:
    router.set_state(faults=["corrupt-after-copy"])
    img = make_image(tmp_path / "a.bin")
    with pytest.raises(WolfError, match=r"^verify-checksum: checksum mismatch after copy"):
        do_flash(router, img)
    assert tmp_files(router) == [] and "flashed" not in router.state()


def test_sysupgrade_test_rejects_image_without_metadata(router: FakeRouter, tmp_path: Path) -> None:
    """ath79 sets REQUIRE_IMAGE_METADATA=1: an image without fwtool metadata fails -T. Our own
    board check passes first, from profiles.json beside the image."""
    img = make_image(tmp_path / "plain-sysupgrade.bin", metadata=False)
    profiles = {
        "version_number": "25.12.5", "version_code": "r32071-f0a60eee2f",
        "target": "ath79/generic",
        "profiles": {"tplink_tl-wr902ac-v1": {
            "supported_devices": ["tplink,tl-wr902ac-v1", "tl-wr902ac-v1"],
            "images": [{"type": "sysupgrade", "name": img.name}],
        }},
    }  # fmt: skip
    (tmp_path / "profiles.json").write_text(json.dumps(profiles))
    with pytest.raises(WolfError, match=r"^test-image: `sysupgrade -T` rejected") as e:
        do_flash(router, img)
    msg = str(e.value)
    assert "Image metadata not present" in msg and "Image check failed." in msg
    assert "nothing was flashed" in msg and "\n" not in msg
    assert images.inspect(img, devices.resolve("tl-wr902ac")).devices_from == "profiles.json"
    assert tmp_files(router) == [] and "flashed" not in router.state()


def test_sysupgrade_test_rejects_incompatible_image(router: FakeRouter, tmp_path: Path) -> None:
    img = make_image(tmp_path / "a.bin", compat="2.0")
    with pytest.raises(WolfError, match=r"incompatible for sysupgrade.*\(1\.0->2\.0\)"):
        do_flash(router, img)
    assert "flashed" not in router.state()


def test_connection_drops_before_sysupgrade(router: FakeRouter, tmp_path: Path) -> None:
    router.set_state(faults=["drop-at-test"])
    img = make_image(tmp_path / "a.bin")
    with pytest.raises(WolfError, match=r"^test-image: connection .* dropped before sysupgrade"):
        do_flash(router, img)
    assert "flashed" not in router.state()


def test_router_not_back_in_time(router: FakeRouter, tmp_path: Path) -> None:
    router.set_state(faults=["no-return"])
    img = make_image(tmp_path / "a.bin")
    slow = Timeouts(**{**FAST.__dict__, "wait_up": 2.0})
    with pytest.raises(WolfError, match=r"^wait-up: .* did not come back within 2 s") as e:
        do_flash(router, img, timeouts=slow)
    assert "last seen: connection refused" in str(e.value)
    assert router.state()["flashed"] == 1


def test_flavour_mismatch_after_flash(router: FakeRouter, tmp_path: Path) -> None:
    img = make_image(tmp_path / "a.bin", packages=BASE_STATE["packages"])
    with pytest.raises(WolfError, match=r"^verify: .*do not match wolfssl") as e:
        do_flash(router, img, flavour="wolfssl")
    assert "still installed: libustream-mbedtls (" in str(e.value)


def test_host_key_mismatch_and_auth_failure(router: FakeRouter, tmp_path: Path) -> None:
    img = make_image(tmp_path / "a.bin")
    router._keygen(tmp_path / "other")
    kind, b64 = (tmp_path / "other.pub").read_text().split()[:2]
    router.known_hosts.write_text(f"[{router.host}]:{router.port} {kind} {b64}\n")
    with pytest.raises(WolfError, match=r"^connect: host key of .* changed"):
        do_flash(router, img)
    router.trust_hostkey()
    with pytest.raises(WolfError, match=r"^connect: authentication failed"):
        do_flash(router, img, key=tmp_path / "other")
    assert "flashed" not in router.state()


def _build_record(store: FileStore, img: Path, flavour: str) -> None:
    art = {
        "type": "sysupgrade",
        "path": str(img),
        "sha256": hashlib.sha256(img.read_bytes()).hexdigest(),
    }
    data = {"artifacts": [art | {"size": img.stat().st_size}]}
    store.put(Record("build", f"b-{flavour}", "25.12.5", "tplink_tl-wr902ac-v1", flavour, data))


def test_patch_set_router_without_apk_wolfssl_is_refused(
    router_sftp: FakeRouter, tmp_path: Path
) -> None:
    """A wolfSSL router flashed with the patch set's image must run apk-wolfssl (patch 0004):
    the fake router's packages are a stock image's (no apk-wolfssl), so the check says so;
    checked as stock, the same router passes."""
    r = router_sftp
    r.reset()
    r.trust_hostkey()
    img = make_image(tmp_path / "wolf-sysupgrade.bin", packages=WOLFSSL_PACKAGES)
    dev = devices.resolve("tl-wr902ac")
    fi = replace(images.inspect(img, dev, flavour="wolfssl"), variant="patch-set")
    req = FlashRequest(Login(host=r.host, port=r.port, user=r.user, key=r.userkey,
                             known_hosts=r.known_hosts), dev, fi, "wolfssl", False, FAST,
                       sysroot=str(r.root), trust_new_key_after_wipe=True)  # fmt: skip
    with pytest.raises(WolfError, match=r"do not match wolfssl \(patch-set\): missing apk-wolfssl"):
        Flasher(req, console=Console(file=io.StringIO(), width=200)).run()
    r.reset()
    r.trust_hostkey()
    res, _ = do_flash(r, img, flavour="wolfssl")  # variant unknown: OpenWrt's own rules
    assert res.ok


def test_image_from_build_record(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "results")
    dev = devices.resolve("tl-wr902ac")
    with pytest.raises(WolfError, match=r"no build of tplink_tl-wr902ac-v1 25\.12\.5 with wolfssl"):
        images.from_store(store, store.root, dev, "wolfssl")
    img = make_image(tmp_path / "w.bin")
    _build_record(store, img, "wolfssl")
    got = images.from_store(store, store.root, dev, "wolfssl")
    assert got.path == img and got.flavour == "wolfssl"
    assert images.from_build(store, replace(got, flavour=None)).flavour == "wolfssl"
    assert got.variant == "stock"  # a record without a request: what its backend implies
    img.write_bytes(img.read_bytes() + b"x")
    with pytest.raises(WolfError, match="changed since build record"):
        images.from_store(store, store.root, dev, "wolfssl")


def test_image_for_another_device(tmp_path: Path) -> None:
    img = make_image(tmp_path / "g.bin", supported=["glinet,gl-ar300m16", "gl-ar300m"])
    with pytest.raises(WolfError, match=r"is for glinet,gl-ar300m16, gl-ar300m .*not for --device"):
        images.inspect(img, devices.resolve("tl-wr902ac"))


def test_cli_error_is_one_line(tmp_path: Path) -> None:
    """The task through invoke: a refused connection is one `error:` line and exit 2."""
    img = make_image(tmp_path / "a.bin")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        env = os.environ | {"OPENWRT_WOLF_STORE": str(tmp_path / "results")}
        p = subprocess.run(
            [sys.executable, "-m", "invoke", "flash", "--device", "tl-wr902ac",
             "--host", "127.0.0.1", "--port", str(port), "--image", str(img),
             "--known-hosts", str(tmp_path / "kh")],
            cwd=PROJECT, env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert p.returncode == 2, p.stderr
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and p.stderr.splitlines()[-1] == errors[0]  # the last line
    assert errors[0].startswith(f"error: connect: connection refused by 127.0.0.1:{port}")
    assert "Traceback" not in p.stderr


def test_cli_flash_from_build_record_on_dropbear(
    router_dropbear: FakeRouter, tmp_path: Path
) -> None:
    """`invoke flash --flavour` end to end, with the router's real paths (/etc/openwrt_release
    inside dropbear's namespace, the image in /tmp): newest build record → flashed → record."""
    r = router_dropbear
    r.reset()
    r.trust_hostkey()
    store = FileStore(tmp_path / "results")
    img = make_image(tmp_path / f"wolf-{os.getpid()}-{tmp_path.name}-sysupgrade.bin",
                     packages=WOLFSSL_PACKAGES)  # fmt: skip
    _build_record(store, img, "wolfssl")
    p = subprocess.run(
        [sys.executable, "-m", "invoke", "flash", "--device", "tl-wr902ac", "--host", r.host,
         "--port", str(r.port), "--key", str(r.userkey), "--known-hosts", str(r.known_hosts),
         "--flavour", "wolfssl", "--stock", "--store", str(store.root), "--wait-up", "60",
         "--trust-new-key-after-wipe"],
        cwd=PROJECT, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    # what really ran on the router, and the image it took from its /tmp
    assert r.state()["last_sysupgrade"] == ["-n", "-v", f"/tmp/{img.name}"]
    assert not (Path("/tmp") / img.name).exists()
    records = list((store.root / "flash").glob("*.json"))
    assert len(records) == 1
    data = json.loads(records[0].read_text())["data"]
    assert data["ok"] and data["copy_method"] == "scp" and data["host_key_changed"]
    assert data["after"]["DISTRIB_RELEASE"] == fakefw_release(r) == "25.12.5"
    assert data["image_sha256"] == hashlib.sha256(img.read_bytes()).hexdigest()

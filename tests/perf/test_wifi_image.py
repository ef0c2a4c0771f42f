"""The tests in a real OpenWrt image (perf/wifi_image.py, perf/image_heap.py), the parts that
run without a VM: each wrong way of asking for them is one line before any boot, and the
package directory is served to the guest as apk fetches it (an HTTP client here, the standard
library's), and nothing else. The runs on the real malta/be images are checked by their
committed records (tests/report/test_real_runtime_records.py)."""

from __future__ import annotations

import os
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from openwrt_wolf.errors import WolfError
from openwrt_wolf.perf import wifi_image
from openwrt_wolf.targets.vm.machine import served

ROOT = Path(__file__).resolve().parents[2]


def _wolf(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(ROOT / "wolf"), "perf", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "COLUMNS": "200"})  # fmt: skip


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    """A kernel and a rootfs that exist (the options are refused before either is read), a
    package directory with an index and wpad-basic-wolfssl but no hostapd-utils/wpa-cli, a
    wpad build directory without the control programs, and one without any index."""
    (tmp_path / "kernel.elf").write_bytes(b"\x7fELF")
    (tmp_path / "rootfs.img").write_bytes(b"\0" * 512)
    base = tmp_path / "packages" / "base"
    base.mkdir(parents=True)
    (base / "packages.adb").write_bytes(b"ADB")
    (base / "wpad-basic-wolfssl-2025.08.26~ca266cc2-r1.apk").write_bytes(b"apk")
    (tmp_path / "empty").mkdir()
    (tmp_path / "toolchain" / "bin").mkdir(parents=True)  # what --toolchain is checked for
    (tmp_path / "toolchain" / "bin" / "mips-openwrt-linux-musl-gcc").write_text("")
    (tmp_path / "wpad" / "hostapd").mkdir(parents=True)
    (tmp_path / "wpad" / "hostapd" / "hostapd_cli").write_text("#!/bin/sh\n")  # not an ELF
    return {p.name: p for p in tmp_path.iterdir()}


def _args(files: dict[str, Path], **over: str | None) -> list[str]:
    opts: dict[str, str | None] = {
        "--target": "vm", "--test": "wifi", "--flavour": "wolfssl",
        "--image": str(files["kernel.elf"]), "--rootfs": str(files["rootfs.img"]),
        "--packages": str(files["packages"]), "--toolchain": str(files["toolchain"]),
        "--store": str(files["empty"]),
    }  # fmt: skip
    opts.update({f"--{k.replace('_', '-')}": v for k, v in over.items()})
    return [x for k, v in opts.items() if v is not None for x in (k, v)]


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"target": "qemu", "image": None}, "--rootfs, --packages: only with --target vm"),
        ({"test": "crypto,wifi"}, "a real image runs --test handshake, memory and wifi only"),
        ({"test": "memory"}, "--packages: only with --test wifi"),
        ({"test": "handshake,memory"}, "--packages: only with --test wifi"),
        ({"test": "handshake,soak", "packages": None}, "runs --test handshake, memory and wifi"),
        ({"test": "memory", "packages": None, "wpad_build": "WPAD"}, "--wpad-build: only with"),
        ({"test": "memory", "packages": None, "image": None}, "need --image"),
        ({"image": None}, "need --image"),
        ({"packages": None}, "need --packages"),
        ({"flavour": "all"}, "--rootfs is one flavour's image"),
        ({"toolchain": None}, "--toolchain"),
        ({"test": "memory", "packages": None, "toolchain": None}, "--toolchain"),
        ({"test": "memory", "packages": None, "rootfs": "/dev/zero"}, "--rootfs /dev/zero: not a"),
        ({"rootfs": "/nonexistent/rootfs.img"}, "--rootfs /nonexistent/rootfs.img: not a file"),
        ({"packages": "EMPTY"}, "no packages.adb there or in base/"),
        ({"flavour": "mbedtls"}, "no wpad-basic-mbedtls package"),
        ({}, "no hostapd-utils and wpa-cli packages"),
        ({"wpad_build": "WPAD"}, "no hostapd/hostapd_cli program"),
    ],
)
def test_each_wrong_request_is_one_line_before_any_boot(
    files: dict[str, Path], over: dict[str, str | None], message: str
) -> None:
    named = {"EMPTY": str(files["empty"]), "WPAD": str(files["wpad"])}
    r = _wolf(*_args(files, **{k: named.get(v, v) if v else v for k, v in over.items()}))
    assert r.returncode == 2, r.stderr
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and message in errors[0], r.stderr
    assert "Traceback" not in r.stderr and "qemu-system" not in r.stderr


def test_the_repository_is_the_index_and_its_packages_only(tmp_path: Path) -> None:
    """A symlink in the package directory (to a file outside it) is not served, nor another
    kind of file; the newest-named wpad of the flavour is the one installed."""
    (tmp_path / "packages.adb").write_bytes(b"ADB")
    (tmp_path / "wpad-basic-openssl-2025.08.26~ca266cc2-r1.apk").write_bytes(b"a")
    (tmp_path / "wpad-basic-openssl-full-1-r1.apk").write_bytes(b"other package")
    (tmp_path / "secret.apk").symlink_to("/etc/passwd")
    (tmp_path / "notes.txt").write_text("not a package")
    rp = wifi_image.repo(tmp_path, "openssl")
    assert rp.wpad.name == "wpad-basic-openssl-2025.08.26~ca266cc2-r1.apk"
    assert set(rp.files) == {"packages.adb", "wpad-basic-openssl-2025.08.26~ca266cc2-r1.apk",
                             "wpad-basic-openssl-full-1-r1.apk"}  # fmt: skip
    assert rp.cli == ()
    with pytest.raises(WolfError, match="no wpad-basic-wolfssl package"):
        wifi_image.repo(tmp_path, "wolfssl")


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, b""


def test_the_guest_gets_each_file_at_its_token_and_nothing_else(tmp_path: Path) -> None:
    index = tmp_path / "packages.adb"
    index.write_bytes(b"index bytes")
    gone = tmp_path / "gone.apk"
    gone.write_bytes(b"x")
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.write_bytes(b"not for the guest")
    fifo = tmp_path / "fifo.apk"
    os.mkfifo(fifo)  # no writer: opening it must not wait
    link = tmp_path / "link.apk"
    link.symlink_to(outside)
    files = {"packages.adb": index, "gone.apk": gone, "mem": b"in memory", "fifo.apk": fifo,
             "link.apk": link, "dir": tmp_path}  # fmt: skip
    with served(files, "t0k") as port:
        gone.unlink()  # removed while served: a 404, not a traceback in the server thread
        base = f"http://127.0.0.1:{port}"
        assert _get(f"{base}/t0k/packages.adb") == (200, b"index bytes")
        assert _get(f"{base}/t0k/mem") == (200, b"in memory")
        for path in ("/t0k/gone.apk", "/t0k/fifo.apk", "/t0k/link.apk", "/t0k/dir",
                     "/other/packages.adb", "/packages.adb", "/t0k/",
                     f"/t0k/../{outside.name}", f"/t0k/%2e%2e/{outside.name}", "/t0k"):  # fmt: skip
            assert _get(base + path)[0] == 404, path

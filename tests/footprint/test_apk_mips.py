"""apk-wolfssl cross-built for mips_24kc as the footprint lab's `apk` component (OpenWrt's target
options: minimal applets, LTO, static libapk) against the USE_WOLFSSL minimal wolfSSL. Oracles:
readelf/nm of the cross binutils, the xz tool, and the MIPS binary itself under qemu-user
verifying a package and an index that the host's apk-openssl signed."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from openwrt_wolf.footprint import apk, lab, report, spec
from openwrt_wolf.results.footprint import Footprint
from tests.conftest import need_tools, upstream_source

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2700)]  # cold: library builds

CROSS = ("mips-linux-gnu-gcc", "mips-linux-gnu-readelf", "mips-linux-gnu-nm", "qemu-mips-static")
TOOLS = (
    *CROSS,
    "meson",
    "ninja",
    "pkg-config",
    "patch",
    "lua5.1",
    "openssl",
    "autoreconf",
    "libtoolize",
    "make",
    "xz",
    "mksquashfs",
    "cmake",
    "perl",
)


def _run(
    *argv: str | Path, check: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in argv], check=check, capture_output=True, text=True, timeout=600, env=env
    )


@pytest.fixture(scope="module")
def wolf(tmp_path_factory: pytest.TempPathFactory) -> Footprint:
    need_tools(*TOOLS)
    upstream_source(str(apk.data()["apk"]["upstream"]))  # apk-tools, through the fetcher
    req = lab.Request(
        libraries=("wolfssl",),
        configs=("minimal",),
        components=("apk",),
        versions=(("wolfssl", "5.9.2"),),
        store=str(tmp_path_factory.mktemp("apk-store")),
    )
    outcome = lab.run(req)
    if outcome.errors:
        raise outcome.errors[0]
    (fp,) = outcome.footprints
    return fp


def _binary(fp: Footprint) -> Path:
    (c,) = [c for c in fp.components if c.name == "apk"]
    return apk.root() / c.cache_key / "apk"


def test_component_sizes_match_the_tools(wolf: Footprint) -> None:
    (c,) = wolf.components
    assert c.package == "apk-wolfssl" and c.installed_path == "usr/bin/apk"
    installed = apk.root() / c.cache_key / "measure" / "installed" / "apk"
    stripped = apk.root() / c.cache_key / "measure" / "stripped" / "apk"
    (f,) = c.files
    assert f.installed == installed.stat().st_size
    assert f.stripped == stripped.stat().st_size
    xz = subprocess.run(["xz", "-9e", "-c", str(installed)], check=True, capture_output=True)
    assert f.xz == len(xz.stdout)
    rows = report.stack_rows([wolf])
    assert rows[1][3] == "apk-wolfssl" and rows[-1][3] == "total"
    assert rows[-1][6] == f"{wolf.xz + c.xz:,}"


def test_cross_binary_is_mips_and_imports_only_exported_wolfcrypt(wolf: Footprint) -> None:
    binary = _binary(wolf)
    header = _run("mips-linux-gnu-readelf", "-h", binary).stdout
    assert "MIPS" in header and "big endian" in header
    wanted = {
        ln.split()[-1]
        for ln in _run("mips-linux-gnu-nm", "-D", "--undefined-only", binary).stdout.splitlines()
    }
    wolf_syms = {n for n in wanted if n.startswith(("wc_", "wolf"))}
    assert "wc_ecc_verify_hash" in wolf_syms
    assert all(n.startswith(("wc_", "wolfCrypt_")) for n in wolf_syms), wolf_syms
    lib = lab.build_root() / wolf.cache_key / "lib" / wolf.files[0].name
    exported = {
        ln.split()[-1]
        for ln in _run("mips-linux-gnu-nm", "-D", "--defined-only", lib).stdout.splitlines()
    }
    assert wolf_syms <= exported, wolf_syms - exported


def test_mips_apk_verifies_what_host_openssl_apk_signed(wolf: Footprint, tmp_path: Path) -> None:
    host = apk.native_build("openssl").binary
    _run(
        "openssl",
        "ecparam",
        "-name",
        "prime256v1",
        "-genkey",
        "-noout",
        "-out",
        tmp_path / "key.pem",
    )
    (tmp_path / "keys").mkdir()
    _run(
        "openssl",
        "pkey",
        "-in",
        tmp_path / "key.pem",
        "-pubout",
        "-out",
        tmp_path / "keys" / "key.pem.pub",
    )
    (tmp_path / "root" / "etc").mkdir(parents=True)
    (tmp_path / "root" / "etc" / "hello").write_text("hi\n")
    pkg = tmp_path / "hello.apk"
    _run(
        host,
        "mkpkg",
        "--sign-key",
        tmp_path / "key.pem",
        "--info",
        "name:hello",
        "--info",
        "version:1-r1",
        "--info",
        "arch:noarch",
        "--files",
        tmp_path / "root",
        "--output",
        pkg,
    )
    idx = tmp_path / "packages.adb"
    _run(
        host,
        "mkndx",
        "--sign-key",
        tmp_path / "key.pem",
        "--output",
        idx,
        "--keys-dir",
        tmp_path / "keys",
        pkg,
    )
    arch = spec.get_arch("mips_24kc")
    libdirs = f"{lab.build_root() / wolf.cache_key / 'lib'}:{apk.zlib_dir(wolf)}"
    qemu = ["qemu-mips-static", "-L", arch.sysroot, "-E", f"LD_LIBRARY_PATH={libdirs}"]
    for f in (pkg, idx):
        res = _run(
            *qemu, _binary(wolf), "verify", "-v", "--keys-dir", tmp_path / "keys", f, check=False
        )
        assert res.returncode == 0 and f"{f.name}: OK" in res.stdout + res.stderr, res
    other = tmp_path / "other"
    other.mkdir()
    _run(
        "openssl",
        "ecparam",
        "-name",
        "prime256v1",
        "-genkey",
        "-noout",
        "-out",
        tmp_path / "other.pem",
    )
    _run(
        "openssl", "pkey", "-in", tmp_path / "other.pem", "-pubout", "-out", other / "other.pem.pub"
    )
    res = _run(*qemu, _binary(wolf), "verify", "-v", "--keys-dir", other, pkg, check=False)
    assert res.returncode != 0 and "UNTRUSTED signature" in res.stdout + res.stderr

"""`build --release 24.10.8` against the stand-in ImageBuilder of OpenWrt 24.10.8 (opkg).

The stand-in is made from the v24.10.8 tree: its packages are .ipk files made by the tree's
scripts/ipkg-build, indexed by its scripts/ipkg-make-index.sh; the images are made by the
tree's own IMAGE/* recipes (target/linux/ath79/image/*.mk, include/image-commands.mk) with
OpenWrt's host tools; profiles.json entries by the tree's scripts/json_add_image_info.py.
Oracles: those tools' outputs, tar/gzip, hashlib, OpenWrt's unsquashfs4 listing, the
`define Package/<name>` blocks of the tree's package Makefiles; never the driver's own numbers."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from openwrt_wolf.build import imagebuilder, packages
from openwrt_wolf.build.driver import build
from openwrt_wolf.build.jobs import Options, Outcome
from openwrt_wolf.catalogue import devices
from openwrt_wolf.errors import WolfError
from openwrt_wolf.host import upstream
from openwrt_wolf.host.openwrt_tools import OpenWrtTools
from tests.build.test_build import cli, error_line
from tests.conftest import need_tools
from tests.standin.server import serve

RELEASE = "24.10.8"
TOOLS = ("make", "zstd", "gcc", "unsquashfs")
V1, AR300 = "tplink_tl-wr902ac-v1", "glinet_gl-ar300m16"
FLAVOURS = ("mbedtls", "wolfssl", "openssl")
# what each flavour's TLS library looks like in a rootfs (the library packages' files)
LIBS = {
    "mbedtls": re.compile(r"/libmbed(tls|x509|crypto)\.so"),
    "wolfssl": re.compile(r"/libwolfssl\.so"),
    "openssl": re.compile(r"/lib(crypto|ssl)\.so"),
}


@pytest.fixture(scope="session")
def mirror_2410(standin_mirror_2410: Path) -> Path:
    """The run's 24.10.8 stand-in mirror (tests/conftest.py); builds download from it."""
    need_tools(*TOOLS)
    return standin_mirror_2410


def _ib_tree(mirror: Path) -> Path:
    return mirror / ".trees" / f"openwrt-imagebuilder-{RELEASE}-ath79-generic.Linux-x86_64"


@contextlib.contextmanager
def _matrix(mirror: Path, base: Path) -> Iterator[dict[str, Outcome]]:
    with pytest.MonkeyPatch.context() as mp, serve(mirror) as (url, _srv):
        mp.setenv("OPENWRT_WOLF_CACHE", str(base / "cache"))
        mp.setenv("OPENWRT_WOLF_STORE", str(base / "store"))
        outs = build(
            Options(flavour="all", device=f"{V1},{AR300}", release=RELEASE, mirror=url, jobs=2)
        )
        yield {f"{o.record.device}/{o.record.flavour}": o for o in outs}


def _bin(o: Outcome) -> Path:
    return Path(o.record.log).parent / "bin"


def _piece(o: Outcome, kind: str) -> Path:
    return next(Path(a.path) for a in o.record.artifacts if a.type == kind)


def _unsquashfs4_files(tools: OpenWrtTools, image: Path) -> list[str]:
    out = subprocess.run(
        [str(tools.unsquashfs4), "-l", str(image)],
        capture_output=True, text=True, check=True, timeout=120,
    ).stdout  # fmt: skip
    return [ln.removeprefix("squashfs-root") for ln in out.splitlines()
            if ln.startswith("squashfs-root/")]  # fmt: skip


# --- the stand-in itself follows 24.10's formats ------------------------------------------


def check_ipk_and_index_are_opkgs(mirror: Path) -> None:
    """.ipk = gzip'd tar of debian-binary, data.tar.gz, control.tar.gz (the tree's
    ipkg-build); Packages holds each file's size and sha256 (its ipkg-make-index.sh)."""
    pkgdir = _ib_tree(mirror) / "packages"
    ipks = sorted(pkgdir.glob("*.ipk"))
    assert ipks and not list(pkgdir.glob("*.apk"))
    members = subprocess.run(
        ["tar", "-tzf", str(ipks[0])], capture_output=True, text=True, check=True
    ).stdout.split()
    assert members == ["./debian-binary", "./data.tar.gz", "./control.tar.gz"]
    stanzas = (pkgdir / "Packages").read_text().strip().split("\n\n")
    by_file = {re.search(r"^Filename: (\S+)$", s, re.M).group(1): s for s in stanzas}  # type: ignore[union-attr]
    # ipkg-make-index.sh leaves kernel and libc out (the ImageBuilder installs them by file)
    assert sorted(by_file) == sorted(
        p.name for p in ipks if not p.name.startswith(("kernel_", "libc_"))
    )
    for ipk in ipks:
        if ipk.name in by_file:
            s = by_file[ipk.name]
            assert f"SHA256sum: {hashlib.sha256(ipk.read_bytes()).hexdigest()}" in s
            assert f"Size: {ipk.stat().st_size}\n" in s
    libmbed = by_file[next(n for n in by_file if n.startswith("libmbedtls21_"))]
    # package-pack.mk: the ABI in the name, the plain name provided
    assert "Package: libmbedtls21\n" in libmbed and "Provides: libmbedtls\n" in libmbed
    assert not (pkgdir / "index.json").exists()


# --- the builds ------------------------------------------------------------------------------


def check_profiles_json_has_24_10s_shape(outs: dict[str, Outcome]) -> None:
    """profiles.json written from the tree's json_add_image_info.py: the image's sha256 per
    hashlib, and neither `size` nor `file_size_limits` (new in 25.12)."""
    for key, o in outs.items():
        if o.record.image_deleted:  # no image kept: json_overview_image_info.py writes none
            assert not (_bin(o) / "profiles.json").exists(), key
            continue
        pj = json.loads((_bin(o) / "profiles.json").read_text())
        prof = pj["profiles"][o.record.device]
        assert "file_size_limits" not in prof
        assert pj["version_number"] == RELEASE
        for img in prof["images"]:
            assert "size" not in img
            assert img["sha256"] == hashlib.sha256((_bin(o) / img["name"]).read_bytes()).hexdigest()
            assert img["name"].startswith(f"openwrt-{RELEASE}-ath79-generic-{o.record.device}-")


def check_rootfs_holds_the_flavours_tls_library_only(
    outs: dict[str, Outcome], tools: OpenWrtTools
) -> None:
    """OpenWrt's unsquashfs4 lists each root filesystem: the flavour's TLS library, none of
    the others (24.10's opkg needs no TLS library, so unlike 25.12 no libmbedtls stays)."""
    for key, o in outs.items():
        rootfs = _piece(o, "rootfs")
        files = _unsquashfs4_files(tools, rootfs)
        assert "/usr/lib/opkg/status" in files and not any("/lib/apk" in f for f in files), key
        for fl, pat in LIBS.items():
            has = any(pat.search(f) for f in files)
            assert has == (fl == o.record.flavour), (key, fl)
        assert "/lib/libustream-ssl.so" in files
        status = subprocess.run(
            [str(tools.unsquashfs4), "-cat", str(rootfs), "/usr/lib/opkg/status"],
            capture_output=True, text=True, check=True, timeout=60,
        ).stdout  # fmt: skip
        installed = re.findall(r"^Package: (\S+)$", status, re.M)
        assert f"libustream-{o.record.flavour}20201210" in installed, key
        assert not any(n.startswith("apk") for n in installed)
        # the kept sysupgrade image carries exactly this root filesystem (the recipe's dd)
        img = o.record.image()
        if img is not None:
            assert rootfs.read_bytes() in Path(img.path).read_bytes()


def check_fit_verdict_is_the_real_tools_keep_or_delete(outs: dict[str, Outcome]) -> None:
    """The fit model's verdict against what the tree's recipe and OpenWrt's tools did: the
    image is in bin/ exactly when the model says FITS, for sysupgrade and factory alike; the
    OpenSSL image on the 8 MB TL-WR902AC v1 is the one deleted, with tplink-safeloader's line."""
    for key, o in outs.items():
        fr = o.record.fit
        kept = list(_bin(o).glob("*-squashfs-sysupgrade.bin"))
        assert (fr.verdict == "FITS") == bool(kept), key
        assert o.record.image_deleted == (not kept)
        if fr.factory is not None:
            factory = list(_bin(o).glob("*-squashfs-factory.bin"))
            assert (fr.factory.verdict == "FITS") == bool(factory), key
    rec = outs[f"{V1}/openssl"].record
    assert rec.image_deleted and rec.fit.verdict == "TOO_BIG"
    log = Path(rec.log).read_text()
    real = set(re.findall(r"file-system partition too big \(more than \d+ bytes\)", log))
    empty = re.findall(r"WARNING: Image file \S*/(\S+) is too big:  > (\d+)", log)
    check_size = [f"WARNING: Image file {name} is too big:  > {limit}" for name, limit in empty]
    assert real and all(any(r in w for r in real) or w in check_size for w in rec.openwrt_warnings)
    # what the model says OpenWrt prints is a line the tool really printed
    said = re.findall(r"file-system partition too big \(more than \d+ bytes\)",
                      " ".join(rec.fit.factory.notes))  # fmt: skip
    assert said and set(said) <= real
    for dev in (V1, AR300):
        for fl in ("mbedtls", "wolfssl"):
            assert outs[f"{dev}/{fl}"].record.fit.verdict == "FITS"
    assert outs[f"{AR300}/openssl"].record.fit.verdict == "FITS"  # 16 MB of flash


def check_records_name_the_release_and_opkg_packages(outs: dict[str, Outcome]) -> None:
    for key, o in outs.items():
        r = o.record
        assert r.release == RELEASE
        assert r.release_commit == "0b795ce79e23b553aa184080c390f9ce92a2b6d4"
        # `make manifest STRIP_ABI=1`: opkg's names without the ABI suffix
        assert "opkg" in r.manifest and not any(n.startswith("apk") for n in r.manifest), key
        assert f"libustream-{r.flavour}" in r.manifest
        assert list(r.library_versions) == [r.flavour]
        # the bin/ manifest (opkg list-installed) keeps the ABI suffix; its packages are .ipk
        man = next(_bin(o).glob("*.manifest")).read_text()
        assert f"libustream-{r.flavour}20201210 - " in man
    assert outs[f"{V1}/openssl"].record.library_versions == {"openssl": "3.0.21-r1"}
    assert outs[f"{V1}/wolfssl"].record.library_versions == {"wolfssl": "5.9.1-r1"}
    # no apk note on 24.10: opkg needs no crypto backend
    assert not any("apk" in n for n in outs[f"{V1}/wolfssl"].record.notes)


def check_opkg_refusals_are_one_line(mirror: Path, base: Path) -> None:
    env = {"OPENWRT_WOLF_CACHE": str(base / "cache"), "OPENWRT_WOLF_STORE": str(base / "s2")}
    common = ("--device", "tl-wr902ac", "--release", RELEASE, "--mirror", str(mirror),
              "--no-report")  # fmt: skip
    line = error_line(cli("--flavour", "wolfssl", "--packages", "nosuch-pkg", *common, env=env))
    assert "impossible package selection" in line and "unknown packages: nosuch-pkg" in line
    # libustream-openssl and libustream-wolfssl both install /lib/libustream-ssl.so: opkg's
    # check_data_file_clashes refuses
    line = error_line(
        cli("--flavour", "wolfssl", "--packages", "libustream-openssl", *common, env=env)
    )
    assert "conflicting packages: libustream-openssl, libustream-wolfssl" in line


def test_release_24_10_8_builds_each_flavour(
    mirror_2410: Path, tmp_path: Path, openwrt_tools: OpenWrtTools
) -> None:
    """One test (one xdist worker): 2 devices x 3 flavours built from the 24.10.8 stand-in
    over HTTP, -j 2, and every check against the real tools' outputs."""
    check_ipk_and_index_are_opkgs(mirror_2410)
    with _matrix(mirror_2410, tmp_path) as outs:
        assert sorted(outs) == sorted(f"{d}/{f}" for d in (V1, AR300) for f in FLAVOURS)
        check_profiles_json_has_24_10s_shape(outs)
        check_rootfs_holds_the_flavours_tls_library_only(outs, openwrt_tools)
        check_fit_verdict_is_the_real_tools_keep_or_delete(outs)
        check_records_name_the_release_and_opkg_packages(outs)
    check_opkg_refusals_are_one_line(mirror_2410, tmp_path)


# --- the flavour data against the v24.10.8 tree -------------------------------------------


def _tree_packages(tree: Path) -> set[str]:
    names: set[str] = set()
    for mk in (tree / "package").rglob("Makefile"):
        names |= set(
            re.findall(r"^define Package/([\w.+-]+)\s*$", mk.read_text(errors="replace"), re.M)
        )
    return names


@pytest.mark.parametrize("release", ["24.10.8", "25.12.5"])
def test_flavour_packages_exist_in_the_releases_tree(release: str) -> None:
    """Every package a flavour swaps in or out on the release is a package of that release's
    tree (package/*/Makefile `define Package/<name>`); LuCI's live in the luci feed."""
    from tests.conftest import _openwrt_tree

    have = _tree_packages(_openwrt_tree(release))
    for fl in FLAVOURS:
        r = packages.rules(fl, release)
        named = {p for pair in r.replace for p in pair} | set(r.add) | set(r.remove)
        assert named <= have, (fl, sorted(named - have))
        assert set(r.luci_https) - have <= {"luci-ssl", "luci-ssl-openssl", "luci-light"}
    apk = {p for fl in FLAVOURS for pair in packages.rules(fl, release).replace for p in pair
           if p.startswith("apk-")}  # fmt: skip
    if release == "24.10.8":  # opkg: no apk package anywhere in 24.10's flavours
        assert not apk and "opkg" in have
    else:
        assert apk == {"apk-mbedtls", "apk-openssl"} and "apk-wolfssl" not in have


# --- bad input -------------------------------------------------------------------------------


def test_unknown_release_is_one_line(tmp_path: Path) -> None:
    env = {"OPENWRT_WOLF_CACHE": str(tmp_path / "c"), "OPENWRT_WOLF_STORE": str(tmp_path / "s")}
    line = error_line(cli("--flavour", "wolfssl", "--device", "tl-wr902ac", "--release",
                          "23.05.5", "--mirror", str(tmp_path), env=env))  # fmt: skip
    assert "unknown release '23.05.5'" in line and "24.10.8" in line


def test_release_missing_from_the_mirror_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "releases" / "25.12.5").mkdir(parents=True)  # a mirror of another release
    env = {"OPENWRT_WOLF_CACHE": str(tmp_path / "c"), "OPENWRT_WOLF_STORE": str(tmp_path / "s")}
    line = error_line(cli("--flavour", "mbedtls", "--device", "gl-ar300m16", "--release",
                          RELEASE, "--mirror", str(tmp_path), env=env))  # fmt: skip
    assert f"releases/{RELEASE}/targets/ath79/generic/sha256sums" in line


def test_release_whose_tree_is_missing_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.conftest import offline_upstream

    offline_upstream(monkeypatch, tmp_path / "cache")
    with pytest.raises(upstream.Unavailable) as e:
        upstream.openwrt_tree(RELEASE)
    line = str(e.value)
    assert "\n" not in line
    assert "source openwrt-24.10.8.tar.gz (openwrt/openwrt 0b795ce79e23)" in line
    assert "--sources DIR" in line and "OPENWRT_TREE_24_10_8" in line
    monkeypatch.setenv("OPENWRT_TREE_24_10_8", str(tmp_path))
    with pytest.raises(WolfError, match="is not an OpenWrt tree"):
        upstream.openwrt_tree(RELEASE)


def test_catalogue_has_the_devices_for_24_10_8() -> None:
    for name in ("tl-wr902ac", "gl-ar300m16"):
        d = devices.resolve(name, RELEASE)
        assert d.release == RELEASE and d.target_path == "ath79/generic"


def test_opkg_messages_name_the_requested_packages() -> None:
    """opkg prints installed packages with their ABI suffix (package-pack.mk's Package:
    <name><ABI_VERSION>); the one line names the packages the user asked for."""
    clash = (
        " * check_data_file_clashes: Package libustream-openssl20201210 wants to install file"
        " /ib/root/lib/libustream-ssl.so\n"
        "\tBut that file is already provided by package  * libustream-wolfssl20201210\n"
        " * opkg_install_cmd: Cannot install package libustream-openssl.\n"
    )
    asked = ["-libustream-mbedtls", "libustream-wolfssl", "libustream-openssl"]
    assert imagebuilder.package_errors(clash, asked) == (
        "conflicting packages: libustream-openssl, libustream-wolfssl"
    )
    conflict = (
        " * check_conflicts_for: The following packages conflict with libustream-mbedtls20201210:\n"
        " * check_conflicts_for: \tlibustream-wolfssl20201210 \n"
        " * opkg_install_cmd: Cannot install package libustream-mbedtls.\n"
    )
    assert imagebuilder.package_errors(conflict, ["libustream-wolfssl"]) == (
        "conflicting packages: libustream-mbedtls, libustream-wolfssl"
    )
    # a name that only looks like one with an ABI suffix is left alone
    missing = (
        "Unknown package 'kmod-usb3'.\n * opkg_install_cmd: Cannot install package kmod-usb3.\n"
    )
    assert imagebuilder.package_errors(missing, ["kmod-usb", "kmod-usb3"]) == (
        "unknown packages: kmod-usb3"
    )
    # opkg versions that name the resolved package in "Cannot install" too
    resolved = clash.replace("package libustream-openssl.", "package libustream-openssl20201210.")
    assert imagebuilder.package_errors(resolved, asked) == (
        "conflicting packages: libustream-openssl, libustream-wolfssl"
    )

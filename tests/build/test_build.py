"""invoke build against the stand-in ImageBuilder (tests/standin/), served from 127.0.0.1.

Sizes are checked against stat, unsquashfs, mkimage and the stand-in's own sha256sums and
profiles.json (what OpenWrt's side wrote), never against numbers the driver computed alone."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from openwrt_wolf.build import download, imagebuilder, packages, sdk
from openwrt_wolf.build.driver import build
from openwrt_wolf.build.jobs import Options, Outcome, plan
from openwrt_wolf.errors import CommandError, WolfError
from openwrt_wolf.firmware import artifacts, fit, imageformats
from openwrt_wolf.targets.router import installed as router_packages
from openwrt_wolf.targets.router import sysupgrade as router_image
from tests.conftest import free_port, need_tools, private_copy, unavailable
from tests.sqfs_kit import xz9e_size
from tests.standin.kit import Kit
from tests.standin.server import serve
from tests.standin.sources_kit import SOURCES_ALLOW, source_dirs

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ("make", "mksquashfs", "unsquashfs", "mkimage", "zstd")
V1, V3, AR300 = "tplink_tl-wr902ac-v1", "tplink_tl-wr902ac-v3", "glinet_gl-ar300m16"
SAFELOADER_MAX = 0x710000  # openwrt-facts.md: kernel+rootfs limit of the TL-WR902AC v1
# The patch set's wolfSSL images of the tests hold no Wi-Fi and no package manager: the SDK
# would compile wpad-basic-wolfssl (hostapd) and apk-wolfssl (apk needs wget-any: uclient,
# which needs ucode), and libnl-tiny and ubus, which hostapd and ucode build with, have no
# source here at their pins (../shared/openwrt/offline/README.md: GIT-stale); docs/testing.md
WOLFSSL_NO_WIFI = ("-apk-mbedtls", "-wpad-basic-mbedtls")


# --- fixtures ----------------------------------------------------------------------------


@pytest.fixture(scope="session")
def mirror_dir(tmp_path_factory: pytest.TempPathFactory, standin_mirror: Path) -> Path:
    """This worker's copy of the run's stand-in mirror (tests/conftest.py standin_mirror): the
    tests build in its ImageBuilder trees (--imagebuilder)."""
    need_tools(*TOOLS)
    return private_copy(standin_mirror, tmp_path_factory.mktemp("mirror"))


def tree(mirror: Path, target: str = "ath79/generic") -> Path:
    t, s = target.split("/")
    return mirror / ".trees" / f"openwrt-imagebuilder-25.12.5-{t}-{s}.Linux-x86_64"


@pytest.fixture
def wolf_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    cache, st = tmp_path / "cache", tmp_path / "store"
    monkeypatch.setenv("OPENWRT_WOLF_CACHE", str(cache))
    monkeypatch.setenv("OPENWRT_WOLF_STORE", str(st))
    return {"cache": cache, "store": st}


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "invoke", "build", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def error_line(p: Any) -> str:
    """The one error line (commands are logged as '$ ...' lines before it)."""
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert p.returncode == 2, p.stderr[-3000:]
    assert len(lines) == 1, p.stderr[-3000:]
    assert "Traceback" not in p.stderr
    return lines[0]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def unsquashfs_size(path: Path, offset: int = 0) -> int:
    out = subprocess.run(
        ["unsquashfs", "-s", "-o", str(offset), str(path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    m = re.search(r"Filesystem size (\d+) bytes", out)
    assert m, out
    return int(m.group(1))


def unsquashfs_list(path: Path, offset: int = 0) -> list[str]:
    out = subprocess.run(
        ["unsquashfs", "-l", "-o", str(offset), str(path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return [ln.removeprefix("squashfs-root") for ln in out.splitlines()]


def unsquashfs_cat(path: Path, name: str) -> bytes:
    return subprocess.run(["unsquashfs", "-cat", str(path), name], capture_output=True,
                          check=True, timeout=60).stdout  # fmt: skip


# --- the matrix: 3 flavours x 3 devices, downloaded over HTTP ----------------------------


@pytest.fixture(scope="module")
def _built_matrix(mirror_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The 9 builds, once per module (the matrix tests share one xdist worker: their group)."""
    base = tmp_path_factory.mktemp("matrix")
    srcs = tuple(source_dirs(base / "sources"))  # OpenWrt's mirrors are out of reach here
    with serve(mirror_dir) as (url, srv):
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("OPENWRT_WOLF_CACHE", str(base / "cache"))
            mp.setenv("OPENWRT_WOLF_STORE", str(base / "store"))
            devs = f"{V1},{AR300},{V3}"
            outs = build(Options(flavour="mbedtls,openssl", device=devs, mirror=url, jobs=2))
            patch_set = Options(
                flavour="wolfssl",
                device=devs,
                mirror=url,
                jobs=2,
                packages=WOLFSSL_NO_WIFI,
                sources=srcs,
                allow=SOURCES_ALLOW,
            )
            outs += build(patch_set)
        yield {o.record.device + "/" + o.record.flavour: o for o in outs}, base, srv


@pytest.fixture
def matrix(_built_matrix: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The matrix, with its cache and store as this test's (a check may build again)."""
    base = _built_matrix[1]
    monkeypatch.setenv("OPENWRT_WOLF_CACHE", str(base / "cache"))
    monkeypatch.setenv("OPENWRT_WOLF_STORE", str(base / "store"))
    return _built_matrix


def check_every_flavour_and_device(matrix: Any) -> None:
    outs, _, srv = matrix
    assert sorted(outs) == sorted(
        f"{d}/{f}" for d in (V1, AR300, V3) for f in ("mbedtls", "wolfssl", "openssl")
    )
    # both ImageBuilders came over HTTP with their sha256sums
    got = {p for p, _ in srv.requests}
    assert any(p.endswith("ath79/generic/sha256sums") for p in got)
    assert any(p.endswith("ramips-mt76x8.Linux-x86_64.tar.zst") for p in got)
    for o in outs.values():
        assert not o.cached


def _image(o: Outcome) -> Path:
    img = o.record.image()
    assert img is not None, o.record.openwrt_warnings
    return Path(img.path)


def check_kept_image(matrix: Any, device: str, flavour: str) -> None:
    o = matrix[0][f"{device}/{flavour}"]
    img = _image(o)
    art = o.record.image()
    assert art is not None
    # the artifact list agrees with stat, hashlib and OpenWrt's sha256sums and profiles.json
    assert art.size == img.stat().st_size
    assert art.sha256 == sha256(img)
    sums = artifacts.parse_sha256sums((img.parent / "sha256sums").read_text())
    assert sums[img.name] == sha256(img)
    pj = json.loads((img.parent / "profiles.json").read_text())
    entry = next(i for i in pj["profiles"][device]["images"] if i["type"] == "sysupgrade")
    assert (entry["name"], entry["size"]) == (img.name, img.stat().st_size)
    board = o.record.request.target.replace("/", "-")
    assert img.name == f"openwrt-25.12.5-{board}-{device}-squashfs-sysupgrade.bin"
    # the fit's pieces are what the image holds: unsquashfs reads the rootfs inside the image
    data = img.read_bytes()
    fr = o.record.fit
    off = data.index(b"hsqs", fr.kernel_size)
    assert unsquashfs_size(img, off) == fr.rootfs_size
    kernel = next(Path(a.path) for a in o.record.artifacts if a.type == "kernel")
    assert kernel.stat().st_size == fr.kernel_size
    assert data.startswith(kernel.read_bytes()) or data[512:].startswith(kernel.read_bytes())
    assert fr.verdict == "FITS" and not o.record.image_deleted
    assert fr.final_size == img.stat().st_size
    # the fit helper's image parser splits the finished file the same way
    sp = imageformats.split(img)
    assert sp.format == fit.RECIPE_FORMATS[fr.recipe]
    assert (sp.kernel_size, sp.rootfs_size) == (fr.kernel_size, fr.rootfs_size)
    assert sp.metadata_size == fr.metadata_size and 200 < sp.metadata_size < 400


def check_uimage_kernel_checked_with_mkimage(matrix: Any, tmp_path: Path) -> None:
    o = matrix[0][f"{AR300}/mbedtls"]
    head = tmp_path / "kernel"
    head.write_bytes(_image(o).read_bytes()[: o.record.fit.kernel_size])
    out = subprocess.run(
        ["mkimage", "-l", str(head)], capture_output=True, text=True, check=True
    ).stdout
    size = int(re.search(r"Data Size:\s+(\d+) Bytes", out).group(1))  # type: ignore[union-attr]
    assert size + 64 == o.record.fit.kernel_size


def check_flavours_install_their_tls_library(matrix: Any) -> None:
    outs = matrix[0]
    for device in (V1, AR300, V3):
        libs = {}
        for fl in ("mbedtls", "wolfssl"):
            img = _image(outs[f"{device}/{fl}"])
            off = img.read_bytes().index(b"hsqs", outs[f"{device}/{fl}"].record.fit.kernel_size)
            libs[fl] = [p for p in unsquashfs_list(img, off) if p.startswith("/usr/lib/lib")]
        assert any("libmbedtls" in p for p in libs["mbedtls"])
        assert not any("libwolfssl" in p for p in libs["mbedtls"])
        assert any("libwolfssl" in p for p in libs["wolfssl"])
        # the patch set's image: apk-wolfssl (patch 0004) instead of apk-mbedtls, so no
        # libmbedtls is left; OpenWrt's note that apk-mbedtls stays is the stock image's
        assert not any("mbedtls" in p for p in libs["wolfssl"]), libs["wolfssl"]
        w = outs[f"{device}/wolfssl"].record
        assert not any("apk-mbedtls stays" in n for n in w.notes), w.notes
        assert not [n for n in w.manifest if "mbedtls" in n], w.manifest
        assert w.library_versions.keys() == {"wolfssl"}
        rec = outs[f"{device}/openssl"].record
        assert rec.library_versions == {"openssl": "3.5.7-r1"}  # no libmbedtls left


def check_wolfssl_is_the_patch_sets_image(matrix: Any) -> None:
    """No option but --mirror: the SDK compiled the patch set's packages from a patched copy
    of the pinned tree, and the request names that tree, the patch set and both archives."""
    outs, base, srv = matrix
    served = {p for p, _ in srv.requests}
    for device in (V1, AR300, V3):
        rec = outs[f"{device}/wolfssl"].record
        req = rec.request
        assert (rec.backend, req.variant, rec.variant) == ("sdk", "patch-set", "patch-set")
        assert req.tree.startswith("pin:openwrt-25.12.5:") and req.patch_set != "none"
        t = req.target.replace("/", "-")
        sdk = next((base / "cache" / "downloads").rglob(f"openwrt-sdk-25.12.5-{t}_*.tar.zst"))
        assert req.sdk == f"sha256:{sha256(sdk)}" == f"sha256:{rec.sdk_sha256}"
        assert req.imagebuilder == f"sha256:{rec.builder_sha256}"
        assert any(p.endswith(sdk.name) for p in served)
        lib = [f for f in rec.compiled if f.startswith("libwolfssl")]
        assert len(lib) == 1 and any(f.startswith("libustream-wolfssl") for f in rec.compiled)
        for o in (outs[f"{device}/mbedtls"], outs[f"{device}/openssl"]):
            assert o.record.variant == "stock" and o.record.backend == "imagebuilder"
    # the pinned tree is only read: its patched copy is in the cache, stamped
    (copy,) = (p for p in (base / "cache" / "base-feeds").glob("25.12.5-*") if p.is_dir())
    stamp = json.loads((copy / ".wolf-base.json").read_text())
    assert stamp["release"] == "25.12.5" and stamp["source"].startswith("pin:openwrt-25.12.5:")


def check_sdk_packages_beside_the_images_are_a_feed(matrix: Any) -> None:
    """The SDK's packages kept beside the wolfSSL images are a feed: packages.adb, written by
    the ImageBuilder's own apk, lists exactly the compiled files (OpenWrt's apk reads it), so
    `what-if --packages` takes the directory (docs/whatif.md; byte for byte on the real ath79
    images: the stand-in's wolfSSL image leaves Wi-Fi and apk out, the Mbed TLS one does not)."""
    outs, base, _ = matrix
    apk = next((base / "cache" / "imagebuilder").rglob("ath79-generic/*/staging_dir/host/bin/apk"))
    for device in (V1, AR300):
        rec = outs[f"{device}/wolfssl"].record
        (index,) = [Path(a.path) for a in rec.artifacts if a.type == "package index"]
        argv = [str(apk), "adbdump", "--format", "json", str(index)]
        dump = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60)
        listed = {f"{p['name']}-{p['version']}.apk" for p in json.loads(dump.stdout)["packages"]}
        assert listed == set(rec.compiled) and len(listed) >= 2
        assert {p.name for p in index.parent.glob("*.apk")} == listed


def check_openssl_overflows_the_wr902ac_v1_and_is_deleted(matrix: Any) -> None:
    o = matrix[0][f"{V1}/openssl"]
    rec = o.record
    assert rec.image_deleted and rec.image() is None
    assert rec.fit.verdict == "TOO_BIG"
    assert any("file-system partition too big" in w for w in rec.openwrt_warnings)
    # Build/tplink-safeloader runs as `-tplink-safeloader ... && mv ... || rm -f $@`: make
    # goes on, and neither the sysupgrade nor the factory image is left
    assert not any(n.startswith("make image exited") for n in rec.notes)
    bin_dir = Path(rec.log).parent / "bin"
    assert not list(bin_dir.glob("*sysupgrade*"))  # OpenWrt deleted it
    assert not list(bin_dir.glob("*factory*"))
    # measured from the pieces left in KDIR: stat and unsquashfs, against the facts' limit
    kernel = next(Path(a.path) for a in rec.artifacts if a.type == "kernel")
    rootfs = next(Path(a.path) for a in rec.artifacts if a.type == "rootfs")
    assert rec.fit.kernel_size == kernel.stat().st_size
    assert rec.fit.rootfs_size == unsquashfs_size(rootfs)
    assert kernel.stat().st_size + unsquashfs_size(rootfs) > SAFELOADER_MAX
    assert rec.fit.limit == SAFELOADER_MAX


def check_record_is_complete(matrix: Any) -> None:
    outs, base, _ = matrix
    o = outs[f"{V3}/mbedtls"]
    raw = json.loads(o.path.read_text())
    assert raw["kind"] == "build" and raw["key"] == o.job.key
    d = raw["data"]
    assert d["request"]["packages"] == sorted(d["request"]["packages"])
    assert d["release_commit"] == "f0a60eee2fe051741c643ea6118718aae1ef17fb"
    assert [c.split(" && ", 1)[1].split()[:2] for c in d["commands"]] == [
        ["MAKEFLAGS=''", "make"],
        ["MAKEFLAGS=''", "make"],
        ["MAKEFLAGS=''", "make"],
    ]
    assert {"imagebuilder", "info", "manifest", "image", "measure"} <= set(d["phases"])
    log = Path(d["log"]).read_text()
    assert "Building images..." in log and "make image" in log
    assert d["builder_sha256"] == sha256(
        next((base / "cache" / "downloads").rglob("openwrt-imagebuilder-*ramips-mt76x8*.tar.zst"))
    )
    assert all(set(a) == {"name", "path", "sha256", "size", "type"} for a in d["artifacts"])
    rootfs = next(Path(f["path"]) for f in d["artifacts"] if f["type"] == "rootfs")
    assert unsquashfs_size(rootfs) == d["output"]["fit"]["rootfs_size"]
    # the output measured once, by the build, kept whole in the record (version 2): the
    # rootfs's size and its TLS libraries' bytes as unsquashfs and xz give them
    assert d["version"] == 2 and d["output"]["rootfs"]["size"] == unsquashfs_size(rootfs)
    libs = d["output"]["rootfs"]["tls_libraries"]
    assert {lib["group"] for lib in libs} >= {"mbedtls"}
    listing = unsquashfs_list(rootfs)
    for lib in libs:
        data = unsquashfs_cat(rootfs, lib["path"])
        assert lib["path"] in listing and lib["size"] == len(data)
        assert lib["xz_size"] == xz9e_size(data)


def check_abi_names_through_manifest_rootfs_and_router_check(matrix: Any, tmp_path: Path) -> None:
    """25.12 names packages with their ABI version. The image's .manifest (apk list --manifest)
    and the rootfs's apk database carry them; the record's manifest (make manifest STRIP_ABI=1)
    does not. On the rootfs, OpenWrt's own apk lists them (the oracle), and router flash
    verification, size-report's reading of the output directory and the TLS library versions
    work with those names."""
    outs, base, _ = matrix
    apk = next((base / "cache" / "imagebuilder").rglob("staging_dir/host/bin/apk"))
    # the patch set's libwolfssl: the SDK's, its ABI suffix of its version and build options
    (lib,) = [f for f in outs[f"{V1}/wolfssl"].record.compiled if f.startswith("libwolfssl")]
    for flavour, abi_name in (("mbedtls", "libmbedtls21"), ("wolfssl", sdk.package_name(lib)),
                              ("openssl", "libopenssl3")):  # fmt: skip
        rec = outs[f"{V1}/{flavour}"].record
        bin_dir = Path(rec.log).parent / "bin"
        manifest = next(bin_dir.glob("*.manifest")).read_text()
        assert re.search(rf"^{re.escape(abi_name)}\S* - ", manifest, re.M), manifest
        assert f"libustream-{flavour}20201210 - " in manifest
        assert f"libustream-{flavour}" in rec.manifest and not any(
            n.startswith(f"libustream-{flavour}2") for n in rec.manifest
        )
        root = tmp_path / f"root-{flavour}"
        rootfs = next(Path(a.path) for a in rec.artifacts if a.type == "rootfs")
        subprocess.run(["unsquashfs", "-d", str(root), "-no-xattrs", str(rootfs)],
                       capture_output=True, check=True, timeout=120)  # fmt: skip
        argv = [str(apk), "--root", str(root), "list", "--installed"]
        listed = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60)
        pkgs = router_packages.parse_apk(listed.stdout)
        db = (root / "lib/apk/db/installed").read_text()
        assert set(pkgs) == set(re.findall(r"^P:(.*)$", db, re.M))
        assert dict(zip(re.findall(r"^P:(.*)$", db, re.M), re.findall(r"^V:(.*)$", db, re.M),
                        strict=True)) == pkgs  # fmt: skip
        for other in ("mbedtls", "wolfssl", "openssl"):
            assert router_packages.check("apk", pkgs, other).ok == (other == flavour), other
        if flavour == "wolfssl":  # the flash check of the patch set's image, by its record
            libs = router_image.with_build(
                router_image.FlashImage(Path("x"), 0, "", (), "", "", None, None, None, flavour),
                rec,
            ).libraries
            assert [n for n, _ in libs] == [n for n in pkgs if n.startswith("libwolfssl")]
            # the test images hold no apk (WOLFSSL_NO_WIFI): all else is the patch set's
            got = router_packages.check("apk", pkgs, flavour, "patch-set", libs)
            assert got.missing == ("apk-wolfssl",) and not got.unwanted, got
            other_abi = tuple((n + "x", v) for n, v in libs)  # OpenWrt's full library's name
            bad = router_packages.check("apk", pkgs, flavour, "patch-set", other_abi)
            assert bad.missing[1].startswith(f"{other_abi[0][0]} {other_abi[0][1]} (the build's")
            stock = {**{n: v for n, v in pkgs.items() if n != "apk-wolfssl"},
                     "apk-mbedtls": "3.0.5-r1", "libmbedtls21": "3.6.5-r1"}  # fmt: skip
            assert router_packages.check("apk", stock, flavour, "stock").ok
            refused = router_packages.check("apk", stock, flavour, "patch-set")
            assert refused.missing == ("apk-wolfssl",)
            assert refused.unwanted == ("apk-mbedtls", "libmbedtls21")
        art = artifacts.measure_dir(bin_dir, [V1])[0]
        assert art.flavour == flavour
        assert {p.name for p in art.manifest} >= {f"libustream-{flavour}20201210"}
        want = {"mbedtls": {"mbedtls"}, "wolfssl": {"wolfssl"}, "openssl": {"openssl"}}
        assert rec.library_versions.keys() == want[flavour]


def check_size_report_reads_the_build_records(matrix: Any) -> None:
    _, base, _ = matrix
    p = subprocess.run(
        [sys.executable, "-m", "invoke", "size-report", "--store", str(base / "store"),
         "--format", "json"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    text = p.stdout
    for device in (V1, AR300, V3):
        assert device in text


def check_size_report_takes_the_patch_sets_image(matrix: Any) -> None:
    """A stock wolfSSL build made after the patch set's does not take its column: the report
    takes the patch set's (`--stock`: the stock one), says which in its Packages row, and a
    note names the device whose only build is of the other variant."""
    outs, base, _ = matrix
    ib = next((base / "cache" / "imagebuilder" / "25.12.5" / "ath79-generic").glob("openwrt-*"))
    (stock,) = build(Options(flavour="wolfssl", device=V1, imagebuilder=ib, stock=True))
    assert stock.record.variant == "stock" and stock.record.backend == "imagebuilder"
    assert any("libmbedtls" in n for n in stock.record.manifest)  # OpenWrt's own packages

    def report(*args: str) -> dict[str, Any]:
        p = subprocess.run([sys.executable, "-m", "invoke", "size-report", "--store",
                            str(base / "store"), "--format", "json", *args], cwd=ROOT,
                           capture_output=True, text=True, timeout=300)  # fmt: skip
        assert p.returncode == 0, p.stderr[-2000:]
        return {d["profile"]: d["cells"] for d in json.loads(p.stdout)["devices"]}

    cells = report("--device", f"{V1},{AR300}")
    patch_set = outs[f"{V1}/wolfssl"].record.key
    assert cells[V1]["wolfssl"]["source"] == f"store:build/{patch_set}"
    assert cells[V1]["wolfssl"]["variant"] == "patch-set"
    assert not any("the store has no" in n for n in cells[V1]["wolfssl"]["notes"])
    assert cells[V1]["mbedtls"]["variant"] == "stock"
    cells = report("--device", f"{V1},{AR300}", "--stock")
    assert cells[V1]["wolfssl"]["source"] == f"store:build/{stock.record.key}"
    assert cells[AR300]["wolfssl"]["variant"] == "patch-set"  # the only one: said so
    assert any("the store has no stock build of" in n for n in cells[AR300]["wolfssl"]["notes"])
    argv = [sys.executable, "-m", "invoke", "size-report", "--store", str(base / "store"),
            "--format", "markdown", "--device", V1]  # fmt: skip
    md = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300, check=True)
    assert "| Packages | stock | patch set | stock |" in md.stdout, md.stdout


def check_second_run_is_served_from_the_store_without_make(matrix: Any, tmp_path: Path) -> None:
    _, base, _ = matrix
    fake = tmp_path / "bin"
    fake.mkdir()
    marker = tmp_path / "make-ran"
    (fake / "make").write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    (fake / "make").chmod(0o755)
    env = {
        "OPENWRT_WOLF_CACHE": str(base / "cache"),
        "OPENWRT_WOLF_STORE": str(base / "store"),
        "PATH": f"{fake}:{os.environ['PATH']}",
    }
    devs = f"{V1},{AR300},{V3}"
    p = cli("--flavour", "mbedtls,openssl", "--device", devs, "--mirror", "http://127.0.0.1:9",
            env=env)  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert p.stderr.count("cached ") == 6
    srcs = ",".join(str(d) for d in source_dirs(base / "sources"))  # part of the request
    p = cli("--flavour", "wolfssl", "--device", devs, "--mirror", "http://127.0.0.1:9",
            f"--packages={','.join(WOLFSSL_NO_WIFI)}", "--sources", srcs,
            f"--allow={','.join(SOURCES_ALLOW)}", env=env)  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert p.stderr.count("cached ") == 3
    assert not marker.exists()


# --- flavours as data --------------------------------------------------------------------


def test_flavour_changes_follow_openwrt_package_names() -> None:
    defaults = ["libustream-mbedtls", "apk-mbedtls", "wpad-basic-mbedtls", "dropbear"]
    w = packages.changes(packages.rules("wolfssl", "25.12.5"), defaults)
    assert packages.packages_value(w).split() == [
        "-libustream-mbedtls",
        "-wpad-basic-mbedtls",
        "libustream-wolfssl",
        "wpad-basic-wolfssl",
    ]
    o = packages.changes(packages.rules("openssl", "25.12.5"), defaults)
    assert "-apk-mbedtls" in packages.packages_value(o).split()
    # a device without Wi-Fi keeps no wpad replacement
    nowifi = packages.changes(packages.rules("openssl", "25.12.5"), ["libustream-mbedtls"])
    assert nowifi.add == ("libustream-openssl",)
    # 24.10 uses opkg: no apk package is touched and nothing is left incomplete
    old = packages.changes(packages.rules("wolfssl", "24.10.8"), None)
    assert not any("apk" in p for p in old.spec()) and not old.notes
    assert packages.packages_value(packages.changes(packages.rules("mbedtls", "25.12.5"))) == ""


def test_luci_https_and_renderings() -> None:
    w = packages.changes(packages.rules("wolfssl", "25.12.5"), None, luci_https=True)
    assert "luci-ssl" not in w.add and "px5g-wolfssl" in w.add
    assert any("luci-ssl-wolfssl" in n for n in w.notes)
    cfg = packages.diffconfig(
        w, flavour="wolfssl", release="25.12.5", target="ath79", subtarget="generic", profile=V1
    )
    assert f"CONFIG_TARGET_ath79_generic_DEVICE_{V1}=y" in cfg
    assert "# CONFIG_PACKAGE_libustream-mbedtls is not set" in cfg
    assert "CONFIG_PACKAGE_libustream-wolfssl=y" in cfg
    feeds = packages.feeds_conf("25.12.5", "wolfssl", Path("/x/feeds"))
    assert feeds.splitlines()[1].startswith("src-git packages https://git.openwrt.org/feed/")
    assert feeds.splitlines()[-1] == "src-link wolf /x/feeds"


def test_resolver_messages_become_one_line() -> None:
    apk_missing = "ERROR: unable to select packages:\n  foo-bar (no such package):\n    required by: world[foo-bar]\n"  # noqa: E501
    assert imagebuilder.package_errors(apk_missing) == "unknown packages: foo-bar"
    apk_conflict = (
        "ERROR: unable to select packages:\n  px5g-wolfssl-10-r1:\n"
        "    conflicts: px5g-mbedtls-10-r1[px5g]\n    satisfies: world[px5g-wolfssl]\n"
    )
    assert imagebuilder.package_errors(apk_conflict) == (
        "conflicting packages: px5g-mbedtls, px5g-wolfssl"
    )
    opkg = "Collected errors:\n * opkg_install_cmd: Cannot install package nosuch.\n"
    assert imagebuilder.package_errors(opkg) == "unknown packages: nosuch"
    assert imagebuilder.package_errors("all good\n") is None


# --- errors ------------------------------------------------------------------------------


def test_unknown_package_is_one_line(mirror_dir: Path, wolf_env: dict[str, Path]) -> None:
    p = cli(
        "--flavour",
        "mbedtls",
        "--device",
        V1,
        "--imagebuilder",
        str(tree(mirror_dir)),
        "--packages",
        "no-such-pkg",
    )
    line = error_line(p)
    assert (
        "impossible package selection for tplink_tl-wr902ac-v1: unknown packages: no-such-pkg"
        in line
    )
    assert not list((wolf_env["store"]).rglob("*.json"))


def test_conflicting_packages_are_named(mirror_dir: Path, wolf_env: dict[str, Path]) -> None:
    with pytest.raises(WolfError) as e:
        build(
            Options(
                flavour="mbedtls",
                device=V1,
                imagebuilder=tree(mirror_dir),
                packages=("libustream-openssl",),
            )
        )
    assert "conflicting packages: libustream-mbedtls, libustream-openssl" in str(e.value)


def test_unreachable_server_names_mirror_and_imagebuilder(wolf_env: dict[str, Path]) -> None:
    need_tools(*TOOLS)
    p = cli("--flavour", "wolfssl", "--stock", "--device", V1, "--mirror", "http://127.0.0.1:9")
    line = error_line(p)
    assert "unreachable" in line and "--mirror" in line and "--imagebuilder" in line


@pytest.mark.parametrize("server", ["mirror-down", "no-network"])
def test_offline_main_job_says_what_runs_without_servers(
    wolf_env: dict[str, Path], server: str
) -> None:
    """The README's first command with no server: the error line names --mirror and
    --imagebuilder, and the line under it names commands that exist with those options."""
    need_tools(*TOOLS)
    closed = f"http://127.0.0.1:{free_port()}"
    if server == "mirror-down":
        p = cli("--flavour", "all", "--device", "tl-wr902ac", "--mirror", closed)
    else:  # the default server; a proxy nobody answers on stands for no network
        env = {"HTTPS_PROXY": closed, "https_proxy": closed, "NO_PROXY": "", "no_proxy": ""}
        p = cli("--flavour", "all", "--device", "tl-wr902ac", env=env)
    line = error_line(p)
    assert "unreachable" in line and "--mirror" in line and "--imagebuilder" in line
    last = p.stderr.strip().splitlines()
    assert last[-2] == line and "without OpenWrt's servers" in last[-1]
    commands = re.findall(r"\./wolf ([a-z-]+)((?: --?[a-z-]+(?: [a-z0-9_]+)?)*)", last[-1])
    assert [c for c, _ in commands] == ["footprint", "perf"]
    for task, opts in commands:
        helped = subprocess.run([str(ROOT / "wolf"), "--help", task], capture_output=True,
                                text=True, timeout=120).stdout  # fmt: skip
        for opt in re.findall(r"--[a-z-]+", opts):
            assert f"{opt}" in helped, (task, opt)
    assert "qemu" in helped  # perf --target qemu is one of its targets


def test_checksum_mismatch_removes_the_file(
    mirror_dir: Path, wolf_env: dict[str, Path], tmp_path: Path
) -> None:
    bad = tmp_path / "badmirror"
    shutil.copytree(mirror_dir / "releases", bad / "releases")
    sums = bad / "releases/25.12.5/targets/ath79/generic/sha256sums"
    sums.write_text(re.sub(r"^[0-9a-f]{64}", "0" * 64, sums.read_text()))
    with serve(bad) as (url, _):
        p = cli("--flavour", "mbedtls", "--device", V1, "--mirror", url)
    line = error_line(p)
    assert "checksum mismatch" in line and "removed" in line
    left = [f for f in wolf_env["cache"].rglob("*") if f.is_file() and ".tar.zst" in f.name]
    assert left == []


def test_broken_download_resumes_with_range(mirror_dir: Path, wolf_env: dict[str, Path]) -> None:
    with serve(mirror_dir, break_after=300_000) as (url, srv):
        with pytest.raises(WolfError) as e:
            build(Options(flavour="mbedtls", device=V1, mirror=url))
        assert "re-run to resume" in str(e.value)
        part = next(wolf_env["cache"].rglob("*.tar.zst.part"))
        kept = part.stat().st_size
        assert 0 < kept <= 300_000
        outs = build(Options(flavour="mbedtls", device=V1, mirror=url))
        assert (
            "/releases/25.12.5/targets/ath79/generic/"
            "openwrt-imagebuilder-25.12.5-ath79-generic.Linux-x86_64.tar.zst",
            f"bytes={kept}-",
        ) in srv.requests
    archive = next(wolf_env["cache"].rglob("*ath79-generic.Linux-x86_64.tar.zst"))
    served = mirror_dir / "releases/25.12.5/targets/ath79/generic" / archive.name
    assert sha256(archive) == sha256(served)
    assert outs[0].record.fit.verdict == "FITS"


def _tool_dir(tmp_path: Path, names: list[str]) -> Path:
    d = tmp_path / "tools"
    d.mkdir()
    for n in names:
        found = shutil.which(n)
        if found:
            (d / n).symlink_to(found)
    return d


def test_missing_host_tools_are_listed_with_packages(
    mirror_dir: Path, wolf_env: dict[str, Path], tmp_path: Path
) -> None:
    only = _tool_dir(tmp_path, ["python3", "sh"])
    p = cli(
        "--flavour", "mbedtls", "--device", V1, "--imagebuilder", str(tree(mirror_dir)),
        env={"PATH": str(only)}, timeout=120,
    )  # fmt: skip
    line = error_line(p)
    assert "missing host tools: make" in line and "apt-get install" in line and " make" in line


def test_imagebuilder_prerequisite_failure_names_debian_packages(
    mirror_dir: Path, wolf_env: dict[str, Path], tmp_path: Path
) -> None:
    """A host without GNU awk (Debian's awk is mawk): OpenWrt's own include/prereq-build.mk
    refuses it when the ImageBuilder builds, and the error names the Debian package."""
    only = tmp_path / "tools"
    only.mkdir()
    for d in ("/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"):
        for f in Path(d).iterdir() if Path(d).is_dir() else ():
            gnu = f.name == "gawk" or f.resolve().name == "gawk"  # awk, nawk: alternatives
            if not gnu and not (only / f.name).exists() and os.access(f, os.X_OK):
                (only / f.name).symlink_to(f.resolve())
    (only / "awk").unlink(missing_ok=True)
    (only / "awk").symlink_to(shutil.which("mawk") or "/usr/bin/mawk")
    (only / "python3").unlink(missing_ok=True)  # a real interpreter, not a version-manager shim
    (only / "python3").symlink_to(os.path.realpath(sys.executable))
    p = cli(
        "--flavour", "mbedtls", "--device", V1, "--imagebuilder", str(tree(mirror_dir)),
        env={"PATH": str(only)}, timeout=300,
    )  # fmt: skip
    line = error_line(p)
    assert "prerequisite check failed: missing awk (gawk)" in line  # its check is named awk


def test_make_failure_shows_last_20_lines_and_log(
    mirror_dir: Path, wolf_env: dict[str, Path], tmp_path: Path
) -> None:
    broken = tmp_path / "ib"
    shutil.copytree(tree(mirror_dir), broken, symlinks=True)
    makefile = broken / "Makefile"  # OpenWrt's ImageBuilder Makefile, its image step failing
    text = makefile.read_text()
    assert "\n_call_image: staging_dir/host/.prereq-build\n" in text
    makefile.write_text(text.replace(
        "\n_call_image: staging_dir/host/.prereq-build\n",
        "\n_call_image: staging_dir/host/.prereq-build\n"
        "\tfor i in $$(seq 0 29); do echo line $$i; done; exit 2\n",
    ))  # fmt: skip
    with pytest.raises(CommandError) as e:
        build(Options(flavour="mbedtls", device=V1, imagebuilder=broken))
    details = e.value.details().splitlines()
    assert details[0].startswith("make image failed")
    tail = [ln for ln in details if ln.startswith("  | ")]
    assert len(tail) == 20 and tail[-1].startswith("  | make: *** [Makefile:")
    assert "  | line 29" in tail
    log = Path(details[-1].removeprefix("  full log: "))
    assert "line 0" in log.read_text()
    assert not list(wolf_env["store"].rglob("*.json"))


def test_device_not_in_release_and_not_in_imagebuilder(
    mirror_dir: Path, wolf_env: dict[str, Path], tmp_path: Path
) -> None:
    p = cli("--flavour", "mbedtls", "--device", V1, "--release", "snapshot")
    assert "release snapshot" in error_line(p)
    with pytest.raises(WolfError, match=r"is for ramips/mt76x8, the device needs ath79/generic"):
        build(Options(flavour="mbedtls", device=V1, imagebuilder=tree(mirror_dir, "ramips/mt76x8")))
    lacking = tmp_path / "ib"
    shutil.copytree(tree(mirror_dir), lacking, symlinks=True)
    info = (lacking / ".targetinfo").read_text()  # what `make info` lists the profiles from
    start = info.index(f"Target-Profile: DEVICE_{V1}\n")
    end = info.index("Target-Profile: ", start + 1)
    (lacking / ".targetinfo").write_text(info[:start] + info[end:])
    with pytest.raises(WolfError, match=rf"device {V1} is not in the ImageBuilder"):
        build(Options(flavour="mbedtls", device=V1, imagebuilder=lacking))


def test_imagebuilder_takes_packages_from_a_mirror_directory(
    mirror_dir: Path,
    standin_kit: Kit,
    openwrt_tree_25125: Path,
    wolf_env: dict[str, Path],
    tmp_path: Path,
) -> None:
    """A standalone ImageBuilder (as a buildroot's CONFIG_IB makes it: only its image's
    packages) that lacks the flavour's packages takes them from --mirror DIR laid out like
    downloads.openwrt.org: the ImageBuilder's own apk reads the repositories lines we write, and
    its repositories file is as it was afterwards. Oracle: apk's `make manifest` and the image."""
    from tests.standin import package_pack

    ib = tmp_path / "ib"
    shutil.copytree(tree(mirror_dir), ib, symlinks=True)
    feed = tmp_path / "mirror" / "releases" / "25.12.5" / "packages" / "mips_24kc" / "base"
    feed.mkdir(parents=True)
    moved = sorted(ib.glob("packages/libustream-wolfssl*.apk"))
    assert moved
    for f in moved:
        shutil.move(f, feed / f.name)
    for d in (ib / "packages", feed):
        package_pack.index(standin_kit.apk, d, standin_kit.key, openwrt_tree_25125, "mips_24kc")
    before = (ib / "repositories").read_bytes()
    args = ("--imagebuilder", str(ib), "--device", V1, "--flavour", "wolfssl", "--stock",
            "--no-report")  # fmt: skip
    assert "unknown packages: libustream-wolfssl" in error_line(cli(*args))
    p = cli(*args, "--mirror", str(tmp_path / "mirror"))
    assert p.returncode == 0, p.stderr[-3000:]
    assert (ib / "repositories").read_bytes() == before
    [rec] = [
        json.loads(f.read_text())["data"] for f in (wolf_env["store"] / "build").glob("*.json")
    ]
    assert rec["manifest"].get("libustream-wolfssl"), rec["manifest"]
    assert any(str(feed) in n for n in rec["notes"]), rec["notes"]
    root = next(a["path"] for a in rec["artifacts"] if a["name"] == "root.squashfs")
    assert "/lib/libustream-ssl.so" in unsquashfs_list(Path(root))


def test_disk_full_is_one_line(mirror_dir: Path, tmp_path: Path) -> None:
    # a 1 MiB tmpfs as the cache, in a private mount namespace (a killed run leaves no mount
    # on the host): unpacking the ImageBuilder runs out of space
    need_tools("unshare", "mount")
    if subprocess.run(["unshare", "-m", "true"], capture_output=True, timeout=30).returncode:
        unavailable("cannot make a mount namespace here (unshare -m needs root)")
    small = tmp_path / "small"
    small.mkdir()
    cmd = shlex.join([sys.executable, "-m", "invoke", "build", "--flavour", "mbedtls",
                      "--device", V1, "--mirror", str(mirror_dir)])  # fmt: skip
    p = subprocess.run(
        ["unshare", "-m", "sh", "-c",
         f"mount -t tmpfs -o size=1m tmpfs {shlex.quote(str(small))} && exec {cmd}"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "OPENWRT_WOLF_CACHE": str(small),
             "OPENWRT_WOLF_STORE": str(tmp_path / "s")},
    )  # fmt: skip
    line = error_line(p)
    assert "disk full while writing" in line and "OPENWRT_WOLF_CACHE" in line
    assert list(small.iterdir()) == []  # the tmpfs was the namespace's alone


# --- check-size, kill and resume ---------------------------------------------------------


def test_check_size_warning_and_deletion(
    mirror_dir: Path, wolf_env: dict[str, Path], tmp_path: Path
) -> None:
    files = tmp_path / "files"
    (files / "root").mkdir(parents=True)
    (files / "root" / "blob").write_bytes(os.urandom(27 * 512 * 1024))
    outs = build(
        Options(flavour="mbedtls", device=AR300, imagebuilder=tree(mirror_dir), files=files)
    )
    rec = outs[0].record
    assert rec.image_deleted and rec.fit.verdict == "TOO_BIG"
    (warning,) = rec.openwrt_warnings
    m = re.match(r"WARNING: Image file (\S+) is too big: (\d+) > (\d+)$", warning)
    assert m, warning
    assert int(m.group(3)) == 16000 * 1024  # IMAGE_SIZE 16000k (openwrt-facts.md)
    # the record keeps the image's name (the path is the build machine's); check-size's
    # rm left no such file in the output
    assert "/" not in m.group(1) and m.group(1).endswith("-squashfs-sysupgrade.bin")
    assert not list(Path(rec.artifacts[0].path).parent.glob(m.group(1)))
    assert rec.fit.checked_size == int(m.group(2))


def _store_files(store: Path) -> list[Path]:
    return list(store.rglob("*.json")) + list(store.rglob("*.tmp"))


def slow_checksums(ib: Path) -> None:
    """In a copy of the ImageBuilder: its checksum step (the last of `make image`) first sleeps
    $STANDIN_IMAGE_DELAY seconds, so a test can interrupt a build that is surely running."""
    makefile = ib / "Makefile"
    text = makefile.read_text()
    step = "\t@echo Calculating checksums...\n"
    assert step in text
    makefile.write_text(text.replace(step, step + "\t@sleep $${STANDIN_IMAGE_DELAY:-0}\n"))


def test_killed_build_leaves_no_record_and_restarts(
    mirror_dir: Path, wolf_env: dict[str, Path], tmp_path: Path
) -> None:
    ib = tmp_path / "ib"
    shutil.copytree(tree(mirror_dir), ib, symlinks=True)
    slow_checksums(ib)
    args = [
        sys.executable,
        "-m",
        "invoke",
        "build",
        "--flavour",
        "wolfssl",
        "--device",
        V1,
        "--imagebuilder",
        str(ib),
        "--stock",
    ]
    env = {**os.environ, "STANDIN_IMAGE_DELAY": "60"}
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if "Calculating checksums..." in line:  # make image is nearly done
            break
    proc.send_signal(signal.SIGTERM)
    rest = proc.communicate(timeout=60)[1]
    assert proc.returncode == 143, "".join(seen) + rest
    assert "error: interrupted by SIGTERM" in rest
    assert _store_files(wolf_env["store"]) == []
    # make and its children are gone: nothing runs in the ImageBuilder any more
    with contextlib.suppress(FileNotFoundError):
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                with contextlib.suppress(OSError):
                    assert not os.readlink(f"/proc/{pid}/cwd").startswith(str(ib))
    start = time.time()
    outs = build(Options(flavour="wolfssl", device=V1, imagebuilder=ib, stock=True))
    rec = outs[0].record
    assert not outs[0].cached and rec.fit.verdict == "FITS"
    img = _image(outs[0])
    assert img.stat().st_mtime >= start - 1
    assert not (Path(rec.log).parent / "bin.partial").exists()
    assert [p.name for p in _store_files(wolf_env["store"])] == [f"{outs[0].job.key}.json"]


def check_force_rebuilds(matrix: Any, mirror_dir: Path) -> None:
    outs = matrix[0]
    first = outs[f"{V3}/mbedtls"]
    # offline: the request names the cached ImageBuilder's sha256, as the matrix's did
    opts = Options(flavour="mbedtls", device=V3, mirror="http://127.0.0.1:9")
    assert build(opts)[0].cached
    again = build(Options(**{**opts.__dict__, "force": True}))[0]
    assert not again.cached and again.record.key == first.record.key
    assert again.record.image().sha256 == sha256(_image(again))  # type: ignore[union-attr]
    # a record whose files were deleted is not served from the store: it is built again
    _image(again).unlink()
    third = build(opts)[0]
    assert not third.cached and _image(third).is_file()


# One test per check of the matrix, in this order (the last two build again: a store hit,
# then --force and a deleted image); one xdist group, so the 9 builds run once.
_MATRIX_CHECKS: dict[str, Any] = {
    "every_flavour_and_device": lambda m, t, mirror: check_every_flavour_and_device(m),
    **{
        f"kept_image-{device}-{flavour}": (
            lambda m, t, mirror, d=device, f=flavour: check_kept_image(m, d, f)
        )
        for device in (V1, AR300, V3)
        for flavour in ("mbedtls", "wolfssl")
    },
    "uimage_kernel_checked_with_mkimage": (
        lambda m, t, mirror: check_uimage_kernel_checked_with_mkimage(m, t)
    ),
    "flavours_install_their_tls_library": (
        lambda m, t, mirror: check_flavours_install_their_tls_library(m)
    ),
    "wolfssl_is_the_patch_sets_image": lambda m, t, mirror: check_wolfssl_is_the_patch_sets_image(
        m
    ),
    "sdk_packages_beside_the_images_are_a_feed": (
        lambda m, t, mirror: check_sdk_packages_beside_the_images_are_a_feed(m)
    ),
    "openssl_overflows_the_wr902ac_v1_and_is_deleted": (
        lambda m, t, mirror: check_openssl_overflows_the_wr902ac_v1_and_is_deleted(m)
    ),
    "record_is_complete": lambda m, t, mirror: check_record_is_complete(m),
    "abi_names_through_manifest_rootfs_and_router_check": (
        lambda m, t, mirror: check_abi_names_through_manifest_rootfs_and_router_check(m, t)
    ),
    "size_report_reads_the_build_records": (
        lambda m, t, mirror: check_size_report_reads_the_build_records(m)
    ),
    "size_report_takes_the_patch_sets_image": (
        lambda m, t, mirror: check_size_report_takes_the_patch_sets_image(m)
    ),
    "second_run_is_served_from_the_store_without_make": (
        lambda m, t, mirror: check_second_run_is_served_from_the_store_without_make(m, t)
    ),
    "force_rebuilds": lambda m, t, mirror: check_force_rebuilds(m, mirror),
}


@pytest.mark.xdist_group("build-matrix")
@pytest.mark.parametrize("check", list(_MATRIX_CHECKS))
def test_matrix_3_flavours_x_3_devices(
    check: str, matrix: Any, mirror_dir: Path, tmp_path: Path
) -> None:
    """9 builds over HTTP, -j 2 (built once for all its checks)."""
    _MATRIX_CHECKS[check](matrix, tmp_path, mirror_dir)


# --- archive names and the pinned hash (no network) --------------------------------------


def test_standin_packages_are_openwrts_formats(
    mirror_dir: Path, openwrt_tree_25125: Path, tmp_path: Path
) -> None:
    """The 25.12.5 stand-in's packages/ as a 25.12 ImageBuilder holds it: APK v3 (ADB) packages
    apk reads, packages.adb signed with the test's key (apk verify accepts it with that key
    and refuses it without), index.json in format 2, and names with the ABI suffix the tree's
    Makefiles give (ABI_VERSION:=21 in package/libs/mbedtls, 20201210 in ustream-ssl)."""
    ib = tree(mirror_dir)
    pkgdir = ib / "packages"
    apk = ib / "staging_dir" / "host" / "bin" / "apk"
    for f in sorted(pkgdir.glob("*.apk")):
        assert f.read_bytes()[:4] == b"ADBd", f.name  # ADB, deflate-compressed
        dump = subprocess.run([str(apk), "adbdump", "--format", "json", str(f)],
                              capture_output=True, text=True, check=True, timeout=60)  # fmt: skip
        info = json.loads(dump.stdout)["info"]
        assert f.name == f"{info['name']}-{info['version']}.apk"
    ok = subprocess.run([str(apk), "verify", "--keys-dir", str(ib / "keys"), "packages.adb"],
                        cwd=pkgdir, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert ok.returncode == 0, ok.stdout + ok.stderr
    (tmp_path / "keys").mkdir()
    argv = [str(apk), "verify", "--keys-dir", str(tmp_path / "keys"), "packages.adb"]
    bad = subprocess.run(argv, cwd=pkgdir, capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0
    v2 = json.loads((pkgdir / "index.json").read_text())
    assert v2["version"] == 2 and v2["architecture"] == "mips_24kc"
    abi = {}
    for rel, name in (("package/libs/mbedtls", "libmbedtls"),
                      ("package/libs/ustream-ssl", "libustream-mbedtls")):  # fmt: skip
        m = re.search(
            r"^\s*ABI_VERSION:=(\d+)$", (openwrt_tree_25125 / rel / "Makefile").read_text(), re.M
        )
        assert m, rel
        abi[name] = m.group(1)
        assert name in v2["packages"]  # index.json names it without the suffix
        assert len(list(pkgdir.glob(f"{name}{m.group(1)}-*.apk"))) == 1, name
    assert abi == {"libmbedtls": "21", "libustream-mbedtls": "20201210"}


def test_archive_names_follow_openwrts_download_tree() -> None:
    ib = download.name_pattern("imagebuilder", "25.12.5", "ath79/generic")
    assert ib.match("openwrt-imagebuilder-25.12.5-ath79-generic.Linux-x86_64.tar.zst")
    assert not ib.match("openwrt-imagebuilder-25.12.5-ath79-nand.Linux-x86_64.tar.zst")
    old = download.name_pattern("imagebuilder", "24.10.8", "ramips/mt76x8")
    assert old.match("openwrt-imagebuilder-24.10.8-ramips-mt76x8.Linux-x86_64.tar.zst")
    snap = download.name_pattern("imagebuilder", "snapshot", "malta/be")
    assert snap.match("openwrt-imagebuilder-malta-be.Linux-x86_64.tar.zst")
    sdk = download.name_pattern("sdk", "25.12.5", "ath79/generic")
    assert sdk.match("openwrt-sdk-25.12.5-ath79-generic_gcc-14.3.0_musl.Linux-x86_64.tar.zst")
    src = download.Source(None)
    assert src.target_dir("25.12.5", "ath79/generic") == (
        "https://downloads.openwrt.org/releases/25.12.5/targets/ath79/generic"
    )


def test_official_server_must_serve_the_published_hash(monkeypatch: pytest.MonkeyPatch) -> None:
    name = "openwrt-imagebuilder-25.12.5-ath79-generic.Linux-x86_64.tar.zst"
    published = "9d0e459880c42e90ff461b8c5e243454f1ed6ccd047de1f3ef5fefa3323c57a3"  # facts

    def sums(digest: str) -> Any:
        return lambda self, where: f"{digest} *{name}\n{'1' * 64} *profiles.json\n"

    monkeypatch.setattr(download.Source, "read_text", sums(published))
    a = download.resolve("imagebuilder", "25.12.5", "ath79/generic", download.Source(None))
    assert (a.name, a.sha256, a.pinned) == (name, published, True)
    assert a.url.endswith(f"/releases/25.12.5/targets/ath79/generic/{name}")
    monkeypatch.setattr(download.Source, "read_text", sums("2" * 64))
    with pytest.raises(WolfError, match="OpenWrt published 9d0e4598"):
        download.resolve("imagebuilder", "25.12.5", "ath79/generic", download.Source(None))
    # a mirror's own sha256sums is what its files are checked against
    m = download.resolve("imagebuilder", "25.12.5", "ath79/generic", download.Source("/srv/m"))
    assert m.sha256 == "2" * 64 and m.url.startswith("/srv/m/releases/25.12.5/")


def test_build_config_prints_the_renderings(mirror_dir: Path, wolf_env: dict[str, Path]) -> None:
    def run(*args: str) -> str:
        p = subprocess.run(
            [sys.executable, "-m", "invoke", "build-config", "--flavour", "wolfssl", *args],
            cwd=ROOT, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert p.returncode == 0, p.stderr
        return p.stdout

    # the TL-WR902AC v1 recipe removes nothing TLS-related; its defaults come from `make info`
    ib = run("--device", V1, "--imagebuilder", str(tree(mirror_dir)))
    assert ib.split() == [
        "-libustream-mbedtls", "-wpad-basic-mbedtls", "libustream-wolfssl", "wpad-basic-wolfssl",
    ]  # fmt: skip
    cfg = run("--device", V3, "--what", "diffconfig")
    assert "CONFIG_TARGET_ramips_mt76x8_DEVICE_tplink_tl-wr902ac-v3=y" in cfg
    assert run("--device", V3, "--what", "feeds", "--feed", "/srv/feed").endswith(
        "src-link wolf /srv/feed\n"
    )


# --- the sdk backend: our local feed's packages into the ImageBuilder ---------------------

FEED = Path(__file__).resolve().parents[1] / "standin" / "feed"


def test_sdk_local_feed_package_needs_openwrts_feeds(
    mirror_dir: Path, wolf_env: dict[str, Path]
) -> None:
    """luci-ssl-wolfssl (feeds/wolf) builds against OpenWrt's LuCI feed (luci.mk), which the
    SDK's scripts/feeds clones from git.openwrt.org: out of reach here, one line naming it and
    what works without it, after the SDK's own feeds update tried (its command recorded)."""
    with serve(mirror_dir) as (url, srv):
        p = cli("--flavour", "wolfssl", "--device", AR300, "--mirror", url, "--luci-https",
                "--feed", str(FEED))  # fmt: skip
    line = error_line(p)
    assert p.returncode == 2 and "SDK feeds update failed" in line, p.stderr[-3000:]
    assert "luci-ssl-wolfssl needs OpenWrt's feeds from git.openwrt.org" in line
    assert "--backend imagebuilder --luci-https" in line
    # OpenWrt's own scripts/feeds ran on a feeds.conf with the release's feeds and ours
    conf = next(wolf_env["cache"].glob("sdk/*/*/*/feeds.conf")).read_text()
    assert "src-git luci https://git.openwrt.org/project/luci.git^" in conf
    assert f"src-link wolf {FEED.resolve()}" in conf
    assert any(p.endswith("_musl.Linux-x86_64.tar.zst") for p, _ in srv.requests)
    assert _store_files(wolf_env["store"]) == []


def test_sdk_request_follows_the_feed_and_imagebuilder_fallback(
    mirror_dir: Path, tmp_path: Path
) -> None:
    m = str(mirror_dir)  # the request names the SDK's and ImageBuilder's sha256: read there
    feed = tmp_path / "feed"
    shutil.copytree(FEED, feed)
    a = plan(Options(flavour="wolfssl", device=V1, luci_https=True, feed=feed, mirror=m))[0]
    (feed / "luci-ssl-wolfssl" / "Makefile").write_text(
        (feed / "luci-ssl-wolfssl" / "Makefile").read_text() + "# changed\n"
    )
    b = plan(Options(flavour="wolfssl", device=V1, luci_https=True, feed=feed, mirror=m))[0]
    assert a.request.backend == "sdk" and a.key != b.key
    ib = plan(
        Options(flavour="wolfssl", device=V1, luci_https=True, backend="imagebuilder", mirror=m)
    )[0]
    assert ib.request.patch_set == "none"
    assert {"luci-light", "uhttpd", "px5g-wolfssl"} <= set(ib.request.packages)
    assert plan(Options(flavour="mbedtls", device=V1, luci_https=True, mirror=m))[
        0
    ].request.backend == ("imagebuilder")
    with pytest.raises(WolfError, match=r"local feed .* does not exist"):
        plan(
            Options(flavour="wolfssl", device=V1, luci_https=True, feed=tmp_path / "none", mirror=m)
        )


def test_sdk_package_missing_from_the_feed(mirror_dir: Path, wolf_env: dict[str, Path],
                                           tmp_path: Path) -> None:  # fmt: skip
    empty = tmp_path / "feed"
    (empty / "other").mkdir(parents=True)
    (empty / "other" / "Makefile").write_text("PKG_NAME:=other\n")
    with pytest.raises(WolfError, match="package luci-ssl-wolfssl is not in the local feed"):
        build(Options(flavour="wolfssl", device=AR300, mirror=str(mirror_dir), luci_https=True,
                      feed=empty))  # fmt: skip


# --- the --files overlay (issue 32): what OpenWrt's prepare_rootfs does with it -------------


def _overlay(top: Path, **entries: str) -> Path:
    """An overlay of files (text), and of links (``->target``) and FIFOs (``|``)."""
    for rel, what in entries.items():
        p = top / rel.replace("__", "/")
        p.parent.mkdir(parents=True, exist_ok=True)
        if what.startswith("->"):
            p.symlink_to(what[2:])
        elif what == "|":
            os.mkfifo(p)
        else:
            p.write_text(what)
    return top


def _sysupgrade_list(store: Path) -> list[str]:
    """The files of the image the store's one build record names (Debian's unsquashfs)."""
    (rec,) = [json.loads(p.read_text()) for p in store.glob("build/*.json")]
    (img,) = [a for a in rec["data"]["artifacts"] if a["type"] == "rootfs"]
    return unsquashfs_list(Path(img["path"]))


def test_files_link_out_of_the_overlay_is_refused(
    mirror_dir: Path, wolf_env: dict[str, Path], tmp_path: Path
) -> None:
    # prepare_rootfs copies FILES over the rootfs and then enables the init scripts there:
    # through etc/rc.d -> a host directory, OpenWrt's rc.common wrote S19dropbear into it
    victim = tmp_path / "victim"
    victim.mkdir()
    ov = _overlay(tmp_path / "ov", etc__rc__d=f"->{victim}")
    ov_rel = _overlay(tmp_path / "ov-rel", etc__rc__d="->" + "../" * 12 + str(victim)[1:])
    for o in (ov, ov_rel):
        p = cli("-f", "mbedtls", "-d", V1, "--imagebuilder", str(tree(mirror_dir)),
                "--no-report", "--files", str(o))  # fmt: skip
        assert "out of the overlay" in error_line(p)
        assert "$ " not in p.stderr  # before any make
    assert list(victim.iterdir()) == []


@pytest.mark.parametrize("kind", ["FIFO", "a regular file", "missing"])
def test_files_special_or_not_a_directory_is_refused(
    kind: str, mirror_dir: Path, wolf_env: dict[str, Path], tmp_path: Path
) -> None:
    # a FIFO where post-install scripts append (etc/group) waits for a reader; FILES that is
    # no directory was skipped by the ImageBuilder (`if [ -d ]`): a build without it, exit 0
    if kind == "FIFO":
        files = _overlay(tmp_path / "ov", etc__group="|")
    else:
        files = tmp_path / "files"
        if kind == "a regular file":
            files.write_text("etc/banner\n")
    p = cli("-f", "mbedtls", "-d", V1, "--imagebuilder", str(tree(mirror_dir)), "--no-report",
            "--files", str(files))  # fmt: skip
    assert "--files" in error_line(p)
    assert not list(wolf_env["store"].rglob("*.json"))


def test_files_overlay_is_part_of_the_request(
    mirror_dir: Path, wolf_env: dict[str, Path], tmp_path: Path
) -> None:
    # the request had no field for the overlay: a second build with other files was "cached"
    # and gave back the first one's image
    ib = str(tree(mirror_dir))
    a = _overlay(tmp_path / "a", etc__wolf_a="a\n", etc__localtime="->../usr/share/zone/UTC")
    b = _overlay(tmp_path / "b", etc__wolf_b="b\n")
    listed = {}
    for ov, name in ((a, "/etc/wolf_a"), (b, "/etc/wolf_b")):
        shutil.rmtree(wolf_env["store"], ignore_errors=True)  # the cache's record stays
        p = cli("-f", "mbedtls", "-d", V1, "--imagebuilder", ib, "--no-report", "--files",
                str(ov))  # fmt: skip
        assert p.returncode == 0, p.stderr[-3000:]
        assert "make image" in p.stderr  # built, not given back from the cache
        listed[name] = _sysupgrade_list(wolf_env["store"])
    assert "/etc/wolf_a" in listed["/etc/wolf_a"] and "/etc/wolf_b" not in listed["/etc/wolf_a"]
    assert "/etc/wolf_b" in listed["/etc/wolf_b"] and "/etc/wolf_a" not in listed["/etc/wolf_b"]
    assert "/etc/localtime" in listed["/etc/wolf_a"]  # a link inside the overlay is taken


def test_overlay_digest_sees_what_the_imagebuilder_copies(tmp_path: Path) -> None:
    from openwrt_wolf.build.jobs import overlay_digest

    ov = _overlay(tmp_path / "ov", etc__a="1", etc__l="->a")
    first = overlay_digest(ov)
    (ov / "etc" / "a").write_text("2")
    second = overlay_digest(ov)
    (ov / "etc" / "l").unlink()
    (ov / "etc" / "l").symlink_to("b")
    third = overlay_digest(ov)
    (ov / "etc" / "a").chmod(0o755)
    assert len({first, second, third, overlay_digest(ov)}) == 4
    big = ov / "big"
    with big.open("wb") as fh:
        fh.truncate(20 << 30)  # refused from its size, never read
    with pytest.raises(WolfError, match="more than 1 GiB"):
        overlay_digest(ov)


def test_overlay_digest_of_a_deep_tree(tmp_path: Path) -> None:
    # os.walk recurses: an overlay 1,100 folders deep was a RecursionError (a traceback)
    from openwrt_wolf.build.jobs import overlay_digest

    p = tmp_path / "ov"
    p.mkdir()
    try:
        os.chdir(p)  # each mkdir relative, as the path grows past what one call may take
        for _ in range(1100):
            os.mkdir("d")
            os.chdir("d")
        Path("f").write_text("deep")
        os.chdir(ROOT)
        assert len(overlay_digest(p)) == 64
    finally:  # pytest removes old temporary folders with shutil.rmtree, which recurses too
        os.chdir(ROOT)
        subprocess.run(["rm", "-rf", str(p)], check=True, timeout=300)

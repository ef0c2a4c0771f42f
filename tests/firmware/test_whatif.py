"""`invoke what-if`: a flavour's rootfs and fit predicted from another flavour's image, checked
against the real build of that flavour. The stand-in ImageBuilder (tests/standin/) makes every
image the way OpenWrt does: root.squashfs by OpenWrt's mksquashfs4 with include/image.mk's
options, sysupgrade.bin and factory.bin by the device's own recipe and OpenWrt's tools (which
delete what does not fit). The oracles are that build's files: the real rootfs's size (stat,
and Debian's unsquashfs -s), its file list (unsquashfs4 -lls), and which images OpenWrt kept.
PACKAGES for each flavour are written out here, as a user passes them to `make image`."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from openwrt_wolf import locks, paths
from openwrt_wolf.errors import WolfError
from openwrt_wolf.firmware import pkgsource, whatif
from openwrt_wolf.host.openwrt_tools import OpenWrtTools
from tests.conftest import need_tools, preparing
from tests.standin import make_standin

ROOT = Path(__file__).resolve().parents[2]
V1, AR300, V3 = "tplink_tl-wr902ac-v1", "glinet_gl-ar300m16", "tplink_tl-wr902ac-v3"
# PACKAGES as a release engineer writes them for each flavour on 25.12.5 (the ImageBuilder's
# own "-pkg pkg" syntax; wolfSSL keeps apk-mbedtls: apk has no wolfSSL backend)
PACKAGES = {
    "mbedtls": "",
    "wolfssl": "-libustream-mbedtls libustream-wolfssl -wpad-basic-mbedtls wpad-basic-wolfssl",
    "openssl": "-libustream-mbedtls libustream-openssl -wpad-basic-mbedtls wpad-basic-openssl "
    "-apk-mbedtls apk-openssl",
    # LuCI over HTTPS: luci-ssl (Mbed TLS); OpenWrt has no luci-ssl-wolfssl
    "mbedtls+luci": "luci-ssl",
    "wolfssl+luci": "-libustream-mbedtls libustream-wolfssl -wpad-basic-mbedtls "
    "wpad-basic-wolfssl luci-light uhttpd px5g-wolfssl",
}  # fmt: skip


@dataclass(frozen=True)
class Built:
    flavour: str
    profile: str
    bin_dir: Path  # what `make image` left in BIN_DIR
    rootfs: Path  # $(KDIR)/root.squashfs of that build (kept even when images are deleted)
    packages: Path  # the ImageBuilder's packages/

    def image(self, kind: str) -> Path | None:
        found = sorted(self.bin_dir.glob(f"*-{self.profile}-squashfs-{kind}.bin"))
        return found[0] if found else None


ATH79, MT76X8 = "ath79/generic", "ramips/mt76x8"
BUILDS = [(ATH79, V1, f) for f in ("mbedtls", "wolfssl", "openssl")]
BUILDS += [(ATH79, AR300, "mbedtls+luci"), (ATH79, AR300, "wolfssl+luci")]
BUILDS += [(MT76X8, V3, "mbedtls"), (MT76X8, V3, "openssl")]


def _ib(top: Path, target: str) -> Path:
    return top / f"openwrt-imagebuilder-25.12.5-{target.replace('/', '-')}.Linux-x86_64"


def _build_lab(top: Path, tree: Path, tools: OpenWrtTools) -> None:
    for target in (ATH79, MT76X8):
        ib = make_standin.make_tree(top, target, tree=tree, tools=tools)
        kdir = next(ib.glob("build_dir/target-*_musl/linux-*"))
        for t, profile, flavour in BUILDS:
            if t != target:
                continue
            p = subprocess.run(
                ["make", "-C", str(ib), "image", f"PROFILE={profile}",
                 f"PACKAGES={PACKAGES[flavour]}", f"BIN_DIR={top / f'bin-{profile}-{flavour}'}"],
                capture_output=True, text=True, timeout=600,
            )  # fmt: skip
            assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
            shutil.copyfile(kdir / "root.squashfs", top / f"root-{profile}-{flavour}.squashfs")
    (top / ".done").write_text("")


@pytest.fixture(scope="module")
def lab(
    tmp_path_factory: pytest.TempPathFactory, openwrt_tree_25125: Path, openwrt_tools: OpenWrtTools
) -> dict[tuple[str, str], Built]:
    return make_lab(tmp_path_factory, openwrt_tree_25125, openwrt_tools)


def make_lab(
    tmp_path_factory: pytest.TempPathFactory, openwrt_tree_25125: Path, openwrt_tools: OpenWrtTools
) -> dict[tuple[str, str], Built]:
    """Stand-in ImageBuilders for ath79/generic and ramips/mt76x8 and their builds: the
    TL-WR902AC v1 in three flavours, the GL-AR300M16 with LuCI over HTTPS in two, the
    TL-WR902AC v3 (tplink-v2, 1 MiB squashfs blocks) in two. Made once per session, shared by
    the xdist workers (their temporary directories have one parent)."""
    need_tools("make", "unsquashfs")
    top = tmp_path_factory.getbasetemp().parent / "whatif-lab"
    with locks.locked(top.with_suffix(".lock")):
        if not (top / ".done").is_file():
            shutil.rmtree(top, ignore_errors=True)
            top.mkdir()
            with preparing("stand-in ImageBuilder builds for what-if (1 to 4 min)"):
                _build_lab(top, openwrt_tree_25125, openwrt_tools)
    return {
        (profile, flavour): Built(flavour, profile, top / f"bin-{profile}-{flavour}",
                                  top / f"root-{profile}-{flavour}.squashfs",
                                  _ib(top, target) / "packages")
        for target, profile, flavour in BUILDS
    }  # fmt: skip


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "invoke", "what-if", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, **(env or {})},
    )  # fmt: skip


def lls(tools: OpenWrtTools, squashfs: Path) -> list[str]:
    """unsquashfs4 -lls: type, mode, owner, size (or device numbers), time and path of
    every entry, as OpenWrt's own unsquashfs lists them."""
    out = subprocess.run(
        [str(tools.unsquashfs4), "-lls", "-UTC", "-full-precision", str(squashfs)],
        capture_output=True, text=True, check=True, timeout=120,
    ).stdout  # fmt: skip
    rows = [ln for ln in out.splitlines() if ln.startswith(("d", "-", "l", "c", "b", "p", "s"))]
    assert len(rows) > 20, out
    return rows


def debian_size(squashfs: Path) -> int:
    out = subprocess.run(
        ["unsquashfs", "-s", str(squashfs)], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    m = re.search(r"Filesystem size (\d+) bytes", out)
    assert m, out
    return int(m.group(1))


def run_whatif(tmp: Path, src: Built, to: str, *how: str) -> tuple[dict[str, Any], Path]:
    out = tmp / f"predicted-{src.profile}-{src.flavour}-to-{to}.squashfs"
    args = list(how) or ["--from", str(src.bin_dir)]
    p = cli(*args, "--flavour", to, "--packages", str(src.packages),
            "--store", str(tmp / "store"), "--output", str(out), "--json")  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout)["what_if"], out


# --- the prediction against the real build of the flavour ---------------------------------

PAIRS = [
    (V1, "mbedtls", "wolfssl", "dir"),
    (V1, "mbedtls", "openssl", "image"),
    (V1, "wolfssl", "mbedtls", "image"),
    (V1, "wolfssl", "openssl", "dir"),
    (V3, "mbedtls", "openssl", "image"),
    (V3, "openssl", "mbedtls", "dir"),
]


@pytest.mark.parametrize(("profile", "frm", "to", "how"), PAIRS)
def test_prediction_matches_real_build(
    lab: dict[tuple[str, str], Built],
    openwrt_tools: OpenWrtTools,
    tmp_path: Path,
    profile: str,
    frm: str,
    to: str,
    how: str,
) -> None:
    src, real = lab[(profile, frm)], lab[(profile, to)]
    img = src.image("sysupgrade")
    assert img is not None
    args = ["--image", str(img)] if how == "image" else ["--from", str(src.bin_dir)]
    w, predicted = run_whatif(tmp_path, src, to, *args)
    assert (w["flavour_from"], w["flavour_to"]) == (frm, to)
    # the independent measure of the real build: its root.squashfs on disk and Debian's unsquashfs
    real_size = real.rootfs.stat().st_size
    assert debian_size(real.rootfs) == real_size
    error = w["rootfs_to"] - real_size
    print(f"what-if {profile} {frm}->{to} ({how}): predicted {w['rootfs_to']:,} B, "
          f"real {real_size:,} B, error {error:+,} B")  # fmt: skip
    assert abs(error) <= real_size // 100
    assert predicted.stat().st_size == w["rootfs_to"]
    assert lls(openwrt_tools, predicted) == lls(openwrt_tools, real.rootfs)
    assert w["rootfs_from"] == src.rootfs.stat().st_size


def test_verdicts_match_what_openwrt_kept(
    lab: dict[tuple[str, str], Built], tmp_path: Path
) -> None:
    """TL-WR902AC v1: OpenSSL must not fit. The oracle is which images OpenWrt's own tools
    (tplink-safeloader, check-size) left in BIN_DIR for the real builds."""
    pairs = [(V1, "mbedtls", "openssl"), (V1, "mbedtls", "wolfssl"), (V1, "wolfssl", "mbedtls")]
    pairs += [(V3, "mbedtls", "openssl"), (V3, "openssl", "mbedtls")]
    for profile, frm, to in pairs:
        w, _ = run_whatif(tmp_path, lab[(profile, frm)], to)
        real = lab[(profile, to)]
        factory = w["fit_to"]["factory"]
        kept_sys, kept_fac = real.image("sysupgrade"), real.image(factory["name"][:-4])
        assert (w["fit_to"]["verdict"] == "FITS") == (kept_sys is not None), (frm, to)
        assert (factory["verdict"] == "FITS") == (kept_fac is not None), (frm, to)
        if kept_sys is not None:
            # the predicted file: checked size + the source image's metadata trailer
            assert w["fit_to"]["final_size"] == kept_sys.stat().st_size
    w, _ = run_whatif(tmp_path, lab[(V1, "mbedtls")], "openssl")
    assert w["fit_to"]["verdict"] == "TOO_BIG"
    assert w["fit_to"]["rootfs_room"] < 0


def test_luci_https_follows_the_flavour(
    lab: dict[tuple[str, str], Built], openwrt_tools: OpenWrtTools, tmp_path: Path
) -> None:
    """GL-AR300M16 with luci-ssl (Mbed TLS) -> wolfSSL: luci-light, uhttpd and px5g-wolfssl
    instead (data/flavours.toml luci_https), as the wolfSSL build with LuCI has them."""
    src, real = lab[(AR300, "mbedtls+luci")], lab[(AR300, "wolfssl+luci")]
    w, predicted = run_whatif(tmp_path, src, "wolfssl")
    assert "luci-ssl" in w["removed"] and "px5g-wolfssl" in w["added"]
    manifest = sorted(real.bin_dir.glob("*.manifest"))[0].read_text()
    names = {ln.split(" - ")[0] for ln in manifest.splitlines()}
    before = {ln.split(" - ")[0] for ln in sorted(src.bin_dir.glob("*.manifest"))[0]
              .read_text().splitlines()}  # fmt: skip
    assert before - set(w["removed"]) | set(w["added"]) == names
    error = w["rootfs_to"] - real.rootfs.stat().st_size
    print(f"what-if {AR300} mbedtls+luci-ssl->wolfssl: error {error:+,} B")
    assert abs(error) <= real.rootfs.stat().st_size // 100
    assert lls(openwrt_tools, predicted) == lls(openwrt_tools, real.rootfs)


def test_tree_options_are_what_whatif_passes(openwrt_tree_25125: Path) -> None:
    """mksquashfs4's options: the v25.12.5 tree's include/image.mk and Config-images.in."""
    mk = (openwrt_tree_25125 / "include/image.mk").read_text()
    recipe = re.search(r"define Image/mkfs/squashfs-common\n(.*?)\nendef", mk, re.S)
    assert recipe
    assert " ".join(whatif.MKSQUASHFS_OPTIONS[:3]) in recipe[1]
    lzma = re.search(r"^LZMA_XZ_OPTIONS := (.*)$", mk, re.M)
    assert lzma and whatif.MKSQUASHFS_OPTIONS[3:] == ("-comp", "xz", *lzma[1].split())
    assert "SQUASHFSOPT += -p '/dev d 755 0 0' -p '/dev/console c 600 0 0 5 1'" in mk
    assert "$(if $(CONFIG_SELINUX),-xattrs,-no-xattrs)" in mk
    cfg = (openwrt_tree_25125 / "config/Config-images.in").read_text()
    for opt, sym in (("-block-readers", "BLOCK_READERS"), ("-small-readers", "SMALL_READERS")):
        m = re.search(rf"config TARGET_SQUASHFS_{sym}\n(?:\t\t\t.*\n)*?\t\t\tdefault (\d+)", cfg)
        assert m, sym
        tail = whatif.MKSQUASHFS_TAIL
        assert tail[tail.index(opt) + 1] == m[1]


# --- bad input: one line, exit 2, nothing left behind --------------------------------------


def test_bad_inputs(lab: dict[tuple[str, str], Built], tmp_path: Path) -> None:
    pk = str(lab[(V1, "mbedtls")].packages)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x27\x05\x19\x56" + bytes(4000))  # a uImage magic and nothing else
    not_tar = tmp_path / "pk"  # the packages with libustream-openssl in APK v3 (ADB) form
    shutil.copytree(pk, not_tar)
    index = json.loads((not_tar / "index.json").read_text())
    adb = next(p["file"] for p in index if p["name"] == "libustream-openssl")
    (not_tar / adb).write_bytes(b"ADBd" + bytes(100))
    good_dir = str(lab[(V1, "mbedtls")].bin_dir)
    # a cache of its own (to see leftovers) that shares OpenWrt's tools, built once
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "openwrt-tools").symlink_to(paths.cache_dir() / "openwrt-tools")
    cases = {
        "not a squashfs image": (["--image", str(junk), "--flavour", "wolfssl", "--packages", pk],
                                 "junk.bin"),
        "/dev/zero": (["--image", "/dev/zero", "--flavour", "wolfssl", "--packages", pk],
                      "character device"),
        "FIFO": (["--image", str(fifo), "--flavour", "wolfssl", "--packages", pk], "FIFO"),
        "missing dir": (["--from", str(tmp_path / "nope"), "--flavour", "wolfssl",
                         "--packages", pk], "not found"),
        "unknown flavour": (["--from", good_dir, "--flavour", "gnutls", "--packages", pk],
                            "unknown flavour"),
        "no flavour": (["--from", good_dir, "--packages", pk], "--flavour"),
        "both inputs": (["--from", good_dir, "--image", str(junk), "--flavour", "wolfssl",
                         "--packages", pk], "one of them"),
        "no packages": (["--from", good_dir, "--flavour", "wolfssl"], "--packages"),
        "packages not a dir": (["--from", good_dir, "--flavour", "wolfssl", "--packages",
                                str(junk)], "packages directory not found"),
        "APK v3 package": (["--from", good_dir, "--flavour", "openssl", "--packages",
                            str(not_tar)], "not a tar archive"),
        "output dir missing": (["--from", good_dir, "--flavour", "wolfssl", "--packages", pk,
                                "--output", str(tmp_path / "no/such.squashfs")], "does not exist"),
    }  # fmt: skip
    for what, (args, says) in cases.items():
        p = cli(*args, "--store", str(tmp_path / "store"), env={"OPENWRT_WOLF_CACHE": str(cache)})
        errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
        assert p.returncode == 2, (what, p.stderr[-2000:])
        assert len(errors) == 1 and says in errors[0], (what, p.stderr[-2000:])
        assert "Traceback" not in p.stderr, what
    left = list((cache / "what-if").glob("run-*")) if (cache / "what-if").is_dir() else []
    assert left == []


# --- the swap itself, on a small index of our own ------------------------------------------


def _index(tmp: Path, spec: dict[str, list[str]]) -> pkgsource.Index:
    """name -> depends; each package one tar.gz with one file."""
    entries = []
    for name, deps in spec.items():
        with tarfile.open(tmp / f"{name}.apk", "w:gz") as tar:
            data = name.encode()
            info = tarfile.TarInfo(f"usr/share/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        entries.append({"name": name, "version": "1", "depends": deps, "file": f"{name}.apk"})
    (tmp / "index.json").write_text(json.dumps(entries))
    return pkgsource.load(tmp)


def test_plan_keeps_what_other_packages_need(tmp_path: Path) -> None:
    idx = _index(tmp_path, {
        "libmbedtls21": [], "libwolfssl": [], "libopenssl3": [],
        "libustream-mbedtls": ["libmbedtls21"], "libustream-wolfssl": ["libwolfssl"],
        "libustream-openssl": ["libopenssl3"], "apk-mbedtls": ["libmbedtls21"],
        "apk-openssl": ["libopenssl3"], "base-files": [],
    })  # fmt: skip
    have = {"base-files", "libustream-mbedtls", "libmbedtls21", "apk-mbedtls"}
    assert whatif.detect_flavour(have, "25.12.5") == "mbedtls"
    # wolfSSL keeps apk-mbedtls on 25.12.5, so libmbedtls21 stays
    sw = whatif.plan(have, idx, "25.12.5", "mbedtls", "wolfssl")
    assert sw == whatif.Swap(("libustream-mbedtls",), ("libustream-wolfssl", "libwolfssl"))
    sw = whatif.plan(have, idx, "25.12.5", "mbedtls", "openssl")
    assert set(sw.removed) == {"libustream-mbedtls", "libmbedtls21", "apk-mbedtls"}
    assert set(sw.added) == {"libustream-openssl", "libopenssl3", "apk-openssl"}


def test_plan_refuses_a_conflict(tmp_path: Path) -> None:
    """A kept package that needs the old flavour's libustream: the new one conflicts."""
    spec = {"libmbedtls21": [], "libopenssl3": [], "libustream-mbedtls": ["libmbedtls21"],
            "libustream-openssl": ["libopenssl3"], "foo": ["libustream-mbedtls"]}  # fmt: skip
    idx = _index(tmp_path, spec)
    raw = json.loads((tmp_path / "index.json").read_text())
    for e in raw:
        if e["name"] == "libustream-openssl":
            e["conflicts"] = ["libustream-mbedtls"]
    (tmp_path / "index.json").write_text(json.dumps(raw))
    idx = pkgsource.load(tmp_path)
    have = {"foo", "libustream-mbedtls", "libmbedtls21"}
    with pytest.raises(WolfError, match=r"libustream-mbedtls \(needed by foo\), which conflict"):
        whatif.plan(have, idx, "25.12.5", "mbedtls", "openssl")

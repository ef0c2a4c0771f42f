"""`invoke what-if`: a flavour's rootfs and fit predicted from another flavour's image, checked
against the real build of that flavour. The stand-in 25.12.5 ImageBuilder (tests/standin/) is
OpenWrt's own Makefile with real apk-tools over APK v3 packages and packages.adb: apk installs,
include/rootfs.mk prepares the rootfs, include/image.mk packs it with OpenWrt's mksquashfs4, and
the device's own recipes and OpenWrt's tools make sysupgrade.bin and factory.bin (deleting what
does not fit). The oracles are that build's files: the real rootfs's bytes (cmp), its size
(stat, and Debian's unsquashfs -s), its file list (unsquashfs4 -lls), which images OpenWrt
kept, and apk's own reading of the packages (index.json by the tree's make-index-json.py,
`apk extract`). PACKAGES for each flavour are written out here, as a user passes them to
`make image`."""

from __future__ import annotations

import hashlib
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

from openwrt_wolf import paths
from openwrt_wolf.errors import WolfError
from openwrt_wolf.files import locks
from openwrt_wolf.host.openwrt_tools import OpenWrtTools
from openwrt_wolf.whatif import pkgsource, swap
from tests.conftest import free_port, need_tools, preparing, standin_ib
from tests.standin.kit import Kit

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


def _make_image(ib: Path, profile: str, flavour: str, bin_dir: Path, rootfs: Path) -> None:
    """`make image` with the flavour's PACKAGES; $(KDIR)/root.squashfs kept as rootfs (it stays
    when OpenWrt's tools delete an image that does not fit)."""
    p = subprocess.run(
        ["make", "-C", str(ib), "image", f"PROFILE={profile}", f"PACKAGES={PACKAGES[flavour]}",
         f"BIN_DIR={bin_dir}"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    shutil.copyfile(next(ib.glob("build_dir/target-*_musl/linux-*/root.squashfs")), rootfs)


def _build_lab(top: Path, mirror: Path) -> None:
    for target in (ATH79, MT76X8):
        # the run's stand-in ImageBuilder (tests/conftest.py standin_mirror), not one more
        # assembly of the same tree: a copy, as make image writes into it
        ib = _ib(top, target)
        shutil.copytree(standin_ib(mirror, target), ib, symlinks=True)
        for t, profile, flavour in BUILDS:
            if t == target:
                _make_image(ib, profile, flavour, top / f"bin-{profile}-{flavour}",
                            top / f"root-{profile}-{flavour}.squashfs")  # fmt: skip
    (top / ".done").write_text("")


def make_lab(
    tmp_path_factory: pytest.TempPathFactory, standin_mirror: Path
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
            with preparing("stand-in ImageBuilder builds for what-if (3 to 7 min)"):
                _build_lab(top, standin_mirror)
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
    assert error == 0  # docs/whatif.md: 0 B
    assert predicted.stat().st_size == w["rootfs_to"]
    assert lls(openwrt_tools, predicted) == lls(openwrt_tools, real.rootfs)
    assert predicted.read_bytes() == real.rootfs.read_bytes()  # the very squashfs
    assert w["rootfs_to_sha256"] == hashlib.sha256(real.rootfs.read_bytes()).hexdigest()
    assert w["rootfs_from"] == src.rootfs.stat().st_size
    # the names of a 25.12 image: ABI-suffixed in its manifest, plain in what-if's swap
    manifest = sorted(real.bin_dir.glob("*.manifest"))[0].read_text()
    assert re.search(r"^libustream-\w+20201210 - ", manifest, re.M), manifest
    assert all(not n[-1].isdigit() for n in w["removed"] + w["added"] if n.startswith("libust"))


def test_packages_from_several_directories(
    lab: dict[tuple[str, str], Built],
    standin_kit: Kit,
    openwrt_tree_25125: Path,
    tmp_path: Path,
) -> None:
    """A release ImageBuilder holds few packages itself; the rest are in the release's feeds
    (a buildroot's bin/packages/<arch>/base and bin/targets/<t>/<s>/packages): --packages takes
    the directories comma-separated, as apk takes several repositories. The flavour's packages
    only in the second: the prediction is still the real build's squashfs, byte for byte."""
    from tests.standin import package_pack

    src, real = lab[(V1, "mbedtls")], lab[(V1, "wolfssl")]
    ib = tmp_path / "ib"
    shutil.copytree(src.packages, ib / "packages")
    for part in ("staging_dir", "keys"):  # the ImageBuilder's tools and keys, as they are
        (ib / part).symlink_to(src.packages.parent / part)
    feed = tmp_path / "feed"
    feed.mkdir()
    moved = sorted(ib.glob("packages/*wolfssl*.apk"))
    assert len(moved) >= 2
    for f in moved:
        shutil.move(f, feed / f.name)
    for d in (ib / "packages", feed):
        package_pack.index(standin_kit.apk, d, standin_kit.key, openwrt_tree_25125, "mips_24kc")
    out = tmp_path / "predicted.squashfs"
    common = ("--from", str(src.bin_dir), "--flavour", "wolfssl", "--store", str(tmp_path / "s"))
    alone = cli(*common, "--packages", str(ib / "packages"))
    assert alone.returncode == 2 and "does not hold" in alone.stderr, alone.stderr[-2000:]
    p = cli(*common, "--packages", f"{ib / 'packages'},{feed}", "--output", str(out), "--json")
    assert p.returncode == 0, p.stderr[-3000:]
    assert out.read_bytes() == real.rootfs.read_bytes()


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
    idx = pkgsource.load(src.packages)  # the manifests' names carry the ABI suffix
    manifest = sorted(real.bin_dir.glob("*.manifest"))[0].read_text()
    names = {idx.base(ln.split(" - ")[0]) for ln in manifest.splitlines()}
    before = {idx.base(ln.split(" - ")[0]) for ln in sorted(src.bin_dir.glob("*.manifest"))[0]
              .read_text().splitlines()}  # fmt: skip
    assert before - set(w["removed"]) | set(w["added"]) == names
    error = w["rootfs_to"] - real.rootfs.stat().st_size
    print(f"what-if {AR300} mbedtls+luci-ssl->wolfssl: error {error:+,} B")
    assert error == 0
    assert lls(openwrt_tools, predicted) == lls(openwrt_tools, real.rootfs)
    assert predicted.read_bytes() == real.rootfs.read_bytes()


def test_tree_options_are_what_whatif_passes(openwrt_tree_25125: Path) -> None:
    """mksquashfs4's options: the v25.12.5 tree's include/image.mk and Config-images.in."""
    mk = (openwrt_tree_25125 / "include/image.mk").read_text()
    recipe = re.search(r"define Image/mkfs/squashfs-common\n(.*?)\nendef", mk, re.S)
    assert recipe
    assert " ".join(swap.MKSQUASHFS_OPTIONS[:3]) in recipe[1]
    lzma = re.search(r"^LZMA_XZ_OPTIONS := (.*)$", mk, re.M)
    assert lzma and swap.MKSQUASHFS_OPTIONS[3:] == ("-comp", "xz", *lzma[1].split())
    assert "SQUASHFSOPT += -p '/dev d 755 0 0' -p '/dev/console c 600 0 0 5 1'" in mk
    assert "$(if $(CONFIG_SELINUX),-xattrs,-no-xattrs)" in mk
    cfg = (openwrt_tree_25125 / "config/Config-images.in").read_text()
    for opt, sym in (("-block-readers", "BLOCK_READERS"), ("-small-readers", "SMALL_READERS")):
        m = re.search(rf"config TARGET_SQUASHFS_{sym}\n(?:\t\t\t.*\n)*?\t\t\tdefault (\d+)", cfg)
        assert m, sym
        tail = swap.MKSQUASHFS_TAIL
        assert tail[tail.index(opt) + 1] == m[1]


# --- bad input: one line, exit 2, nothing left behind --------------------------------------


def test_bad_inputs(lab: dict[tuple[str, str], Built], tmp_path: Path) -> None:
    pk = str(lab[(V1, "mbedtls")].packages)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x27\x05\x19\x56" + bytes(4000))  # a uImage magic and nothing else
    # the packages with libustream-openssl's .apk broken (beside packages/, so the
    # ImageBuilder's own apk reads them)
    broken = Path(pk).parent / f"packages-broken-{os.getpid()}"
    shutil.rmtree(broken, ignore_errors=True)
    shutil.copytree(pk, broken)
    (adb,) = broken.glob("libustream-openssl20201210-*.apk")
    adb.write_bytes(b"ADBd" + bytes(100))
    good_dir = str(lab[(V1, "mbedtls")].bin_dir)
    v2_only = tmp_path / "v2"  # OpenWrt's index.json (format 2) names versions, nothing else
    v2_only.mkdir()
    shutil.copyfile(Path(pk) / "index.json", v2_only / "index.json")
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
        "broken APK v3 package": (["--from", good_dir, "--flavour", "openssl", "--packages",
                                   str(broken)], "apk cannot read"),
        "index.json v2 alone": (["--from", good_dir, "--flavour", "openssl", "--packages",
                                 str(v2_only)], "format 2"),
        "output dir missing": (["--from", good_dir, "--flavour", "wolfssl", "--packages", pk,
                                "--output", str(tmp_path / "no/such.squashfs")], "does not exist"),
    }  # fmt: skip
    for what, (args, says) in cases.items():
        p = cli(*args, "--store", str(tmp_path / "store"), env={"OPENWRT_WOLF_CACHE": str(cache)})
        errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
        assert p.returncode == 2, (what, p.stderr[-2000:])
        assert len(errors) == 1 and says in errors[0], (what, p.stderr[-2000:])
        assert "Traceback" not in p.stderr, what
    shutil.rmtree(broken)
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
    assert swap.detect_flavour(have, "25.12.5") == "mbedtls"
    # wolfSSL keeps apk-mbedtls on 25.12.5, so libmbedtls21 stays
    sw = swap.plan(have, idx, "25.12.5", "mbedtls", "wolfssl")
    assert sw == swap.Swap(("libustream-mbedtls",), ("libustream-wolfssl", "libwolfssl"))
    sw = swap.plan(have, idx, "25.12.5", "mbedtls", "openssl")
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
        swap.plan(have, idx, "25.12.5", "mbedtls", "openssl")


def _unsquash(squashfs: Path, dest: Path) -> Path:
    subprocess.run(["unsquashfs", "-d", str(dest), "-no-xattrs", str(squashfs)],
                   capture_output=True, check=True, timeout=120)  # fmt: skip
    return dest


def _apk_names(root: Path) -> set[str]:
    return set(re.findall(r"^P:(.*)$", (root / "lib/apk/db/installed").read_text(), re.M))


def test_a_world_naming_every_package_loses_what_the_swap_removes(
    lab: dict[tuple[str, str], Built], tmp_path: Path
) -> None:
    """The buildroot's rootfs asks apk for every package its .config selects, dependencies
    too, so its /etc/apk/world names libmbedtls21 (the real ath79 build's did). The swap's
    world drops what leaves the image and names what comes in; apk's database for it is the
    real wolfSSL build's (its package list is the oracle), not one that keeps a library only
    the removed packages needed (OpenWrt's stock wolfSSL image keeps apk-mbedtls and its
    library: the stand-in's has no apk-wolfssl)."""
    src, real = lab[(V1, "mbedtls")], lab[(V1, "wolfssl")]
    root = _unsquash(src.rootfs, tmp_path / "root")
    names = _apk_names(root)
    assert any(n.startswith("libmbedtls") for n in names)
    (root / "etc/apk/world").write_text("".join(f"{n}\n" for n in sorted(names)))
    idx = pkgsource.load(src.packages)
    installed = {idx.base(n) for n in names}
    plan = swap.plan(installed, idx, "25.12.5", "mbedtls", "wolfssl")
    swap._apk_database(root, plan, idx, installed, tmp_path / "work", 0)
    wanted = _apk_names(_unsquash(real.rootfs, tmp_path / "real"))
    assert _apk_names(root) == wanted
    # still a world naming every package: the ones the real build has, libwolfssl among them
    world = (root / "etc/apk/world").read_text().split()
    assert set(world) == wanted and any(w.startswith("libwolfssl") for w in world), world


# --- OpenWrt's own package formats, read through apk -----------------------------------------


def test_adb_index_is_what_apk_and_make_index_json_say(lab: dict[tuple[str, str], Built]) -> None:
    """packages.adb read through apk: every package's ABI-less name and version are those of
    index.json, which the tree's scripts/make-index-json.py wrote from apk's own adbdump; a
    package with an ABI version provides its plain name."""
    pk = lab[(V1, "mbedtls")].packages
    idx = pkgsource.load(pk)
    v2 = json.loads((pk / "index.json").read_text())
    assert v2["version"] == 2
    assert {p.base: p.version for p in idx.packages.values()} == v2["packages"]
    abi = {p.name: p for p in idx.packages.values() if p.abi}
    assert {"libmbedtls21", "libustream-mbedtls20201210", "libopenssl3"} <= set(abi)
    assert all(p.base in p.provides and p.name.startswith(p.base) for p in abi.values())
    assert idx.get("libwolfssl") is not None and idx.get("libwolfssl").name.startswith(  # type: ignore[union-attr]
        "libwolfssl5.9.1."
    )


def test_adb_files_are_what_apk_extracts(lab: dict[tuple[str, str], Built], tmp_path: Path) -> None:
    """A package's files as what-if reads them (path, size, sha256) are the regular files
    `apk extract` writes, measured with stat and hashlib."""
    idx = pkgsource.load(lab[(V1, "mbedtls")].packages)
    for name in ("libwolfssl", "libustream-mbedtls", "base-files", "apk-openssl"):
        pkg = idx.get(name)
        assert pkg is not None and pkg.format == "adb"
        dest = tmp_path / name
        dest.mkdir()
        subprocess.run([str(pkg.apk), "extract", "--allow-untrusted", "--destination", str(dest),
                        str(pkg.file)], check=True, capture_output=True, timeout=120)  # fmt: skip
        on_disk = {
            "/" + str(f.relative_to(dest)): (f.stat().st_size,
                                             hashlib.sha256(f.read_bytes()).hexdigest())
            for f in dest.rglob("*") if f.is_file() and not f.is_symlink()
        }  # fmt: skip
        assert {f.path: (f.size, f.sha256) for f in pkg.files()} == on_disk, name
        assert f"/lib/apk/packages/{pkg.name}.list" in on_disk


def test_tools_come_from_the_imagebuilder(
    lab: dict[tuple[str, str], Built], tmp_path: Path
) -> None:
    """Given an ImageBuilder's packages/, what-if runs its staging_dir/host/bin (apk,
    mksquashfs4, unsquashfs4) and needs neither ../shared nor OpenWrt's tools in the cache;
    packages without an ImageBuilder around them and no ../shared: one line naming both."""
    src = lab[(V1, "mbedtls")]
    # no ../shared and no network: no mirror URL, and the public archives behind a proxy that
    # refuses (else what-if may fetch the pinned sources and build OpenWrt's tools itself)
    dead = f"http://127.0.0.1:{free_port()}"
    env = {"OPENWRT_WOLF_SHARED": str(tmp_path / "no-shared"),
           "OPENWRT_WOLF_CACHE": str(tmp_path / "empty-cache"), "OPENWRT_WOLF_SOURCES_URL": "",
           "OPENWRT_WOLF_SOURCES": "", "NO_PROXY": "", "no_proxy": "", "HTTPS_PROXY": dead,
           "https_proxy": dead, "HTTP_PROXY": dead, "http_proxy": dead}  # fmt: skip
    p = cli("--from", str(src.bin_dir), "--flavour", "wolfssl", "--packages", str(src.packages),
            "--store", str(tmp_path / "store"), "--json", env=env)  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    host_bin = src.packages.parent / "staging_dir" / "host" / "bin"
    ran = [ln for ln in p.stderr.splitlines() if ln.startswith("$ ")]
    for tool in ("unsquashfs4", "mksquashfs4", "apk"):
        assert any(ln.split()[1] == str(host_bin / tool) or f"{host_bin / tool} " in ln
                   for ln in ran), tool  # fmt: skip
    assert not (tmp_path / "empty-cache" / "openwrt-tools").exists()
    alone = tmp_path / "packages"
    shutil.copytree(src.packages, alone)
    p = cli("--from", str(src.bin_dir), "--flavour", "wolfssl", "--packages", str(alone),
            "--store", str(tmp_path / "store"), env=env)  # fmt: skip
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert p.returncode == 2 and len(errors) == 1, p.stderr[-2000:]
    assert "staging_dir/host/bin/apk" in errors[0] and "Traceback" not in p.stderr


# --- 24.10: opkg's Packages and .ipk ---------------------------------------------------------

# the opkg database of the stand-in 24.10 build (usr/lib/opkg/status, info/<pkg>.control and
# .list, written by its ib.py: opkg's source is not at hand) is not rewritten by what-if:
# the removed packages' entries stay, the added ones' are missing (docs/whatif.md)
OPKG_DB_ERROR = -16


@pytest.fixture(scope="module")
def lab_2410(
    tmp_path_factory: pytest.TempPathFactory, standin_mirror_2410: Path
) -> dict[str, Built]:
    need_tools("make", "unsquashfs", "gcc")
    top = tmp_path_factory.mktemp("whatif-2410")
    with preparing("two builds on the stand-in 24.10.8 ImageBuilder (opkg)"):
        # a copy of the run's (tests/conftest.py): make image writes into it
        shared = standin_ib(standin_mirror_2410, ATH79, "24.10.8")
        ib = Path(shutil.copytree(shared, top / shared.name, symlinks=True))
        out = {}
        for flavour in ("mbedtls", "wolfssl"):
            bin_dir, rootfs = top / f"bin-{flavour}", top / f"root-{flavour}.squashfs"
            _make_image(ib, V1, flavour, bin_dir, rootfs)
            out[flavour] = Built(flavour, V1, bin_dir, rootfs, ib / "packages")
    return out


def test_opkg_release_prediction(
    lab_2410: dict[str, Built], openwrt_tools: OpenWrtTools, tmp_path: Path
) -> None:
    """24.10.8 (opkg): the .ipk files of the tree's ipkg-build with the Packages index of its
    ipkg-make-index.sh; names in the manifest carry the ABI suffix (libustream-mbedtls20201210)
    and are matched through ABIVersion. The prediction against the real wolfSSL build: every
    file but opkg's own database equal, and the size off by exactly that database's share."""
    src, real = lab_2410["mbedtls"], lab_2410["wolfssl"]
    assert (src.packages / "Packages").is_file() and not (src.packages / "packages.adb").exists()
    w, predicted = run_whatif(tmp_path, src, "wolfssl")
    assert w["release"] == "24.10.8"
    assert set(w["removed"]) >= {"libustream-mbedtls", "wpad-basic-mbedtls"}
    assert {"libustream-wolfssl", "wpad-basic-wolfssl"} <= set(w["added"])
    assert any(n.startswith("libwolfssl") for n in w["added"])
    db = "/usr/lib/opkg/"
    got = [r for r in lls(openwrt_tools, predicted) if db not in r]
    want = [r for r in lls(openwrt_tools, real.rootfs) if db not in r]
    assert got == want
    error = w["rootfs_to"] - real.rootfs.stat().st_size
    print(f"what-if 24.10.8 {V1} mbedtls->wolfssl: error {error:+,} B (opkg database)")
    assert error == OPKG_DB_ERROR

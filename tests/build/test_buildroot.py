"""invoke build --backend buildroot against the stand-in source tree (tests/standin/buildroot/).

The real USE_WOLFSSL patch set needs the v25.12.5 files as context, which the stand-in tree
does not carry (it is our own small tree, not OpenWrt's files), so these tests apply a small
series of the same shape (tests/standin/buildroot-patches: `config USE_WOLFSSL` and the
WOLFSSL_SWAP pairs) through the same openwrt_wolf.patchset.series, via --patches.

Sizes are checked against stat, unsquashfs, the stand-in's sha256sums and profiles.json and
the .config `make defconfig` wrote, never against numbers the driver computed alone."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from openwrt_wolf.build import buildroot, packages
from openwrt_wolf.build.driver import build
from openwrt_wolf.build.jobs import Options, plan
from openwrt_wolf.errors import CommandError, WolfError
from openwrt_wolf.firmware import artifacts
from openwrt_wolf.host.openwrt_tools import OpenWrtTools
from tests.build.test_build import cli, error_line, unsquashfs_list, unsquashfs_size
from tests.conftest import made_once, need_tools, preparing, standin_ib
from tests.standin import make_standin
from tests.standin.kit import Kit

ROOT = Path(__file__).resolve().parents[2]
PATCHES = ROOT / "tests" / "standin" / "buildroot-patches"
TOOLS = ("make", "mksquashfs", "unsquashfs", "mkimage", "git", "patch")
V1, AR300 = "tplink_tl-wr902ac-v1", "glinet_gl-ar300m16"


@pytest.fixture(scope="module")
def pristine(
    tmp_path_factory: pytest.TempPathFactory,
    openwrt_tree_25125: Path,
    openwrt_tools: OpenWrtTools,
    standin_kit: Kit,
    standin_mirror: Path,
) -> Path:
    """The stand-in buildroot, once per test run (each test builds in a copy), from the run's
    stand-in ImageBuilder (tests/conftest.py standin_mirror)."""
    need_tools(*TOOLS)

    def make(top: Path) -> None:
        with preparing("the stand-in buildroot tree for ath79/generic"):
            make_standin.make_buildroot(
                top, "ath79/generic", tree=openwrt_tree_25125, tools=openwrt_tools,
                kit=standin_kit, ib_tree=standin_ib(standin_mirror, "ath79/generic"),
            )  # fmt: skip

    top = made_once(tmp_path_factory, "standin-buildroot-25.12.5", make)
    return top / "openwrt-25.12.5-ath79-generic"  # make_buildroot's name


@pytest.fixture
def tree(pristine: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OPENWRT_WOLF_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENWRT_WOLF_STORE", str(tmp_path / "store"))
    return Path(shutil.copytree(pristine, tmp_path / pristine.name, symlinks=True))


def opts(tree: Path, flavour: str = "wolfssl", device: str = "tl-wr902ac", **kw: Any) -> Options:
    kw.setdefault("patches", PATCHES)
    return Options(flavour=flavour, device=device, tree=tree, jobs=2, **kw)


def dotconfig(tree: Path) -> dict[str, str]:
    """The tree's .config as the stand-in's defconfig wrote it."""
    out = {}
    for line in (tree / ".config").read_text().splitlines():
        if m := re.match(r"^CONFIG_(\S+?)=(.*)$", line):
            out[m.group(1)] = m.group(2)
        elif m := re.match(r"^# CONFIG_(\S+) is not set$", line):
            out[m.group(1)] = "n"
    return out


def sha256(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_wolfssl_build_on_tl_wr902ac_with_the_patch_set(tree: Path, tmp_path: Path) -> None:
    (out,) = build(opts(tree))
    rec = out.record
    assert not out.cached and rec.backend == "buildroot" and rec.device == V1
    # GNU patch, independently: the series is applied to the tree (it reverts cleanly)
    for p in (PATCHES / "series").read_text().split():
        if p.endswith(".patch"):
            subprocess.run(["patch", "-p1", "-R", "--dry-run", "-s", "-d", str(tree), "-i",
                            str(PATCHES / p)], check=True, timeout=60)  # fmt: skip
    assert rec.request.tree == "version:" + (tree / "version").read_text().strip()
    cfg = dotconfig(tree)
    assert cfg["USE_WOLFSSL"] == "y" and cfg[f"TARGET_ath79_generic_DEVICE_{V1}"] == "y"
    assert cfg["PACKAGE_libustream-wolfssl"] == "y" and cfg["PACKAGE_libustream-mbedtls"] == "n"
    assert cfg["PACKAGE_wpad-basic-wolfssl"] == "y" and cfg["PACKAGE_wpad-basic-mbedtls"] == "n"
    # the image: named as OpenWrt names it, sizes and hashes as the tree's bin/ has them
    bin_dir = tree / "bin" / "targets" / "ath79" / "generic"
    name = f"openwrt-ath79-generic-{V1}-squashfs-sysupgrade.bin"
    art = rec.image()
    assert art is not None and art.name == name
    img = Path(art.path)
    assert art.size == img.stat().st_size == (bin_dir / name).stat().st_size
    sums = artifacts.parse_sha256sums((bin_dir / "sha256sums").read_text())
    assert art.sha256 == sums[name] == sha256(img)
    pj = json.loads((bin_dir / "profiles.json").read_text())["profiles"][V1]["images"][0]
    assert (pj["name"], pj["size"]) == (name, img.stat().st_size)
    # the fit's pieces: the kernel make left in KDIR, the rootfs unsquashfs finds in the image
    fr = rec.fit
    (kdir,) = tree.glob("build_dir/target-*/linux-ath79_generic")
    kernel = kdir / f"{V1}-kernel.bin"
    assert fr.kernel_size == kernel.stat().st_size
    assert img.read_bytes().startswith(kernel.read_bytes())
    assert unsquashfs_size(img, fr.kernel_size) == fr.rootfs_size
    assert fr.verdict == "FITS" and fr.final_size == img.stat().st_size
    # USE_WOLFSSL put wolfSSL in the rootfs; apk-mbedtls keeps libmbedtls (25.12, the note)
    files = unsquashfs_list(img, fr.kernel_size)
    assert any(f.startswith("/usr/lib/libwolfssl.so") for f in files)
    assert "/lib/libustream-ssl.so" in files and "/usr/sbin/wpad" in files
    manifest = (bin_dir / f"openwrt-ath79-generic-{V1}.manifest").read_text()
    # Image/Manifest: `apk list --manifest`, names with their ABI suffix
    assert "libustream-wolfssl20201210 - " in manifest and "libustream-mbedtls" not in manifest
    assert "wpad-basic-mbedtls" not in manifest and "apk-mbedtls - " in manifest
    # the v25.12.5 tree's versions (package/libs/{mbedtls,wolfssl}: PKG_RELEASE 2 and 1)
    assert rec.library_versions == {"mbedtls": "3.6.6-r2", "wolfssl": "5.9.1-r1"}
    assert "patch set openwrt: applied" in rec.notes
    # a second run on the patched tree: already applied is fine
    (again,) = build(opts(tree, force=True))
    assert "patch set openwrt: already-applied" in again.record.notes
    assert not again.cached and again.record.key == rec.key


def test_openssl_and_mbedtls_flavours_and_cache(tree: Path) -> None:
    outs = {o.record.flavour: o for o in build(opts(tree, flavour="openssl,mbedtls"))}
    cfg = dotconfig(tree)  # the last build was mbedtls: OpenWrt's defaults
    assert cfg["PACKAGE_libustream-mbedtls"] == "y" and cfg.get("USE_WOLFSSL") == "n"
    mb = outs["mbedtls"].record
    img = Path(mb.image().path)  # type: ignore[union-attr]
    files = unsquashfs_list(img, mb.fit.kernel_size)
    assert any(f.startswith("/usr/lib/libmbedtls.so") for f in files)
    assert not any("libwolfssl" in f for f in files)
    # OpenSSL overflows the TL-WR902AC v1: tplink-safeloader's own line, image deleted
    ssl = outs["openssl"].record
    assert ssl.image_deleted and ssl.fit.verdict == "TOO_BIG"
    # sysupgrade.bin, then factory.bin (IMAGES): tplink-safeloader refuses both; between
    # them check-size stats the sysupgrade image the recipe removed (an empty size)
    assert len([w for w in ssl.openwrt_warnings if "partition too big" in w]) == 2
    assert [w for w in ssl.openwrt_warnings if "partition too big" not in w] == [
        "WARNING: Image file openwrt-ath79-generic-tplink_tl-wr902ac-v1-squashfs-sysupgrade.bin"
        " is too big:  > 7536640"
    ]
    m = re.search(r"partition too big \(more than (\d+) bytes\)", ssl.openwrt_warnings[0])
    assert m and ssl.fit.margin < 0 and ssl.fit.rootfs_room < 0
    seed = next(a for a in ssl.artifacts if a.name == "seed.config")
    text = Path(seed.path).read_text()
    assert "CONFIG_PACKAGE_libustream-openssl=y" in text
    assert "# CONFIG_PACKAGE_libustream-mbedtls is not set" in text
    assert "uencrypt" not in text  # not a default package of this device: not replaced
    # cache hit: no make at all (any make target of the tree would now fail), same records
    makefile = (tree / "Makefile").read_text()
    (tree / "Makefile").write_text("%:\n\t@exit 3\n")
    again = build(opts(tree, flavour="openssl,mbedtls"))
    assert all(o.cached for o in again)
    assert {o.path for o in again} == {o.path for o in outs.values()}
    # the tree's identity is part of the request: another version is another build
    (tree / "Makefile").write_text(makefile)
    (tree / "version").write_text("r99999-0123456789\n")
    (moved,) = build(opts(tree, flavour="mbedtls"))
    assert not moved.cached and moved.record.key != mb.key


def test_request_hash_covers_tree_and_patch_set(tree: Path, tmp_path: Path) -> None:
    (job,) = plan(opts(tree))
    other = tmp_path / "patches"
    shutil.copytree(PATCHES, other)
    (other / "series").write_text((other / "series").read_text() + "# changed\n")
    (same,) = plan(opts(tree, patches=other))
    assert same.key == job.key  # a comment is not a patch
    p = next(other.glob("*.patch"))
    p.write_text(p.read_text().replace("Stand-in USE_WOLFSSL", "Stand-in USE_WOLFSSL (v2)"))
    (changed,) = plan(opts(tree, patches=other))
    assert changed.key != job.key
    # a git checkout is identified by its HEAD
    git = ["git", "-C", str(tree), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True, timeout=60)
    subprocess.run([*git, "add", "-A"], check=True, timeout=60)
    subprocess.run([*git, "commit", "-qm", "t"], check=True, timeout=60)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True, timeout=60).stdout.strip()  # fmt: skip
    (gj,) = plan(opts(tree))
    assert gj.request.tree == f"git:{head}" and gj.key != job.key


def test_config_check_names_the_symbol(tree: Path, tmp_path: Path) -> None:
    # no patch set: the tree's Kconfig has no USE_WOLFSSL, defconfig drops it
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "series").write_text("# nothing\n")
    p = cli("--flavour", "wolfssl", "--device", V1, "--tree", str(tree), "--patches", str(empty),
            "--no-report", timeout=120)  # fmt: skip
    line = error_line(p)
    assert "CONFIG_USE_WOLFSSL=y is not in the .config after make defconfig" in line
    assert "patch set applied" in line
    assert dotconfig(tree).get("USE_WOLFSSL") is None  # what the check saw
    # a package the tree does not have
    with pytest.raises(WolfError, match=r"CONFIG_PACKAGE_no-such-pkg is not =y after make def"):
        build(opts(tree, flavour="mbedtls", packages=("no-such-pkg",), patches=empty))
    assert not list((tmp_path / "store").rglob("*.json"))


def test_make_failure_shows_last_20_lines_and_log(tree: Path, tmp_path: Path) -> None:
    for f in (tree / "packages").glob("urngd-*.apk"):
        f.unlink()
    with pytest.raises(CommandError) as e:
        build(opts(tree, flavour="mbedtls"))
    details = e.value.details().splitlines()
    assert details[0] == "make -j2 failed"
    tail = [ln for ln in details if ln.startswith("  | ")]
    assert len(tail) == 20
    assert "  |     ERROR: package/urngd failed to build." in tail
    assert re.match(r"  \| make: \*\*\* \[Makefile:\d+: world\] Error 2$", tail[-1])  # GNU make's
    log = Path(details[-1].removeprefix("  full log: "))
    assert " make[1] world" in log.read_text()
    assert not list((tmp_path / "store").rglob("*.json"))


def test_bad_trees_and_options_are_one_line(tree: Path, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(WolfError, match=r"is not an OpenWrt buildroot \(no Makefile\)"):
        plan(opts(plain))
    (tree / "version").unlink()
    with pytest.raises(WolfError, match=r"cannot identify the tree .*neither a git checkout"):
        plan(opts(tree))
    with pytest.raises(WolfError, match=r"buildroot backend needs --tree"):
        plan(Options(flavour="wolfssl", device=V1, backend="buildroot"))
    with pytest.raises(WolfError, match=r"--tree is for the buildroot and sdk backends, not ima"):
        plan(Options(flavour="wolfssl", device=V1, backend="imagebuilder", tree=tree))
    with pytest.raises(WolfError, match=r"^--imagebuilder, --files: not used by the buildroot"):
        plan(opts(tree, imagebuilder=tmp_path, files=tmp_path))


def test_sdk_with_a_tree_asks_for_the_patch_set_packages(tree: Path, standin_mirror: Path) -> None:
    """--backend sdk --tree: the SDK compiles the patch set's packages from the tree, so the
    request names the tree, its patch set and the patch set's own swap (apk-wolfssl, which
    OpenWrt's ImageBuilder has no package for), and the apk note no longer holds; without
    --tree the base feed is the pinned tree; --stock and the stock flavours compile nothing
    and stay plain ImageBuilder requests (the request names the SDK's and ImageBuilder's
    sha256: read on the mirror)."""
    m = str(standin_mirror)
    wolf = plan(opts(tree, backend="sdk", mirror=m))[0]
    assert wolf.request.backend == "sdk"
    assert wolf.request.tree == buildroot.Tree(tree).identity() != ""
    assert wolf.request.patch_set == buildroot.patch_set_hash(PATCHES)
    assert {"-apk-mbedtls", "apk-wolfssl"} <= set(wolf.request.packages)
    assert not any("apk-mbedtls stays" in n for n in wolf.rules.notes)
    pinned = plan(Options(flavour="wolfssl", device=V1, mirror=m))[0]
    assert pinned.request.backend == "sdk" and pinned.request.tree.startswith(
        "pin:openwrt-25.12.5:"
    )
    assert "apk-wolfssl" in pinned.request.packages and pinned.request.variant == "patch-set"
    plain = plan(Options(flavour="wolfssl", device=V1, stock=True, mirror=m))[0]
    assert (plain.request.backend, plain.request.variant) == ("imagebuilder", "stock")
    assert plain.request.tree == "" and "apk-wolfssl" not in plain.request.packages
    notes = packages.changes(plain.rules, None, stock=True).notes  # the --stock image's only
    assert any("apk-mbedtls stays" in n for n in notes)
    assert not any("apk-mbedtls stays" in n for n in packages.changes(pinned.rules, None).notes)
    stock = plan(opts(tree, flavour="mbedtls", backend="sdk", mirror=m))[0]
    assert stock.request.tree == "" and stock.request.patch_set == "none"


def test_killed_build_leaves_no_record_and_restarts(tree: Path, tmp_path: Path) -> None:
    args = [sys.executable, "-m", "invoke", "build", "--flavour", "wolfssl", "--device", V1,
            "--tree", str(tree), "--patches", str(PATCHES), "--no-report"]  # fmt: skip
    env = {**os.environ, "STANDIN_IMAGE_DELAY": "60"}  # ib.py sleeps after the checksums
    p = subprocess.Popen(args, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    assert p.stderr is not None
    seen = []
    for line in p.stderr:
        seen.append(line)
        if "make[2] target/install" in line:  # make is assembling the image
            break
    p.send_signal(signal.SIGTERM)
    rest = p.communicate(timeout=60)[1]
    assert p.returncode == 143, "".join(seen) + rest
    assert "error: interrupted" in rest
    assert not list((tmp_path / "store").rglob("*.json"))
    # make and its children are gone: nothing runs in the tree any more
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            assert not os.readlink(f"/proc/{pid}/cwd").startswith(str(tree))
    (out,) = build(opts(tree))
    assert not out.cached and out.record.fit.verdict == "FITS"
    assert "patch set openwrt: already-applied" in out.record.notes
    assert not (Path(out.record.log).parent / "bin.partial").exists()
    assert [p.name for p in (tmp_path / "store").rglob("*.json")] == [f"{out.job.key}.json"]


def test_build_config_prints_the_seed() -> None:
    p = subprocess.run(
        [sys.executable, "-m", "invoke", "build-config", "--flavour", "wolfssl", "--device",
         "tl-wr902ac", "--what", "buildroot"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    lines = [ln for ln in p.stdout.splitlines() if not ln.startswith("# openwrt-wolf")]
    # scripts/target-metadata.pl's names: TARGET_<board>, _<subtarget>, _DEVICE_<profile>
    assert [ln for ln in lines if ln.startswith("CONFIG_")] == [
        "CONFIG_TARGET_ath79=y",
        "CONFIG_TARGET_ath79_generic=y",
        f"CONFIG_TARGET_ath79_generic_DEVICE_{V1}=y",
        "CONFIG_USE_WOLFSSL=y",
    ]
    assert "PACKAGE_" not in p.stdout  # the patched Kconfig swaps the packages


def test_a_device_without_flash_has_no_deleted_image(tmp_path: Path) -> None:
    """malta-be makes no sysupgrade image (its images are the initramfs kernel and rootfs
    pieces): the record must not say OpenWrt deleted one as too big (the real malta/be
    build's table said "UNKNOWN (deleted)")."""
    from openwrt_wolf.build import driver
    from openwrt_wolf.catalogue import devices
    from tests.sqfs_kit import mksquashfs

    need_tools("mksquashfs")
    dev = devices.resolve("malta-be", "25.12.5")
    assert not dev.has_flash
    kdir, root = tmp_path / "kdir", tmp_path / "root"
    kdir.mkdir()
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "hostname").write_text("OpenWrt\n")
    mksquashfs(root, kdir / "root.squashfs")
    driver._pieces(kdir, dev, tmp_path / "bin")
    files, output, deleted, _notes = driver._measure(tmp_path / "bin", dev)
    assert not deleted and output.fit is not None
    assert output.fit.verdict == "UNKNOWN"  # no IMAGE_SIZE to fit against
    assert "rootfs" in {f.type for f in files}


def test_a_hard_killed_compile_resumes(tmp_path: Path) -> None:
    """A compile killed by SIGKILL leaves its object empty and newer than the source: make
    resuming links it and fails; drop_truncated_objects removes it (and nothing else), and the
    same make compiles it again and links (make and gcc are the oracle)."""
    top = tmp_path / "tree"
    pkg = top / "build_dir" / "target-x" / "pkg-1.0"
    pkg.mkdir(parents=True)
    (pkg / "a.c").write_text("int f(void) { return 42; }\n")
    (pkg / "main.c").write_text("int f(void);\nint main(void) { return f() == 42 ? 0 : 1; }\n")
    (pkg / "Makefile").write_text("prog: a.o main.o\n\tgcc -o $@ $^\n%.o: %.c\n\tgcc -c -o $@ $<\n")

    def make() -> subprocess.CompletedProcess[str]:
        return subprocess.run(["make", "-C", str(pkg)], capture_output=True, text=True, timeout=120)

    assert make().returncode == 0
    (pkg / "a.o").write_bytes(b"")  # as the kill left it
    (pkg / "prog").unlink()
    (pkg / "empty.txt").write_bytes(b"")  # not an object: kept
    outside = tmp_path / "elsewhere.o"
    outside.write_bytes(b"")
    (pkg / "link.o").symlink_to(outside)  # a link: not followed, kept
    failed = make()
    assert failed.returncode != 0 and "undefined reference" in failed.stderr + failed.stdout
    assert buildroot.drop_truncated_objects(top) == [Path("build_dir/target-x/pkg-1.0/a.o")]
    assert (pkg / "empty.txt").exists() and (pkg / "link.o").is_symlink() and outside.exists()
    assert make().returncode == 0
    assert subprocess.run([str(pkg / "prog")], timeout=30).returncode == 0
    assert buildroot.drop_truncated_objects(top) == []

"""OpenWrt v25.12.5's own Kconfig and Makefiles with the series applied (shared snapshot; CI).

Oracles: OpenWrt's scripts/config/conf expanding a seed .config as `make defconfig` does, the
pristine tree's own conf for the same seeds, the ImageBuilder's own Makefile (`make info`), and
the wolfssl package Makefile evaluated by GNU make. The LuCI feed is a stand-in of ours
(tests/standin/luci: luci-ssl's dependency list), installed with OpenWrt's scripts/feeds.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from openwrt_wolf.build import sdk
from openwrt_wolf.files.locks import locked
from openwrt_wolf.patchset import kconfig, series
from tests.conftest import need_tools

LUCI = Path(__file__).resolve().parent.parent / "standin" / "luci"
WR902 = kconfig.Device("ath79", "generic", "tplink_tl-wr902ac-v1")
AR300 = kconfig.Device("ath79", "generic", "glinet_gl-ar300m16")
LUCI_SSL = ("CONFIG_PACKAGE_luci-ssl=y",)
TOOLS = ("make", "gcc", "g++", "perl", "gawk", "git", "rsync", "python3", "unzip", "bzip2",
         "wget", "file", "/usr/include/ncurses.h",
         "/usr/lib/python3.11/distutils/util.py")  # fmt: skip


@pytest.fixture(scope="module")
def patched(openwrt_tree_25125: Path) -> Path:
    need_tools(*TOOLS)
    return kconfig.prepare(openwrt_tree_25125, patches_dir=series.PATCHES_DIR, luci_feed=LUCI)


@pytest.fixture(scope="module")
def pristine(openwrt_tree_25125: Path) -> Path:
    need_tools(*TOOLS)
    return kconfig.prepare(openwrt_tree_25125, luci_feed=LUCI)


@pytest.mark.parametrize("device", [WR902, AR300], ids=lambda d: d.profile)
@pytest.mark.parametrize("extra", [(), LUCI_SSL], ids=["plain", "luci-ssl"])
def test_use_wolfssl_leaves_no_mbedtls(
    patched: Path, device: kconfig.Device, extra: tuple[str, ...]
) -> None:
    sel = kconfig.select(patched, device, use_wolfssl=True, extra=extra)
    assert sel.mbedtls() == []
    assert {"libustream-wolfssl", "wpad-basic-wolfssl", "apk-wolfssl", "libwolfssl"} <= set(
        sel.packages()
    )
    assert sel.config["CONFIG_WOLFSSL_MINIMAL"] == "y"
    assert sel.config["CONFIG_WOLFSSL_MINIMAL_X25519"] == "y"
    assert sel.config["CONFIG_WOLFSSL_ECC_SP_P256"] == "y"
    assert sel.config["CONFIG_LIBUSTREAM_WOLFSSL_NATIVE"] == "y"
    if extra:
        assert {"luci-ssl", "px5g-wolfssl"} <= set(sel.packages())


@pytest.mark.parametrize("device", [WR902, AR300], ids=lambda d: d.profile)
@pytest.mark.parametrize("extra", [(), LUCI_SSL], ids=["plain", "luci-ssl"])
def test_off_is_the_pristine_config(
    patched: Path, pristine: Path, device: kconfig.Device, extra: tuple[str, ...]
) -> None:
    off = kconfig.select(patched, device, use_wolfssl=False, extra=extra)
    before = kconfig.select(pristine, device, use_wolfssl=False, extra=extra)
    assert off.config == before.config  # every set symbol, not only packages
    assert {"libustream-mbedtls", "apk-mbedtls"} <= set(off.packages())
    if extra:
        assert "px5g-mbedtls" in off.packages()


def test_minimal_mode_hides_full_wpad(patched: Path) -> None:
    want = ("CONFIG_PACKAGE_wpad-wolfssl=y",)
    on = kconfig.select(patched, WR902, use_wolfssl=True, extra=want)
    assert "CONFIG_PACKAGE_wpad-wolfssl" not in on.config  # hidden: `depends on !WOLFSSL_MINIMAL`
    assert on.config["CONFIG_WOLFSSL_MINIMAL"] == "y"
    full = kconfig.select(
        patched, WR902, use_wolfssl=True, extra=(*want, "# CONFIG_WOLFSSL_MINIMAL is not set")
    )
    # minimal off: selectable again (as a module beside the device's wpad-basic, which it
    # conflicts with in the image)
    assert full.config.get("CONFIG_PACKAGE_wpad-wolfssl") in ("y", "m")
    assert "CONFIG_WOLFSSL_MINIMAL" not in full.config


def _wolfssl_make(tree: Path, config: str, var: str) -> subprocess.CompletedProcess[str]:
    """GNU make evaluating package/libs/wolfssl/Makefile against a .config (rules.mk reads
    $(TOPDIR)/.config; the lock keeps parallel tests off the tree's .config)."""
    with locked(tree.parent / f"{tree.name}.config.lock"):
        (tree / ".config").write_text(config)
        return subprocess.run(
            ["make", "-s", "-C", "package/libs/wolfssl", f"TOPDIR={tree}", f"val.{var}"],
            cwd=tree, capture_output=True, text=True, timeout=300,
        )  # fmt: skip


def _config_text(sel: kconfig.Selection, *extra: str) -> str:
    return "".join(f"{k}={v}\n" for k, v in sel.config.items()) + "".join(f"{e}\n" for e in extra)


def test_wolfssl_makefile_minimal_arguments(patched: Path) -> None:
    sel = kconfig.select(patched, WR902, use_wolfssl=True)
    args = _wolfssl_make(patched, _config_text(sel), "CONFIGURE_ARGS")
    assert args.returncode == 0, args.stderr
    assert {"--disable-crypttests", "--enable-curve25519", "--enable-sp=p256"} <= set(
        args.stdout.split()
    )
    ld = _wolfssl_make(patched, _config_text(sel), "TARGET_LDFLAGS").stdout
    assert "--version-script=" in ld and "libwolfssl-minimal.map" in ld


def test_wolfssl_makefile_benchmark_builds_crypttests(patched: Path) -> None:
    sel = kconfig.select(
        patched, WR902, use_wolfssl=True, extra=("CONFIG_PACKAGE_libwolfssl-benchmark=y",)
    )
    assert sel.config["CONFIG_PACKAGE_libwolfssl-benchmark"] == "y"
    args = _wolfssl_make(patched, _config_text(sel), "CONFIGURE_ARGS").stdout.split()
    assert "--enable-crypttests" in args and "--disable-crypttests" not in args
    ld = _wolfssl_make(patched, _config_text(sel), "TARGET_LDFLAGS").stdout
    assert "--version-script" not in ld  # the benchmark links wolfSSL_Malloc/Free


def test_wolfssl_makefile_refuses_a_full_user(patched: Path) -> None:
    """A package linking libwolfssl that the minimal library does not serve (as a feed package
    would be: set by hand, since Kconfig already hides the core ones) stops the build, named."""
    sel = kconfig.select(patched, WR902, use_wolfssl=True)
    res = _wolfssl_make(
        patched, _config_text(sel, "CONFIG_PACKAGE_eapol-test-wolfssl=y"), "CONFIGURE_ARGS"
    )
    assert res.returncode != 0
    assert "WOLFSSL_MINIMAL is set, but eapol-test-wolfssl need the full libwolfssl" in res.stderr


def _imagebuilder(tree: Path, sel: kconfig.Selection, dest: Path) -> Path:
    """The files OpenWrt's target/imagebuilder/Makefile puts into an ImageBuilder, minus the
    packages and kernel: enough for `make info` and the package list of `make image`."""
    dest.mkdir()
    for part in ("include", "scripts"):
        shutil.copytree(tree / part, dest / part, symlinks=False)
    for f in (
        "rules.mk",
        "target/imagebuilder/files/Makefile",
        "tmp/.targetinfo",
        "tmp/.packageinfo",
    ):
        shutil.copy2(tree / f, dest / Path(f).name)
    (dest / "target" / "linux").mkdir(parents=True)
    shutil.copy2(tree / "target/linux/Makefile", dest / "target/linux/Makefile")
    for board in ("generic", "ath79"):
        shutil.copytree(tree / "target/linux" / board, dest / "target/linux" / board)
    (dest / ".config").write_text(_config_text(sel))
    return dest


def _ib(dest: Path, *args: str) -> str:
    res = subprocess.run(["make", *args], cwd=dest, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return res.stdout


def _default_packages(info: str) -> list[str]:
    line = next(ln for ln in info.splitlines() if ln.startswith("Default Packages:"))
    return line.split(":", 1)[1].split()


def test_imagebuilder_info_and_removals(patched: Path, pristine: Path, tmp_path: Path) -> None:
    need_tools("make", "perl")
    on = _imagebuilder(patched, kconfig.select(patched, WR902, use_wolfssl=True), tmp_path / "on")
    off = _imagebuilder(
        patched, kconfig.select(patched, WR902, use_wolfssl=False), tmp_path / "off"
    )
    before = _imagebuilder(
        pristine, kconfig.select(pristine, WR902, use_wolfssl=False), tmp_path / "before"
    )
    on_defaults = _default_packages(_ib(on, "info"))
    assert {"libustream-wolfssl", "wpad-basic-wolfssl", "apk-wolfssl"} <= set(on_defaults)
    assert not [p for p in on_defaults if "mbedtls" in p]
    assert _ib(off, "info") == _ib(before, "info")  # off: the pristine ImageBuilder's output
    user = "-wpad-basic-mbedtls -libustream-mbedtls libustream-openssl"
    args = ("-s", "val.BUILD_PACKAGES", "USER_PROFILE=DEVICE_tplink_tl-wr902ac-v1")
    on_pkgs = _ib(on, *args, f"USER_PACKAGES={user}").split()
    assert "libustream-openssl" in on_pkgs
    assert not [
        p for p in on_pkgs if p.startswith(("wpad", "libustream-wolfssl")) or "mbedtls" in p
    ]
    off_pkgs = _ib(off, *args, f"USER_PACKAGES={user}").split()
    assert off_pkgs == _ib(before, *args, f"USER_PACKAGES={user}").split()


def test_imagebuilder_notes_follow_what_it_installs(patched: Path, tmp_path: Path) -> None:
    """An ImageBuilder made by a buildroot with USE_WOLFSSL=y installs apk-wolfssl (its own
    `make info` says so): the wolfssl flavour's note "apk-mbedtls stays" (true of OpenWrt's own
    ImageBuilder) must not be printed for it; for the ImageBuilder of the same tree without
    USE_WOLFSSL it must."""
    from openwrt_wolf.build import driver, packages

    need_tools("make", "perl")
    # the --stock image's notes (OpenWrt's own packages)
    notes = packages.changes(packages.rules("wolfssl", "25.12.5"), None, stock=True).notes
    assert any("apk-mbedtls stays" in n for n in notes)
    for use, dest in ((True, "on"), (False, "off")):
        ib = _imagebuilder(
            patched, kconfig.select(patched, WR902, use_wolfssl=use), tmp_path / dest
        )
        installed = dict.fromkeys(_default_packages(_ib(ib, "info")), "1")
        held = driver._notes_holding("wolfssl", notes, installed)
        assert any("apk-mbedtls stays" in n for n in held) is not use, (dest, held)


def test_flavours_from_a_wolfssl_imagebuilder(patched: Path, tmp_path: Path) -> None:
    """An ImageBuilder made with USE_WOLFSSL=y has wolfSSL defaults (libustream-wolfssl,
    wpad-basic-wolfssl, apk-wolfssl): asked for Mbed TLS or OpenSSL, the PACKAGES we give must
    leave no wolfSSL package. Oracle: the ImageBuilder Makefile's own BUILD_PACKAGES."""
    from openwrt_wolf.build import packages

    need_tools("make", "perl")
    ib = _imagebuilder(patched, kconfig.select(patched, WR902, use_wolfssl=True), tmp_path / "on")
    defaults = _default_packages(_ib(ib, "info"))
    assert "apk-wolfssl" in defaults
    want = {"mbedtls": {"libustream-mbedtls", "apk-mbedtls", "wpad-basic-mbedtls"},
            "openssl": {"libustream-openssl", "apk-openssl", "wpad-basic-openssl"},
            "wolfssl": {"libustream-wolfssl", "apk-wolfssl", "wpad-basic-wolfssl"}}  # fmt: skip
    for flavour, needed in want.items():
        ch = packages.changes(packages.rules(flavour, "25.12.5"), defaults)
        value = packages.packages_value(ch)
        args = ("-s", "val.BUILD_PACKAGES", f"USER_PROFILE=DEVICE_{WR902.profile}")
        built = set(_ib(ib, *args, f"USER_PACKAGES={value}").split())
        assert needed <= built, (flavour, sorted(built))
        others = {f for f in want if f != flavour}
        assert not [p for p in built if any(p.endswith(f"-{o}") for o in others)], (flavour, built)


def test_buildroot_wolfssl_notes_and_checks_follow_the_patch_set(patched: Path) -> None:
    """The buildroot backend builds the patched tree, where OpenWrt's own Kconfig selects
    apk-wolfssl instead of apk-mbedtls: data/flavours.toml's note that apk-mbedtls stays (true
    of OpenWrt's own packages, which the ImageBuilder installs) gives way to the patch set's
    swap, and an expanded .config still selecting apk-mbedtls is refused."""
    from openwrt_wolf.build import buildroot, packages
    from openwrt_wolf.catalogue import devices
    from openwrt_wolf.errors import WolfError

    sel = kconfig.select(patched, WR902, use_wolfssl=True)
    cfg = {k.removeprefix("CONFIG_"): v for k, v in sel.config.items()}
    rules = packages.rules("wolfssl", "25.12.5")
    brf = buildroot.flavour("wolfssl")
    stock = packages.changes(rules, None, stock=True).notes  # the stock packages' note
    assert any("apk-mbedtls stays" in n for n in stock)
    notes = brf.notes(stock, cfg)
    assert not any("apk-mbedtls stays" in n for n in notes)
    assert "apk-wolfssl replaces apk-mbedtls" in notes[-1]
    dev = devices.resolve("tl-wr902ac", "25.12.5")
    none = packages.Changes((), (), ())
    buildroot.verify(cfg, dev, brf, rules, none)  # the patched tree passes
    stock = {**cfg, "PACKAGE_apk-mbedtls": "y", "PACKAGE_apk-wolfssl": "n"}
    with pytest.raises(WolfError, match="CONFIG_PACKAGE_apk-mbedtls=y after make defconfig"):
        buildroot.verify(stock, dev, brf, rules, none)
    # without the swap in the expanded .config the note stays what it was
    assert brf.notes(rules.notes, stock) == rules.notes


def test_sdk_base_feed_compiles_what_the_patch_set_changes(patched: Path) -> None:
    """The sdk backend's choice, read from OpenWrt's own package metadata of the patched tree
    (tmp/.packageinfo: what scripts/feeds writes as feeds/base.index): of what an image
    installs, the packages whose source directory a patch touches and those linking
    libwolfssl (their ABI dependency names its build), each compiled by the name of its
    source directory (`make package/wolfssl/compile` builds libwolfssl)."""
    index = sdk.read_index(
        (patched / "tmp" / ".packageinfo").read_text(), "base", "tmp/.packageinfo"
    )
    touched = tuple(f for s in series.load(series.PATCHES_DIR) for f in s.touched())
    image = {"busybox", "uhttpd", "libubox", "zlib", "libustream-wolfssl", "px5g-wolfssl",
             "apk-wolfssl", "wpad-basic-wolfssl"}  # fmt: skip
    chosen = sdk.BaseFeed(patched, frozenset(image), "libwolfssl", touched, ()).choose(index)
    assert {n: s.make_name for n, s in chosen.items()} == {
        "apk-wolfssl": "apk",
        "libustream-wolfssl": "ustream-ssl",
        "libwolfssl": "wolfssl",
        "px5g-wolfssl": "px5g-wolfssl",
        "wpad-basic-wolfssl": "hostapd",
    }
    for s in chosen.values():  # the directories are the tree's own
        assert (patched / "package" / s.directory / "Makefile").is_file()
    # uencrypt-wolfssl links libwolfssl too, but an image without it does not need it
    assert "libwolfssl" in index["uencrypt-wolfssl"].depends


@pytest.mark.parametrize("name", ["armsr-armv8", "rpi-5"])
def test_disk_image_devices_as_openwrts_kconfig_sees_them(patched: Path, name: str) -> None:
    """The catalogue's 64-bit ARM entries against the tree's own Kconfig: the seed the buildroot
    backend renders for each flavour expands (conf) to the device, passes the backend's check,
    and gives the catalogue's package architecture and partition sizes (config/Config-images.in
    defaults for the target); armsr's seed adds its initramfs kernel and leaves out the
    u-boot for QEMU a generic profile selects by default."""
    from openwrt_wolf.build import buildroot, packages
    from openwrt_wolf.catalogue import devices

    dev = devices.resolve(name, "25.12.5")
    for flavour in ("mbedtls", "wolfssl"):
        rules = packages.rules(flavour, "25.12.5")
        brf = buildroot.flavour(flavour)
        none = packages.Changes((), (), ())
        seed = buildroot.render_seed(none, brf, dev, "25.12.5")
        lines = [ln for ln in seed.splitlines() if ln.startswith(("CONFIG_", "# CONFIG_"))]
        sel = kconfig.select(patched, kconfig.Device(dev.target, dev.subtarget, dev.profile),
                             use_wolfssl=False, extra=tuple(lines))  # fmt: skip
        cfg = {k.removeprefix("CONFIG_"): v for k, v in sel.config.items()}
        buildroot.verify(cfg, dev, brf, rules, none)
        assert cfg["TARGET_ARCH_PACKAGES"].strip('"') == dev.arch_packages
        assert int(cfg["TARGET_KERNEL_PARTSIZE"]) == dev.kernel_partsize
        assert int(cfg["TARGET_ROOTFS_PARTSIZE"]) == dev.rootfs_partsize
        assert cfg.get("TARGET_ROOTFS_INITRAMFS") == ("y" if name == "armsr-armv8" else None)
        assert "PACKAGE_u-boot-qemu_armv8" not in cfg  # QEMU's firmware, left out on armsr


PI5 = kconfig.Device("bcm27xx", "bcm2712", "rpi-5")
PI4 = kconfig.Device("bcm27xx", "bcm2711", "rpi-4")
CPU_CRYPTO = ("CONFIG_PACKAGE_libwolfsslcpu-crypto=y",)


@pytest.mark.parametrize(
    ("tree", "device", "use_wolfssl", "built_in"),
    [
        ("patched", PI5, True, True),  # 0007: the BCM2712 has the Crypto Extension
        ("patched", PI4, True, False),  # the BCM2711 has not: still only a module
        ("patched", PI5, False, False),  # USE_WOLFSSL off: as OpenWrt ships it
        ("pristine", PI5, False, False),
    ],
    ids=["pi5-on", "pi4-on", "pi5-off", "pi5-pristine"],
)
def test_cpu_crypto_gate_opens_for_bcm2712_only(
    request: pytest.FixtureRequest,
    tree: str,
    device: kconfig.Device,
    use_wolfssl: bool,
    built_in: bool,
) -> None:
    """OpenWrt's conf on `libwolfsslcpu-crypto=y`: DEPENDS `m||!TARGET_bcm27xx` keeps it out of
    every bcm27xx image; the series lets bcm2712 take it when USE_WOLFSSL is on."""
    root: Path = request.getfixturevalue(tree)
    sel = kconfig.select(root, device, use_wolfssl=use_wolfssl, extra=CPU_CRYPTO)
    got = sel.config.get("CONFIG_PACKAGE_libwolfsslcpu-crypto")
    assert (got == "y") is built_in, got
    if built_in:  # it provides libwolfssl: the regular build is not in the image beside it
        assert sel.config.get("CONFIG_PACKAGE_libwolfssl") != "y"
        assert sel.mbedtls() == []


@pytest.mark.parametrize(
    ("tree", "use_wolfssl", "distrib_target", "installs"),
    [
        ("patched", True, "bcm27xx/bcm2712", True),
        ("patched", True, "bcm27xx/bcm2711", False),
        ("patched", False, "bcm27xx/bcm2712", False),
        ("pristine", False, "bcm27xx/bcm2712", False),
        ("patched", True, "armsr/armv8", True),
    ],
    ids=["2712-on", "2711-on", "2712-off", "2712-pristine", "armsr-on"],
)
def test_cpu_crypto_preinst_offline(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    tree: str,
    use_wolfssl: bool,
    distrib_target: str,
    installs: bool,
) -> None:
    """The package's pre-install script as the Makefile expands it for AArch64 (GNU make) and
    run by sh as the ImageBuilder runs it (IPKG_INSTROOT set): it refuses every bcm27xx image
    but, with the series and USE_WOLFSSL, the BCM2712's."""
    root: Path = request.getfixturevalue(tree)
    sel = kconfig.select(root, PI5, use_wolfssl=use_wolfssl)
    printer = tmp_path / "print.mk"  # expanded once, as package-pack.mk writes the script
    printer.write_text("print-preinst:\n\t@:\n$(info $(Package/libwolfsslcpu-crypto/preinst))\n")
    with locked(root.parent / f"{root.name}.config.lock"):
        (root / ".config").write_text(_config_text(sel))
        made = subprocess.run(
            ["make", "-s", "-C", "package/libs/wolfssl", "-f", "Makefile", "-f", str(printer),
             f"TOPDIR={root}", "print-preinst"],
            cwd=root, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    assert made.returncode == 0 and made.stdout.startswith("#!/bin/sh"), made.stderr
    instroot = tmp_path / "root"
    (instroot / "etc").mkdir(parents=True)
    (instroot / "etc" / "openwrt_release").write_text(f"DISTRIB_TARGET='{distrib_target}'\n")
    script = tmp_path / "preinst"
    script.write_text(made.stdout)
    run = subprocess.run(["sh", str(script)], env={"IPKG_INSTROOT": str(instroot),
                         "PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
                         timeout=60)  # fmt: skip
    assert (run.returncode == 0) is installs, run.stdout + run.stderr
    assert ("OK" in run.stdout + run.stderr) is installs

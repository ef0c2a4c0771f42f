"""Reading devices from an OpenWrt tree (openwrt_wolf.catalogue.devtree, mk, dts, devices_toml).

The fake tree below is written in OpenWrt's own formats; every expected value is known from
the snippet itself. GNU make is a second, independent oracle: a harness makefile runs the real
image Makefile through `make` and prints each device's variables, which must equal ours.
The tests over a real tree read OpenWrt v25.12.5 (fixture openwrt_tree_25125: $OPENWRT_TREE or
the shared snapshot; skipped without either, a failure in CI).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from openwrt_wolf.catalogue import devices, devices_toml, devtree, dts
from openwrt_wolf.catalogue.mk import Make, MakeError
from openwrt_wolf.errors import WolfError
from tests.conftest import need_tools

ROOT = Path(__file__).resolve().parents[2]

# --- a small OpenWrt tree -------------------------------------------------------------------

FAKE = {
    "rules.mk": "# the build's rules: nothing the device reader needs\n",
    "include/version.mk": (
        "VERSION_NUMBER:=$(call qstrip,$(CONFIG_VERSION_NUMBER))\n"
        "VERSION_NUMBER:=$(if $(VERSION_NUMBER),$(VERSION_NUMBER),25.12.5)\n"
    ),
    "include/image.mk": """\
        define Device/InitProfile
          PROFILES := $(PROFILE)
          DEVICE_TITLE = $$(DEVICE_VENDOR) $$(DEVICE_MODEL)$$(if $$(DEVICE_VARIANT), \\
            $$(DEVICE_VARIANT))
          DEVICE_VENDOR :=
          DEVICE_MODEL :=
          DEVICE_VARIANT :=
          DEVICE_PACKAGES :=
        endef

        define Device/Init
          DEVICE_NAME := $(1)
          KERNEL:=
          IMAGES :=
          IMAGE_SIZE :=
          KERNEL_SIZE :=
          BLOCKSIZE :=
          DEVICE_DTS :=
          DEVICE_DTS_DIR :=
          SOC :=
          SUPPORTED_DEVICES := $(subst _,$(comma),$(1))
          BROKEN :=
        endef
        """,
    "config/Config-images.in": """\
        \tmenuconfig TARGET_ROOTFS_SQUASHFS
        \t\tbool "squashfs"

        \t\tconfig TARGET_SQUASHFS_BLOCK_SIZE
        \t\t\tint "Block size (in KiB)"
        \t\t\tdepends on TARGET_ROOTFS_SQUASHFS
        \t\t\tdefault 64 if LOW_MEMORY_FOOTPRINT
        \t\t\tdefault 1024 if (SMALL_FLASH && !LOW_MEMORY_FOOTPRINT)
        \t\t\tdefault 256
        \t\t\thelp
        \t\t\t  Select squashfs block size
        """,
    "scripts/target-metadata.pl": """\
        \t\t/^low_mem$/ and $ret .= "\\tselect LOW_MEMORY_FOOTPRINT\\n";
        \t\t/^small_flash$/ and $ret .= "\\tselect SMALL_FLASH\\n";
        \t\t/^squashfs$/ and $ret .= "\\tselect USES_SQUASHFS\\n";
        """,
    "target/linux/fakeath/Makefile": """\
        include $(TOPDIR)/rules.mk

        ARCH:=mips
        BOARD:=fakeath
        CPU_TYPE:=24kc
        SUBTARGETS:=generic tiny small

        FEATURES:=ramdisk squashfs

        include $(INCLUDE_DIR)/target.mk

        DEFAULT_PACKAGES += kmod-gpio-button-hotplug

        $(eval $(call BuildTarget))
        """,
    "target/linux/fakeath/generic/target.mk": "BOARDNAME:=Generic\n",
    "target/linux/fakeath/tiny/target.mk": "BOARDNAME:=Tiny\nFEATURES += low_mem small_flash\n",
    "target/linux/fakeath/small/target.mk": "ARCH:=mipsel\nFEATURES+=small_flash\n",
    "target/linux/fakeath/image/Makefile": """\
        include $(TOPDIR)/rules.mk
        include $(INCLUDE_DIR)/image.mk

        KERNEL_LOADADDR = 0x80060000

        define Device/Default
          DEVICE_DTS_DIR := ../dts
          DEVICE_DTS = $$(SOC)_$(1)
          BLOCKSIZE := 64k
          KERNEL := kernel-bin | append-dtb | lzma | uImage lzma
          IMAGES := sysupgrade.bin
          IMAGE/sysupgrade.bin = append-kernel | pad-to $$$$(BLOCKSIZE) | \\
        \tappend-rootfs | pad-rootfs | check-size | append-metadata
        endef

        include $(SUBTARGET).mk

        ifeq ($(SUBTARGET),generic)
        include common-vendor.mk
        include generic-vendor.mk
        endif

        $(eval $(call BuildImage))
        """,
    "target/linux/fakeath/image/common-vendor.mk": """\
        DEVICE_VARS += TPLINK_BOARD_ID

        define Device/vendor-safeloader
          DEVICE_VENDOR := Vendor
          TPLINK_BOARD_ID :=
          TPLINK_HWID := 0x0
          KERNEL := kernel-bin | append-dtb | lzma | tplink-v1-header -O
          IMAGES += factory.bin
          IMAGE/sysupgrade.bin := append-rootfs | tplink-safeloader sysupgrade | \\
        \tcheck-size | append-metadata
          IMAGE/factory.bin := append-rootfs | tplink-safeloader factory
        endef
        """,
    "target/linux/fakeath/image/generic.mk": """\
        define Device/vendor_plain-common
          SOC := ar9331
          DEVICE_VENDOR := Plain
          DEVICE_PACKAGES := kmod-usb2
          IMAGE_SIZE := 16000k
          SUPPORTED_DEVICES += plain
        endef

        define Device/vendor_plain16
          $(Device/vendor_plain-common)
          DEVICE_MODEL := P16
          KERNEL_SIZE := 2048k
          DEVICE_PACKAGES += kmod-usb-chipidea2
        endef
        TARGET_DEVICES += vendor_plain16

        TARGET_DEVICES += vendor_ghost

        """,
    "target/linux/fakeath/image/generic-vendor.mk": """\
        define Device/vendor_router-v1
          $(Device/vendor-safeloader)
          SOC := qca9531
          DEVICE_MODEL := Router
          DEVICE_VARIANT := v1
          DEVICE_PACKAGES := kmod-usb2 kmod-ath10k \\
        \t-swconfig
          TPLINK_BOARD_ID := ROUTER-V1
          IMAGE_SIZE := 7360k
          SUPPORTED_DEVICES += router-v1
        endef
        TARGET_DEVICES += vendor_router-v1
        """,
    "target/linux/fakeath/image/tiny.mk": """\
        define Device/vendor_small
          SOC := ar9331
          DEVICE_VENDOR := Small
          DEVICE_MODEL := S1
          BLOCKSIZE := 4k
          IMAGE_SIZE := 3776k
          IMAGE/sysupgrade.bin := append-kernel | append-rootfs | pad-rootfs | check-size
        endef
        TARGET_DEVICES += vendor_small
        """,
    # GNU make stops at this file: it is a subtarget of its own so the others still compare
    "target/linux/fakeath/image/small.mk": """\
        define Device/vendor_bad
          SOC := ar9331
          IMAGE_SIZE := $(call broken
        endef
        TARGET_DEVICES += vendor_bad
        """,
    "target/linux/fakeath/dts/qca9531.dtsi": """\
        // SPDX-License-Identifier: GPL-2.0-or-later OR MIT
        #include <dt-bindings/gpio/gpio.h>

        / {
        \t#address-cells = <1>;
        \t#size-cells = <1>;

        \tspi: spi@1f000000 {
        \t\treg = <0x1f000000 0x10>;
        \t\tstatus = "disabled";
        \t};
        };
        """,
    "target/linux/fakeath/dts/qca9531_vendor_router-v1.dts": """\
        /dts-v1/;
        #include "qca9531.dtsi"

        / {
        \tmodel = "Vendor Router v1"; /* a comment { with braces } */
        };

        &spi {
        \tstatus = "okay";

        \tflash@0 {
        \t\tcompatible = "jedec,spi-nor";
        \t\treg = <0>;

        \t\tpartitions {
        \t\t\tcompatible = "fixed-partitions";
        \t\t\t#address-cells = <1>;
        \t\t\t#size-cells = <1>;

        \t\t\tpartition@0 {
        \t\t\t\tlabel = "u-boot";
        \t\t\t\treg = <0x000000 0x020000>;
        \t\t\t\tread-only;
        \t\t\t};

        \t\t\tpartition@20000 {
        \t\t\t\tcompatible = "tplink,firmware";
        \t\t\t\tlabel = "firmware";
        \t\t\t\treg = <0x020000 0x720000>;
        \t\t\t};

        \t\t\tart: partition@7f0000 {
        \t\t\t\tlabel = "art";
        \t\t\t\treg = <0x7f0000 0x010000>;
        \t\t\t};
        \t\t};
        \t};
        };
        """,
    "target/linux/fakeath/dts/ar9331_vendor_plain.dtsi": """\
        #include "qca9531.dtsi"

        &spi {
        \tflash@0 {
        \t\tpartitions {
        \t\t\tcompatible = "fixed-partitions";
        \t\t\t#address-cells = <1>;
        \t\t\t#size-cells = <1>;

        \t\t\tpartition@0 {
        \t\t\t\tlabel = "u-boot";
        \t\t\t\treg = <0x000000 0x040000>;
        \t\t\t};

        \t\t\tnor_firmware: partition@50000 {
        \t\t\t\tlabel = "nor_firmware";
        \t\t\t\treg = <0x050000 0xfa0000>;
        \t\t\t};

        \t\t\tpartition@ff0000 {
        \t\t\t\tlabel = "art";
        \t\t\t\treg = <0xff0000 0x010000>;
        \t\t\t};
        \t\t};
        \t};
        };
        """,
    "target/linux/fakeath/dts/ar9331_vendor_plain16.dts": """\
        #include "ar9331_vendor_plain.dtsi"

        &nor_firmware {
        \tcompatible = "denx,uimage";
        \tlabel = "firmware";
        };
        """,
}


def write_tree(root: Path) -> Path:
    for rel, text in FAKE.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    return root


@pytest.fixture(scope="module")
def fake_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tree(tmp_path_factory.mktemp("openwrt"))


@pytest.fixture(scope="module")
def fake_read(fake_tree: Path) -> devtree.TreeRead:
    return devtree.read_tree(fake_tree, ["fakeath"])


def by_profile(read: devtree.TreeRead, profile: str) -> devtree.TreeDevice:
    return next(d for d in read.devices if d.profile == profile)


# --- the fake tree: exact values --------------------------------------------------------------


def test_safeloader_device_inherits_common_stanza(fake_read: devtree.TreeRead) -> None:
    d = by_profile(fake_read, "vendor_router-v1")
    assert (d.target, d.subtarget, d.arch_packages) == ("fakeath", "generic", "mips_24kc")
    assert d.title == "Vendor Router v1"  # DEVICE_VENDOR from the inherited stanza
    assert d.soc == "qca9531"
    assert (d.image_size, d.image_size_text) == (7360 * 1024, "7360k")
    assert (d.blocksize, d.kernel_size) == (65536, None)  # BLOCKSIZE from Device/Default
    assert d.recipe == "tplink-safeloader"
    assert d.sysupgrade == (
        "append-rootfs | tplink-safeloader sysupgrade | check-size | append-metadata"
    )
    assert d.device_packages == ("kmod-usb2", "kmod-ath10k", "-swconfig")
    assert d.supported_devices == ("vendor,router-v1", "router-v1")
    assert d.tplink == {"tplink_board_id": "ROUTER-V1", "tplink_hwid": "0x0"}
    assert d.squashfs_block == 256 * 1024


def test_default_recipe_and_plus_equals(fake_read: devtree.TreeRead) -> None:
    d = by_profile(fake_read, "vendor_plain16")
    assert d.title == "Plain P16"
    assert d.image_size == 16000 * 1024 and d.kernel_size == 2048 * 1024
    assert d.device_packages == ("kmod-usb2", "kmod-usb-chipidea2")
    assert d.supported_devices == ("vendor,plain16", "plain")
    # Device/Default's $$$$(BLOCKSIZE) resolves to this device's BLOCKSIZE
    assert d.sysupgrade == (
        "append-kernel | pad-to 64k | append-rootfs | pad-rootfs | check-size | append-metadata"
    )
    assert d.recipe == "ath79-default"
    assert d.tplink == {}


def test_subtargets_features_arch_and_squashfs_block(fake_read: devtree.TreeRead) -> None:
    subs = {s.subtarget: s for s in fake_read.subtargets}
    assert subs["generic"].features == ("ramdisk", "squashfs")
    assert subs["generic"].squashfs_block == 256 * 1024
    assert subs["tiny"].features == ("ramdisk", "squashfs", "low_mem", "small_flash")
    assert subs["tiny"].squashfs_block == 64 * 1024  # low_mem wins over small_flash
    assert subs["small"].squashfs_block == 1024 * 1024
    assert subs["small"].arch_packages == "mipsel_24kc"  # ARCH overridden in target.mk
    assert (subs["generic"].profiles, subs["tiny"].profiles, subs["small"].profiles) == (3, 1, 1)
    small = by_profile(fake_read, "vendor_small")
    assert (small.subtarget, small.squashfs_block, small.blocksize) == ("tiny", 65536, 4096)
    assert small.recipe == "other"  # no pad-to, no metadata: not a pipeline the fit model knows


def test_devices_that_cannot_be_read_say_why(fake_read: devtree.TreeRead) -> None:
    bad = {u.profile: u.reason for u in fake_read.unreadable}
    assert set(bad) == {"vendor_ghost", "vendor_bad"}
    assert "no `define Device/vendor_ghost`" in bad["vendor_ghost"]
    assert "unterminated variable reference" in bad["vendor_bad"]
    assert len(fake_read.devices) == 3


def test_dts_firmware_partition_cross_check(fake_read: devtree.TreeRead) -> None:
    router = by_profile(fake_read, "vendor_router-v1")
    assert router.firmware is not None
    assert router.firmware.dts == "target/linux/fakeath/dts/qca9531_vendor_router-v1.dts"
    assert router.firmware_partition == devices.Partition("firmware", 0x20000, 0x720000)
    assert router.dts_check() == "differs"  # 7360k = 0x730000 > 0x720000
    assert router.flash_size == 8 * 2**20  # art ends at 0x800000
    plain = by_profile(fake_read, "vendor_plain16")
    # &nor_firmware { label = "firmware"; } in the .dts relabels the .dtsi's partition
    assert plain.firmware_partition == devices.Partition("firmware", 0x50000, 0xFA0000)
    assert plain.dts_check() == "ok"
    assert plain.flash_size == 16 * 2**20
    small = by_profile(fake_read, "vendor_small")
    assert small.firmware is not None and small.firmware.partition is None
    assert "not in the tree" in small.firmware.note
    assert small.dts_check() == "unknown"


def test_tree_version(fake_tree: Path) -> None:
    assert devtree.tree_version(fake_tree) == "25.12.5"


# --- GNU make as the oracle -----------------------------------------------------------------

KEYS = ("IMAGE_SIZE", "KERNEL_SIZE", "BLOCKSIZE", "SOC", "DEVICE_PACKAGES", "SUPPORTED_DEVICES",
        "DEVICE_TITLE", "IMAGES")  # fmt: skip


def make_dump(tree: Path, target: str, subtarget: str, work: Path) -> dict[str, dict[str, str]]:
    """Run the tree's image Makefile through GNU make with a harness image.mk that holds the
    tree's own Device/InitProfile and Device/Init and prints every device's variables."""
    inc = work / "include"
    inc.mkdir(parents=True, exist_ok=True)
    (work / "rules.mk").write_text("comma:=,\nempty:=\nspace:=$(empty) $(empty)\n")
    image_mk = (tree / "include/image.mk").read_text()
    stanzas = re.findall(r"^define Device/(?:InitProfile|Init)\n.*?^endef\n", image_mk, re.S | re.M)
    prints = "".join(f"$$(info WOLF\t$(1)\t{k}\t$$(strip $$({k})))\n" for k in KEYS)
    # make expands an image recipe once more when it runs it: eval it the same way
    prints += "$$(eval WOLF_PIPE := $$(IMAGE/sysupgrade.bin))\n"
    prints += "$$(info WOLF\t$(1)\tIMAGE/sysupgrade.bin\t$$(strip $$(WOLF_PIPE)))\n"
    (inc / "image.mk").write_text(
        "".join(stanzas)
        + "define Device\n  $(call Device/InitProfile,$(1))\n  $(call Device/Init,$(1))\n"
        "  $(call Device/Default,$(1))\n  $(call Device/$(1),$(1))\n" + prints + "\nendef\n"
        "define BuildImage\n  $(foreach device,$(TARGET_DEVICES),$(call Device,$(device)))\n"
        "endef\n"
    )
    p = subprocess.run(
        [
            "make",
            "-s",
            "--no-print-directory",
            "-C",
            str(tree / "target/linux" / target / "image"),
            f"TOPDIR={work}",
            f"INCLUDE_DIR={inc}",
            f"SUBTARGET={subtarget}",
            f"BOARD={target}",
            "wolf-nothing",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    out: dict[str, dict[str, str]] = {}
    for line in p.stdout.splitlines():
        parts = line.split("\t")
        if len(parts) == 4 and parts[0] == "WOLF":
            out.setdefault(parts[1], {})[parts[2]] = " ".join(parts[3].split())
    return out


def ours(d: devtree.TreeDevice) -> dict[str, str]:
    return {
        "IMAGE_SIZE": d.image_size_text,
        "KERNEL_SIZE": d.kernel_size_text,
        "BLOCKSIZE": d.blocksize_text,
        "SOC": d.soc,
        "DEVICE_PACKAGES": " ".join(d.device_packages),
        "SUPPORTED_DEVICES": " ".join(d.supported_devices),
        "DEVICE_TITLE": d.title,
        "IMAGES": " ".join(d.images),
        "IMAGE/sysupgrade.bin": d.sysupgrade,
    }


def compare_with_make(
    read: devtree.TreeRead, tree: Path, work: Path, targets: list[str]
) -> tuple[int, list[str]]:
    mine = {d.profile: d for d in read.devices}
    seen = 0
    diffs = []
    for st in read.subtargets:
        if st.target not in targets or not st.profiles:
            continue
        for profile, theirs in make_dump(tree, st.target, st.subtarget, work).items():
            if profile not in mine:
                continue
            seen += 1
            for key, value in ours(mine[profile]).items():
                if key == "IMAGE/sysupgrade.bin" and "sysupgrade.bin" not in mine[profile].images:
                    continue  # no such image: we record no pipeline, make has a leftover one
                if theirs.get(key, "") != value:
                    diffs.append(f"{profile} {key}: make {theirs.get(key)!r}, ours {value!r}")
    return seen, diffs


def test_fake_tree_agrees_with_gnu_make(fake_tree: Path, fake_read: devtree.TreeRead,
                                        tmp_path: Path) -> None:  # fmt: skip
    need_tools("make")
    seen, diffs = compare_with_make(fake_read, fake_tree, tmp_path, ["fakeath"])
    assert seen == 3  # vendor_ghost and vendor_bad print nothing in make either
    assert diffs == []


MAKE_SNIPPETS = {
    "A": ("A := one\nA += two\n", "one two"),
    "B": ("X = early\nB = $(X) late\nX = changed\n", "changed late"),
    "C": ("C ?= set\nC ?= ignored\n", "set"),
    "D": ("define tpl\n$(1)-$(2)\nendef\nD := $(call tpl,a,b)\n", "a-b"),
    "E": ("E := $(foreach w,x y,<$(w)>)\n", "<x> <y>"),
    "F": ("F := $(patsubst %.dts,%.dtb,a.dts b.dts) $(filter k%,kmod x kern)\n",
          "a.dtb b.dtb kmod kern"),
    "G": ("G := a \\\n\tb \\\n   c\n", "a b c"),
    "H": ("V := 1\nifeq ($(V),1)\nH := yes\nelse\nH := no\nendif\n", "yes"),
    "I": ("ifneq ($(UNSET),)\nI := set\nelse ifeq (x,x)\nI := elseif\nendif\n", "elseif"),
    "J": ("J := $(if $(UNSET),a,b)$(subst _,$(comma),x_y)$(word 2,p q r)\n", "bx,yq"),
    "K": ("define Device/x\n  K := $$$$(Y)\nendef\nY := why\n$(eval $(call Device/x))\n", "$(Y)"),
    # kirkwood's DEVICE_COMPAT_MESSAGE: `$\` joins lines without a space, also inside define
    "L": ("define D\n  L := a$\\\n  b \\\n   c\nendef\n$(eval $(D))\n", "ab c"),
}  # fmt: skip


@pytest.mark.parametrize("var", sorted(MAKE_SNIPPETS))
def test_make_evaluator_agrees_with_gnu_make(var: str, tmp_path: Path) -> None:
    need_tools("make")
    text, expected = MAKE_SNIPPETS[var]
    text = "comma:=,\n" + text
    m = Make()
    m.eval(text)
    mk = tmp_path / "Makefile"
    mk.write_text(text + f"$(info WOLF=$({var}))\nall:\n\t@true\n")
    p = subprocess.run(["make", "-s", "-f", str(mk)], capture_output=True, text=True, timeout=30)
    theirs = p.stdout.splitlines()[0].removeprefix("WOLF=")
    assert theirs == expected  # the snippet's documented meaning
    assert m.get(var) == expected


def test_make_wildcard_agrees_with_gnu_make(tmp_path: Path) -> None:
    need_tools("make")
    for name in ("common-a.mk", "common-b.mk", "generic.mk", "sub/x.dts"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("")
    text = "W := $(wildcard common-*.mk) $(wildcard sub/*.dts) $(wildcard none-*)\n"
    (tmp_path / "Makefile").write_text(text + "$(info WOLF=$(W))\nall:\n\t@true\n")
    p = subprocess.run(["make", "-s", "-C", str(tmp_path)], capture_output=True, text=True)
    m = Make(cwd=tmp_path)
    m.eval(text)
    theirs = p.stdout.splitlines()[0].removeprefix("WOLF=")
    assert theirs.strip() == "common-a.mk common-b.mk sub/x.dts"
    assert m.get("W") == theirs


def test_make_evaluator_errors() -> None:
    with pytest.raises(MakeError, match="unterminated"):
        Make().eval("A := $(call x\n")
    with pytest.raises(MakeError, match="missing endif"):
        Make().eval("ifeq (a,a)\nA := 1\n")
    with pytest.raises(MakeError, match="no endef"):
        Make().eval("define X\nA := 1\n")
    with pytest.raises(MakeError, match="nests too deep"):
        m = Make()
        m.eval("A = $(A)x\n")
        m.get("A")


def test_dts_parser_merges_and_deletes() -> None:
    root = dts.parse(
        textwrap.dedent("""\
        /dts-v1/;
        / { a: node@1 { label = "firmware"; reg = <0x10 0x20>; }; b: gone { x; }; };
        &a { reg = <0x10 0x30>; };
        /delete-node/ &b;
        """)
    )
    node = root.children["node@1"]
    assert node.props["reg"] == "<0x10 0x30>"
    assert "gone" not in root.children


# --- the command ------------------------------------------------------------------------------


def run_invoke(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "invoke", "devices", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "250"},
    )


def test_cli_tree_prints_devices_counts_and_unreadable(fake_tree: Path) -> None:
    p = run_invoke("--tree", str(fake_tree), "--target", "fakeath")
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "fakeath: 3 devices read, 2 could not be read" in out
    assert "could not read fakeath/generic vendor_ghost: TARGET_DEVICES lists it" in out
    assert re.search(r"vendor_router-v1 .*7360k .*tplink-safeloader .*0x020000\+0x720000", out)
    assert "vendor_router-v1: IMAGE_SIZE 7360k = 7536640 B" in out
    assert "(IMAGE_SIZE 65536 B larger)" in out


def test_cli_alias_says_which_profile(openwrt_tree_25125: Path) -> None:
    p = run_invoke("--tree", str(openwrt_tree_25125), "--target", "ath79", "--device", "tl-wr902ac")
    assert p.returncode == 0, p.stderr
    assert "--device tl-wr902ac: catalogue alias of tplink_tl-wr902ac-v1" in p.stdout
    assert re.search(r"tplink_tl-wr902ac-v1 .*ath79/generic .*qca9531 .*7360k", p.stdout)


def test_cli_device_filter(fake_tree: Path) -> None:
    p = run_invoke("--tree", str(fake_tree), "--target", "fakeath", "--device", "vendor_plain*")
    assert p.returncode == 0, p.stderr
    assert "vendor_plain16" in p.stdout and "vendor_router-v1 " not in p.stdout
    assert "IMAGE/sysupgrade.bin = append-kernel | pad-to 64k" in p.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tree", "{tmp}"], "error: {tmp} is not an OpenWrt source tree (no include/image.mk, "
         "target/linux, rules.mk) (give the top directory of an OpenWrt checkout"),
        (["--tree", "{tree}", "--target", "nosuch"], "error: target nosuch is not in"),
        (["--tree", "{tree}", "--target", "fakeath", "--device", "vendor_plain17"],
         "error: no device 'vendor_plain17' in the targets read from"),
        (["--write"], "error: --write needs --tree PATH"),
        (["--tree", "{tree}", "--target", "fakeath", "--release", "24.10.8", "--write"],
         "error: the tree is OpenWrt 25.12.5, not 24.10.8: --write would mix releases"),
    ],
)  # fmt: skip
def test_cli_bad_input_is_one_line(
    args: list[str], message: str, fake_tree: Path, tmp_path: Path
) -> None:
    fill = {"tmp": str(tmp_path), "tree": str(fake_tree)}
    p = run_invoke(*(a.format(**fill) for a in args))
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message.format(**fill)), p.stderr


# --- writing the catalogue ------------------------------------------------------------------

CATALOGUE = """\
# hand-written header comment
[[device]]
profile = "vendor_router-v1"
aliases = ["router", "rv1"]   # chosen by hand
title = "Old title"
release = "25.12.5"
target = "fakeath"
subtarget = "generic"
arch_packages = "mips_24kc"
flash_size = "8M"
image_size = "7000k"
kernel_size = "1M"
blocksize = "64k"
recipe = "tplink-safeloader"
squashfs_block = "256k"
safeloader_max_kernel_rootfs = 0x710000
tplink_board_id = "ROUTER-V1"
device_packages = [
  "kmod-usb2",
]

[[device]]
profile = "vendor_router-v1"
release = "24.10.8"
target = "fakeath"
subtarget = "generic"
arch_packages = "mips_24kc"
recipe = "other"
squashfs_block = "64k"
"""


def test_write_updates_release_entries_and_keeps_hand_fields(
    fake_read: devtree.TreeRead, tmp_path: Path
) -> None:
    path = tmp_path / "devices.toml"
    path.write_text(CATALOGUE)
    report = devices_toml.write(
        path, fake_read, "25.12.5", add=[by_profile(fake_read, "vendor_plain16")]
    )
    assert (report.updated, report.added) == (["vendor_router-v1"], ["vendor_plain16"])
    text = path.read_text()
    assert text.startswith("# hand-written header comment\n")
    assert 'aliases = ["router", "rv1"]   # chosen by hand' in text
    assert "safeloader_max_kernel_rootfs = 0x710000" in text
    raw = tomllib.loads(text)["device"]
    new, old, added = raw
    assert new["title"] == "Vendor Router v1"
    assert new["image_size"] == "7360k"
    assert "kernel_size" not in new  # the tree sets none: the stale value goes
    assert new["flash_size"] == "8M"  # hand-written, kept
    assert new["soc"] == "qca9531"
    assert new["firmware_partition"] == {"name": "firmware", "offset": 0x20000, "size": 0x720000}
    assert new["device_packages"] == ["kmod-usb2", "kmod-ath10k", "-swconfig"]
    assert new["supported_devices"] == ["vendor,router-v1", "router-v1"]
    assert new["tplink_hwid"] == 0
    assert old["squashfs_block"] == "64k" and old["recipe"] == "other"  # other release untouched
    assert added["profile"] == "vendor_plain16" and added["aliases"] == []
    assert added["kernel_size"] == "2048k" and added["flash_size"] == "16M"
    for entry in raw:  # the catalogue loader accepts every entry
        devices.device_from_dict(entry)
    # a second run changes nothing
    again = devices_toml.write(path, fake_read, "25.12.5")
    assert again.updated == [] and set(again.unchanged) == {"vendor_router-v1", "vendor_plain16"}
    assert path.read_text() == text


def test_compare_reports_differences(fake_read: devtree.TreeRead) -> None:
    entry = devices.device_from_dict(tomllib.loads(CATALOGUE)["device"][0])
    comp = devices_toml.compare([entry], fake_read)
    got = {d.field: (d.catalogue, d.tree) for d in comp.differences}
    assert got["image_size"] == ("7000k", "7360k")
    assert got["kernel_size"] == ("1024k", "–")
    assert got["title"] == ("Old title", "Vendor Router v1")
    assert "flash_size" not in got  # 8M both


def test_bad_catalogue_device_in_tree_is_an_error(fake_tree: Path) -> None:
    with pytest.raises(WolfError, match="is not an OpenWrt source tree"):
        devtree.read_tree(fake_tree / "target")


# --- a real tree ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_read(openwrt_tree_25125: Path) -> devtree.TreeRead:
    return devtree.read_tree(openwrt_tree_25125, ["ath79", "ramips", "malta", "armsr", "bcm27xx"])


def test_real_tree_known_devices(real_read: devtree.TreeRead) -> None:
    # facts from shared/docs/openwrt-facts.md (v25.12.5)
    v1 = by_profile(real_read, "tplink_tl-wr902ac-v1")
    assert (v1.target_path, v1.soc, v1.image_size, v1.blocksize) == (
        "ath79/generic", "qca9531", 7360 * 1024, 65536)  # fmt: skip
    assert v1.recipe == "tplink-safeloader" and v1.squashfs_block == 256 * 1024
    assert v1.firmware_partition == devices.Partition("firmware", 0x020000, 0x730000)
    gl = by_profile(real_read, "glinet_gl-ar300m16")
    assert (gl.image_size, gl.recipe) == (16000 * 1024, "ath79-default")
    assert gl.firmware_partition == devices.Partition("firmware", 0x050000, 0xFA0000)
    v3 = by_profile(real_read, "tplink_tl-wr902ac-v3")
    assert (v3.target_path, v3.soc, v3.arch_packages) == ("ramips/mt76x8", "mt7628an",
                                                          "mipsel_24kc")  # fmt: skip
    assert (v3.image_size, v3.recipe, v3.squashfs_block) == (7808 * 1024, "tplink-v2", 1 << 20)
    assert v3.firmware_partition == devices.Partition("firmware", 0x020000, 0x7A0000)
    assert v3.tplink["tplink_flashlayout"] == "8Mmtk"
    subs = {s.path: s for s in real_read.subtargets}
    assert subs["ath79/generic"].arch_packages == "mips_24kc"
    assert subs["ath79/tiny"].squashfs_block == 64 * 1024
    assert subs["malta/be"].arch_packages == "mips_24kc"
    assert subs["malta/le"].arch_packages == "mipsel_24kc"
    # include/target.mk's CPU_TYPE ?= generic for aarch64 (the .config's TARGET_ARCH_PACKAGES)
    assert subs["armsr/armv8"].arch_packages == "aarch64_generic"
    assert subs["bcm27xx/bcm2712"].arch_packages == "aarch64_cortex-a76"
    # the disk-image recipes, recognised from IMAGE/sysupgrade.img.gz and IMAGE/combined-efi.img
    by_sub = {(d.profile, d.subtarget): d.recipe for d in real_read.devices}
    assert by_sub[("rpi-5", "bcm2712")] == by_sub[("rpi-4", "bcm2711")] == "rpi-sdcard"
    assert by_sub[("generic", "armv8")] == by_sub[("generic", "armv7")] == "efi-combined"


def test_real_tree_catalogue_agrees(real_read: devtree.TreeRead) -> None:
    comp = devices_toml.compare(devices.for_release("25.12.5"), real_read)
    assert comp.absent == []
    # only fields the catalogue leaves out may differ (tplink_* it does not need)
    assert all(d.catalogue == "–" and d.field.startswith("tplink_") for d in comp.differences)


def test_real_tree_agrees_with_gnu_make(
    real_read: devtree.TreeRead, openwrt_tree_25125: Path, tmp_path: Path
) -> None:
    need_tools("make")
    seen, diffs = compare_with_make(real_read, openwrt_tree_25125, tmp_path, ["ath79", "ramips"])
    assert seen == len([d for d in real_read.devices if d.target in ("ath79", "ramips")])
    # make itself leaks SENAO_IMGNAME from the previous device into these three, which
    # never set it; we read each device on its own.
    assert all(
        re.match(r"fortinet_fap-22\d-[bc] IMAGE/sysupgrade.bin: .*senao-tar-gz ar71xx", d)
        for d in diffs
    ), diffs


def test_catalogue_24108_is_the_24108_tree(openwrt_tree_24108: Path, tmp_path: Path) -> None:
    """The 24.10.8 entries were written by `devices --tree <v24.10.8> --write`; GNU make and the
    devices' DTS are the oracles for what the tree says, openwrt-facts.md for the values."""
    need_tools("make")
    read = devtree.read_tree(openwrt_tree_24108, ["ath79", "ramips"])
    assert read.version == "24.10.8"
    cat = devices.for_release("24.10.8")
    assert {d.profile for d in cat} == {
        "tplink_tl-wr902ac-v1", "glinet_gl-ar300m16", "tplink_tl-wr902ac-v3"
    }  # fmt: skip
    comp = devices_toml.compare(cat, read)
    assert comp.absent == [] and comp.differences == []
    # the values OpenWrt's own make gives for these devices (the same as 25.12.5's facts)
    want = {"tplink_tl-wr902ac-v1": ("7360k", "64k"), "glinet_gl-ar300m16": ("16000k", "64k"),
            "tplink_tl-wr902ac-v3": ("7808k", "64k")}  # fmt: skip
    got = {}
    for target, sub in (("ath79", "generic"), ("ramips", "mt76x8")):
        dump = make_dump(openwrt_tree_24108, target, sub, tmp_path / target)
        got |= {p: (v["IMAGE_SIZE"], v["BLOCKSIZE"]) for p, v in dump.items() if p in want}
    assert got == want
    for d in cat:
        dump_pipe = by_profile(read, d.profile).sysupgrade
        assert dump_pipe and d.recipe != "other"
    for d in cat:
        tree_dev = by_profile(read, d.profile)
        assert tree_dev.dts_check() == "ok"  # IMAGE_SIZE = the DTS firmware partition
    assert devices.resolve("tl-wr902ac", "24.10.8").profile == "tplink_tl-wr902ac-v1"

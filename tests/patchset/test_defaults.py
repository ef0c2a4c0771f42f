"""Per-profile default package evaluation: Kconfig text written here by hand; the real scan of
a pristine vs. patched v25.12.5 tree (the shared snapshot, or $OPENWRT_TREE; in CI)."""

from __future__ import annotations

from pathlib import Path

import pytest

from openwrt_wolf.errors import WolfError
from openwrt_wolf.patchset import defaults
from tests.conftest import need_tools

KCONFIG = """\
config DEFAULT_TARGET_ath79_generic
\tbool
\tselect DEFAULT_libustream-mbedtls if TARGET_PER_DEVICE_ROOTFS

config TARGET_ath79_generic_DEVICE_a
\tbool "A"
\tdepends on TARGET_ath79_generic
\tselect DEFAULT_base-files
\tselect DEFAULT_libustream-mbedtls if !USE_WOLFSSL
\tselect DEFAULT_libustream-wolfssl if USE_WOLFSSL
\thelp
\t  A

config TARGET_ath79_generic_DEVICE_b
\tbool "B"
\tdepends on TARGET_ath79_generic
\tselect DEFAULT_base-files

config TARGET_ath79_generic_legacy
\tbool "a subtarget whose name extends the target's, not a profile"
\tdepends on TARGET_ath79

config TARGET_ath79_nand_DEVICE_c
\tbool "C"
\tselect DEFAULT_other
"""


def test_device_selects_evaluates_conditions() -> None:
    off = defaults.device_selects(KCONFIG, "ath79_generic", {"USE_WOLFSSL": False})
    on = defaults.device_selects(KCONFIG, "ath79_generic", {"USE_WOLFSSL": True})
    assert off == {
        "DEVICE_a": ["base-files", "libustream-mbedtls"],
        "DEVICE_b": ["base-files"],
    }
    assert on["DEVICE_a"] == ["base-files", "libustream-wolfssl"]


def test_compare_names_profile_and_packages() -> None:
    t = "ath79/generic"
    before = defaults.DefaultsReport(
        "x", False, {t: defaults.TargetDefaults(t, ["a"], {"P": ["a"]})}
    )
    after = defaults.DefaultsReport("y", True, {t: defaults.TargetDefaults(t, ["a"], {"P": ["b"]})})
    assert defaults.compare(before, after) == [defaults.Change(t, "P", ["a"], ["b"])]
    assert defaults.compare(before, before) == []


def test_not_a_tree(tmp_path: Path) -> None:
    with pytest.raises(WolfError, match="is not an OpenWrt tree"):
        defaults.collect(tmp_path)


def test_real_tree_off_unchanged_on_swapped(openwrt_tree_25125: Path, tmp_path: Path) -> None:
    need_tools("make", "perl", "gawk", "git")
    tree = openwrt_tree_25125
    patched = defaults.patched_copy(tree, tmp_path / "p")
    before = defaults.collect(tree)
    off = defaults.collect(patched, use_wolfssl=False)
    on = defaults.collect(patched, use_wolfssl=True)
    assert defaults.compare(before, off) == []
    # facts from the v25.12.5 sources: these targets default to wpad-basic-mbedtls
    for t in defaults.DEFAULT_TARGETS:
        assert "wpad-basic-mbedtls" in before.targets[t].default_packages
        assert on.targets[t].default_packages == before.targets[t].default_packages
    wr902 = on.targets["ramips/mt76x8"].profiles["DEVICE_tplink_tl-wr902ac-v3"]
    assert "wpad-basic-wolfssl" in wr902 and "libustream-wolfssl" in wr902
    assert not any("mbedtls" in p for p in wr902)
    assert "wpad-basic-wolfssl" in on.targets["malta/be"].profiles["Default"]


def test_real_tree_all_targets_off_unchanged(openwrt_tree_25125: Path, tmp_path: Path) -> None:
    """Every profile of every target: OpenWrt's own scan of the pristine and the patched tree."""
    need_tools("make", "perl", "gawk", "git")
    cmp = defaults.compare_tree(openwrt_tree_25125, ("all",), tmp_path)
    assert len(cmp.targets) > 100 and cmp.profiles > 2000  # v25.12.5: 104 targets, 2,300
    assert cmp.off_changes == []
    assert len(cmp.on_changes) == cmp.profiles  # libustream swaps in every profile
    swapped = {p for c in cmp.on_changes for p in c.added}
    assert swapped <= {"libustream-wolfssl", "wpad-basic-wolfssl", "uencrypt-wolfssl"}


def test_comparison_round_trips() -> None:
    c = defaults.DefaultsComparison(
        "/t", ["a/b"], 2, {"a/b": ["x"]}, [], [defaults.Change("a/b", "P", ["m"], ["w"])]
    )
    from dataclasses import asdict

    assert defaults.DefaultsComparison.from_dict(asdict(c)) == c

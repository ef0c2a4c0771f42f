"""The patch files agree with the project's data: the wolfSSL minimal option list with the
footprint lab's (data/footprint/wolfssl-minimal.toml, when that area is present), and every
wolfSSL package the swap selects with a symbol list in data/wolfssl_consumers.toml."""

from __future__ import annotations

import fnmatch
import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from openwrt_wolf.patchset import series, symbols
from openwrt_wolf.paths import DATA_DIR
from tests.conftest import need_tools, unavailable

PATCHES = series.PATCHES_DIR
FOOTPRINT_MINIMAL = DATA_DIR / "footprint" / "wolfssl-minimal.toml"
DEFAULTS = {
    "CONFIG_IPV6": "enable",
    "CONFIG_WOLFSSL_MINIMAL_X25519": "enable",
    "CONFIG_PACKAGE_libwolfssl-benchmark": "disable",
}


def _added_lines(patch: str) -> list[str]:
    text = (PATCHES / patch).read_text()
    return [ln[1:] for ln in text.splitlines() if ln.startswith("+") and not ln.startswith("+++")]


def _minimal_args() -> tuple[set[str], set[str]]:
    """configure args of the WOLFSSL_MINIMAL block in patch 0003, and its extra CFLAGS."""
    lines = _added_lines("0003-wolfssl-add-minimal-build-and-ECC-choice.patch")
    start = lines.index("ifeq ($(CONFIG_WOLFSSL_MINIMAL),y)")
    end = lines.index("else", start)
    block = lines[start:end]
    args = set()
    for ln in block:
        arg = ln.strip().rstrip("\\").strip()
        if arg.startswith("--") and not arg.startswith("--enable-sp="):
            # options at their defaults: IPv6 and X25519 on, the benchmark not selected
            for cond, value in DEFAULTS.items():
                arg = arg.replace(f"$(if $({cond}),enable,disable)", value)
            args.add(arg)
    cflags = {f for ln in block if "TARGET_CFLAGS" in ln for f in ln.split() if f.startswith("-D")}
    return args, cflags


def test_minimal_block_has_ecc_choice() -> None:
    lines = _added_lines("0003-wolfssl-add-minimal-build-and-ECC-choice.patch")
    assert "\t--enable-sp=$(if $(CONFIG_WOLFSSL_ECC_SP_P256),p256,no)" in lines
    assert "\tdefault WOLFSSL_ECC_SP_P256" in lines


def test_minimal_options_match_footprint_lab() -> None:
    if not FOOTPRINT_MINIMAL.is_file():
        unavailable(f"{FOOTPRINT_MINIMAL} (the footprint lab's data) is not here")
    fp = tomllib.loads(FOOTPRINT_MINIMAL.read_text())
    ours, our_cflags = _minimal_args()
    theirs = set(fp["configure"])
    assert ours == theirs, f"only in patch: {ours - theirs}; only in footprint: {theirs - ours}"
    assert our_cflags <= set(fp.get("cflags", [])) | {"-DWOLFSSL_ALT_NAMES"}
    assert fp["ecc"]["sp-p256"]["configure"] == ["--enable-sp=p256"]
    assert fp["ecc"]["generic"]["configure"] == ["--enable-sp=no"]


def test_every_swapped_package_has_a_symbol_list() -> None:
    lines = _added_lines("0002-target-swap-mbedtls-defaults-with-USE_WOLFSSL.patch")
    pairs = [m.group(2) for ln in lines if (m := re.match(r"\s+([\w-]+):([\w-]+)", ln))]
    assert "wpad-basic-wolfssl" in pairs and "libustream-wolfssl" in pairs
    consumers = {c.name for c in symbols.load_consumers() if c.required}
    # apk-wolfssl calls only wolfCrypt (wc_*), which the export map exports whole: checked
    # against its sources in test_apk_backend_calls_only_exported_wolfcrypt
    assert set(pairs) - {"apk-wolfssl"} == consumers


def test_apk_backend_calls_only_exported_wolfcrypt() -> None:
    """Every wolfSSL function the apk-tools backend (nested in patch 0004) calls is exported."""
    nested = _new_file(
        "0004-apk-add-wolfssl-variant.patch",
        "package/system/apk/patches/0200-crypto-add-wolfssl-backend.patch",
    )
    src = "\n".join(ln[1:] for ln in nested.splitlines() if ln.startswith("+"))
    called = set(re.findall(r"\b((?:wc|wolfSSL|wolfCrypt)_\w+)\s*\(", src))
    assert {"wc_ecc_verify_hash", "wc_RsaSSL_VerifyInline", "wc_PubKeyPemToDer"} <= called
    script = symbols.version_script()
    globs = [ln.strip().rstrip(";") for ln in script.split("global:")[1].split("local:")[0].split()]
    assert [c for c in sorted(called) if not any(fnmatch.fnmatchcase(c, g) for g in globs)] == []


def _new_file(patch: str, path: str, patches: Path = PATCHES) -> str:
    """The text a patch gives the new file `path`."""
    section = (patches / patch).read_text().split(f"+++ b/{path}\n", 1)[1]
    lines = section.splitlines()[1:]  # [1:] skips the @@ line
    end = next((i for i, ln in enumerate(lines) if not ln.startswith("+")), len(lines))
    return "".join(ln[1:] + "\n" for ln in lines[:end])


@pytest.mark.parametrize(
    ("outer", "path", "source"),
    [
        (
            "0004-apk-add-wolfssl-variant.patch",
            "package/system/apk/patches/0200-crypto-add-wolfssl-backend.patch",
            "apk-tools/0001-crypto-add-wolfssl-backend.patch",
        ),
        (
            "0005-ustream-ssl-native-wolfssl-backend.patch",
            "package/libs/ustream-ssl/patches/100-add-native-wolfssl-backend.patch",
            "ustream-ssl/0001-add-native-wolfssl-backend.patch",
        ),
        (
            "0006-ustream-ssl-wolfssl-compat-names-and-tls12.patch",
            "package/libs/ustream-ssl/patches/101-wolfssl-compat-names-and-tls12.patch",
            "ustream-ssl/0002-wolfssl-compat-names-and-tls12.patch",
        ),
    ],
)
def test_nested_source_patches_equal_the_projects(outer: str, path: str, source: str) -> None:
    """Patches 0004-0006 carry patches/apk-tools and patches/ustream-ssl unchanged."""
    if not (PATCHES / source).is_file():
        unavailable(f"patches/{source} is not here")
    assert _new_file(outer, path) == (PATCHES / source).read_text()


def test_export_map_in_patch_is_generated_from_consumers() -> None:
    path = "package/libs/wolfssl/files/libwolfssl-minimal.map"
    assert _new_file("0003-wolfssl-add-minimal-build-and-ECC-choice.patch", path) == (
        symbols.version_script()
    )


def test_export_map_covers_every_required_symbol() -> None:
    script = symbols.version_script()
    globs = [ln.strip().rstrip(";") for ln in script.split("global:")[1].split("local:")[0].split()]
    for c in symbols.load_consumers():
        if c.required:
            for s in c.symbols:
                assert any(fnmatch.fnmatchcase(s, g) for g in globs), (c.name, s)


def test_make_swap_function_of_patch_0002(tmp_path: Path) -> None:
    """Run GNU make on the definitions patch 0002 adds to include/target.mk."""
    need_tools("make")
    lines = _added_lines("0002-target-swap-mbedtls-defaults-with-USE_WOLFSSL.patch")
    start = next(i for i, ln in enumerate(lines) if ln.startswith("WOLFSSL_SWAP:="))
    end = next(i for i, ln in enumerate(lines) if ln.startswith("wolfssl_swap="))
    defs = [ln for ln in lines[start : end + 1] if not ln.startswith("#")]
    mk = tmp_path / "swap.mk"
    mk.write_text(
        "\n".join(defs)
        + "\nall:\n\t@echo '$(strip $(call wolfssl_swap,base-files libustream-mbedtls "
        "-wpad-basic-mbedtls wpad-basic-mbedtls px5g-mbedtls uencrypt-mbedtls luci-ssl "
        "libmbedtls apk-mbedtls))'\n"
    )
    out = subprocess.run(
        ["make", "-s", "-f", str(mk)], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == [
        "base-files",
        "libustream-wolfssl",
        "-wpad-basic-wolfssl",
        "wpad-basic-wolfssl",
        "px5g-wolfssl",
        "uencrypt-wolfssl",
        "luci-ssl",  # follows USE_WOLFSSL itself (patches/feeds/luci)
        "libmbedtls",  # not a default-package variant: left alone
        "apk-wolfssl",
    ]


@pytest.mark.parametrize(
    ("patch", "path"),
    [
        (
            "0003-wolfssl-add-minimal-build-and-ECC-choice.patch",
            "package/libs/wolfssl/files/libwolfssl-minimal.map",
        ),
        (
            "0004-apk-add-wolfssl-variant.patch",
            "package/system/apk/patches/0200-crypto-add-wolfssl-backend.patch",
        ),
        (
            "0005-ustream-ssl-native-wolfssl-backend.patch",
            "package/libs/ustream-ssl/patches/100-add-native-wolfssl-backend.patch",
        ),
        (
            "0006-ustream-ssl-wolfssl-compat-names-and-tls12.patch",
            "package/libs/ustream-ssl/patches/101-wolfssl-compat-names-and-tls12.patch",
        ),
    ],
)
def test_main_series_carries_the_same_new_files(patch: str, path: str) -> None:
    """patches/main is the 25.12.5 series refreshed: the files it adds are the same."""
    assert _new_file(patch, path, PATCHES / "main") == _new_file(patch, path)


# 0007 (bcm2712's cpu-crypto gate, issue 34) is written against 25.12.5 only: no tree of main
# at 3d1645ee is here to refresh it against (docs/patches.md)
NOT_IN_MAIN = ("0007-wolfssl-cpu-crypto-on-bcm2712.patch",)


def test_main_series_has_the_same_patches_and_minimal_list() -> None:
    main = PATCHES / "main"
    names = [p.name for p in series.load(main)[0].patches]
    assert names == [p.name for p in series.load(PATCHES)[0].patches if p.name not in NOT_IN_MAIN]
    block = "0003-wolfssl-add-minimal-build-and-ECC-choice.patch"
    added = {ln for ln in (main / block).read_text().splitlines() if ln.startswith("+\t--")}
    assert added == {
        ln for ln in (PATCHES / block).read_text().splitlines() if ln.startswith("+\t--")
    }

"""The sdk backend's reading of a feed index (feeds/<feed>.index, scripts/metadata.pm's
format) is untrusted input: a crafted one names no directory outside the feed and no
package name that is not OpenWrt's. The choice itself is tested on OpenWrt's own metadata in
tests/patchset/test_kconfig_real.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from openwrt_wolf.build import sdk
from openwrt_wolf.errors import WolfError

INDEX = """Source-Makefile: feeds/base/libs/wolfssl/Makefile

Package: libwolfssl
Version: 5.9.2-r1
Depends: +libc @!USE_MBEDTLS

Package: libwolfssl-benchmark
Version: 5.9.2-r1
Depends: +libwolfssl

Source-Makefile: feeds/base/../../../etc/Makefile

Package: evil
Version: 1
Depends: +libwolfssl

Source-Makefile: feeds/base/utils/px5g-wolfssl/Makefile

Package: px5g-wolfssl
Version: 9
Depends: +libc +PACKAGE_px5g-wolfssl:libwolfssl
"""


def test_index_directories_stay_inside_the_feed() -> None:
    index = sdk.read_index(INDEX, "base", "base.index")
    assert index["libwolfssl"] == sdk.Source("libs/wolfssl", "5.9.2-r1", ("libc", "!USE_MBEDTLS"))
    assert index["px5g-wolfssl"].depends == ("libc", "libwolfssl")  # the conditional's package
    assert "evil" not in index  # a directory leading out of the feed names no package
    feed = sdk.BaseFeed(Path("/t"), frozenset({"evil", "px5g-wolfssl"}), "libwolfssl", (), ())
    assert list(feed.choose(index)) == ["libwolfssl", "px5g-wolfssl"]


def test_a_changed_directory_gives_only_the_flavours_variants() -> None:
    """Patch 0003 changes hostapd's Makefile for the wpad variants: hostapd-common, from the
    same directory, is not compiled (it needs libnl-tiny and ubus and does not change); a
    flavour's variant from a changed directory is, even without a library dependency."""
    index = {
        "libwolfssl": sdk.Source("libs/wolfssl", "5.9.1-r1", ("libc",)),
        "hostapd-common": sdk.Source("network/services/hostapd", "1", ("libc",)),
        "wpad-basic-wolfssl": sdk.Source("network/services/hostapd", "1", ("libc", "libwolfssl")),
        "apk-wolfssl": sdk.Source("system/apk", "3", ("libc",)),
        "apk-mbedtls": sdk.Source("system/apk", "3", ("libc", "libmbedtls")),
    }
    touched = ("package/network/services/hostapd/Makefile", "package/system/apk/Makefile")
    feed = sdk.BaseFeed(Path("/t"), frozenset(index), "libwolfssl", touched, ())
    assert list(feed.choose(index)) == ["apk-wolfssl", "libwolfssl", "wpad-basic-wolfssl"]


def test_a_crafted_package_name_is_one_line() -> None:
    with pytest.raises(WolfError, match=r"base.index"):
        sdk.read_index("Source-Makefile: feeds/base/x/Makefile\n\nPackage: $(shell id)\n",
                       "base", "base.index")  # fmt: skip


def test_an_index_without_the_library_is_one_line() -> None:
    feed = sdk.BaseFeed(Path("/t"), frozenset({"uhttpd"}), "libwolfssl", (), ())
    with pytest.raises(WolfError, match=r"base feed of /t has no package libwolfssl"):
        feed.choose({})


def test_a_failing_step_names_its_first_error(tmp_path: Path) -> None:
    """With -j the last lines of a failing SDK step are make's own; the cause comes first
    (ustream-ssl's CMake refusing an old cmake_minimum_required, seen on the real SDK).
    Only the failing step's part of the log counts."""
    log = tmp_path / "sdk.log"
    earlier = "gcc: error: an earlier step's line\n"
    log.write_text(
        earlier
        + "Applying patches\nCMake Error at CMakeLists.txt:1 (cmake_minimum_required):\n"
        + "make[2]: *** [Makefile:89: .configured] Error 1\nmake: Leaving directory\n"
    )
    assert sdk.first_error(log, len(earlier)) == (
        "CMake Error at CMakeLists.txt:1 (cmake_minimum_required):"
    )
    assert sdk.first_error(log, log.stat().st_size) == ""
    assert sdk.first_error(tmp_path / "none.log", 0) == ""


def test_a_source_download_that_gave_up_names_the_options(tmp_path: Path) -> None:
    """OpenWrt's download.pl on a machine without its mirrors (the real SDK's log of the
    main job for ath79, 25.12.5): the error names the file and --sources, not make's last
    line."""
    log = tmp_path / "sdk.log"
    dl = "/c/base-feeds/25.12.5-x/dl"
    log.write_text(
        "+ curl -f --connect-timeout 5 --retry 3 --location "
        "https://mirror2.openwrt.org/sources/mbedtls-3.6.6.tar.bz2\n"
        "curl: (6) Could not resolve host: mirror2.openwrt.org\n"
        "Download failed.\nNo more mirrors to try - giving up.\n"
        f"make[2]: *** [Makefile:181: {dl}/mbedtls-3.6.6.tar.bz2] Error 2\n"
        "    ERROR: package/feeds/base/mbedtls failed to build.\n"
    )
    line = sdk.first_error(log, 0)
    assert line.startswith("mbedtls-3.6.6.tar.bz2 could not be downloaded")
    assert "--sources DIR" in line and "--sources-url" in line


def test_the_built_file_of_each_package(tmp_path: Path) -> None:
    """The real SDK's file names (malta/be, 25.12.5): an ABI suffix after the name, a version
    that is not the index's (the git hash shortened), and a neighbour whose name starts
    with the package's (libwolfssl-benchmark)."""
    top = tmp_path / "sdk"
    (top / "scripts").mkdir(parents=True)
    (top / "scripts" / "feeds").write_text("")
    (top / "Makefile").write_text("")
    base = top / "bin" / "packages" / "mips_24kc" / "base"
    base.mkdir(parents=True)
    names = ["libwolfssl-benchmark-5.9.2-r1.apk", "libwolfssl5.9.2.0ca03cd3-5.9.2-r1.apk",
             "libustream-wolfssl20201210-2024.07.28~99bd3d2b-r1.apk", "px5g-wolfssl-9.apk",
             "apk-wolfssl-3.0.5-r3.apk"]  # fmt: skip
    for n in names:
        (base / n).write_text(n)
    s = sdk.SDK(top)
    tail = sdk.ABI_AND_VERSION
    assert s._built("base", "libwolfssl", tail, top).name == names[1]
    assert s._built("base", "libustream-wolfssl", tail, top).name == names[2]
    assert s._built("base", "px5g-wolfssl", tail, top).name == names[3]
    with pytest.raises(WolfError, match=r"built no package file for uencrypt-wolfssl "):
        s._built("base", "uencrypt-wolfssl", tail, top)

"""data/flavours.toml through its one loader: a manifest's TLS library packages as OpenWrt names
them (with and without the ABI suffix its Makefiles append), and every flavour complete."""

from __future__ import annotations

import pytest

from openwrt_wolf.catalogue import flavours, releases


@pytest.mark.parametrize(
    ("package", "library"),
    [
        ("libmbedtls", "mbedtls"),
        ("libmbedtls21", "mbedtls"),  # 24.10's ABI_VERSION suffix
        ("libwolfssl5.9.1.e624513f", "wolfssl"),  # ABI_VERSION:=$(PKG_VERSION).<hash>
        ("libopenssl3", "openssl"),
        ("libopenssl-conf", None),  # a companion, not the library
        ("libustream-mbedtls", None),
        ("libustream-wolfssl20201210", None),
        ("wpad-basic-wolfssl", None),
        ("libwolfsslcpu-crypto", None),
    ],
)
def test_library_of_package(package: str, library: str | None) -> None:
    assert flavours.library_of_package(package) == library


def test_every_flavour_has_release_changes_and_router_globs() -> None:
    for fl in flavours.flavours().values():
        assert set(fl.releases) == set(releases.releases()), fl.name  # data/releases.toml
        # a flashed router shows its own library and glue, never another flavour's glue
        assert f"lib{fl.library}*" in fl.installed.required, fl.name
        assert f"libustream-{fl.name}*" in fl.installed.required, fl.name
        others = [f"libustream-{o}*" for o in flavours.names() if o != fl.name]
        assert set(others) <= set(fl.installed.forbidden), fl.name

"""Deriving a consumer's wolfSSL imports from its sources: a small consumer and a stand-in
wolfSSL tree written here, compiled with mips-linux-gnu-gcc; oracle: mips-linux-gnu-nm -u."""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

import pytest

from openwrt_wolf.errors import WolfError
from openwrt_wolf.patchset import consumers
from tests.conftest import need_tools

HEADER = """
int wolfSSL_new(void);
int wolfTLS_client_method(void);
int wc_ecc_mulmod(void);
int ecc_map(void);
int helper_outside(void);
"""
CONSUMER = """
#include <wolfssl/options.h>
#include "api.h"
#ifdef WITH_ECC
int ecc_part(void) { return wc_ecc_mulmod() + ecc_map(); }
#endif
int tls_part(void) { return wolfSSL_new() + wolfTLS_client_method() + helper_outside(); }
int local_only(void) { return 1; }
"""
DATA = """
[exports]
patterns = ["wc_*"]

[derive]
namespaces = ["wolfSSL*", "wolfTLS*", "wc_*", "ecc_*"]
cflags = ["-Os"]

[consumer.toy]
required = true
source = "written in the test"
symbols = [
    "wolfSSL_old",
]

[consumer.toy.derive]
root = "toy"
files = ["toy.c"]
defines = ["WITH_ECC"]
include = ["inc"]

[consumer.other]
required = false
source = "kept as is"
symbols = ["wc_untouched"]
"""


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Path, Path]:
    need_tools("mips-linux-gnu-gcc", "mips-linux-gnu-nm")
    root = tmp_path / "toy"
    (root / "inc").mkdir(parents=True)
    (root / "inc" / "api.h").write_text(HEADER)
    (root / "toy.c").write_text(CONSUMER)
    wolf = tmp_path / "wolfssl-tree"
    (wolf / "wolfssl").mkdir(parents=True)
    (wolf / "wolfssl" / "options.h").write_text("/* configured */\n")
    data = tmp_path / "consumers.toml"
    data.write_text(DATA)
    return root, wolf, data


def _nm_undefined(root: Path, wolf: Path, tmp: Path) -> set[str]:
    obj = tmp / "oracle.o"
    subprocess.run(
        ["mips-linux-gnu-gcc", "-Os", "-DWITH_ECC", f"-I{wolf}", f"-I{root / 'inc'}", "-c",
         str(root / "toy.c"), "-o", str(obj)],
        check=True,
    )  # fmt: skip
    out = subprocess.run(
        ["mips-linux-gnu-nm", "-u", str(obj)], capture_output=True, text=True, check=True
    ).stdout
    return {ln.split()[-1] for ln in out.splitlines() if ln.strip()}


def test_derive_matches_nm_and_writes_back(setup: tuple[Path, Path, Path], tmp_path: Path) -> None:
    root, wolf, data = setup
    res = consumers.derive({"toy": root}, wolf, path=data)
    assert [r.consumer for r in res] == ["toy"]  # "other" has no recipe
    toy = res[0]
    undefined = _nm_undefined(root, wolf, tmp_path)
    assert set(toy.symbols) == undefined - {"helper_outside", "_gp_disp"}  # not libwolfssl's
    assert toy.symbols == ["ecc_map", "wc_ecc_mulmod", "wolfSSL_new", "wolfTLS_client_method"]
    assert toy.removed == ["wolfSSL_old"]
    consumers.write(res, data)
    back = tomllib.loads(data.read_text())
    assert back["consumer"]["toy"]["symbols"] == toy.symbols
    assert back["consumer"]["other"]["symbols"] == ["wc_untouched"]
    assert back["consumer"]["toy"]["derive"]["files"] == ["toy.c"]
    assert "[exports]" in data.read_text()


def test_errors(setup: tuple[Path, Path, Path], tmp_path: Path) -> None:
    root, wolf, data = setup
    with pytest.raises(WolfError, match="needs the toy sources"):
        consumers.derive({}, wolf, path=data)
    with pytest.raises(WolfError, match=r"no wolfssl/options\.h"):
        consumers.derive({"toy": root}, tmp_path, path=data)
    (root / "toy.c").unlink()
    with pytest.raises(WolfError, match=r"no toy\.c under"):
        consumers.derive({"toy": root}, wolf, path=data)

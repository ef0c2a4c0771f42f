"""symbols.py against a small MIPS shared library built here; oracle: mips-linux-gnu-nm -D."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from openwrt_wolf.errors import WolfError
from openwrt_wolf.patchset import symbols
from tests.conftest import need_tools

LIB_C = """
int wolfSSL_new(void) { return 1; }
int wolfSSL_read(void) { return 2; }
__attribute__((weak)) int wc_ecc_mulmod(void) { return 3; }
__attribute__((visibility("hidden"))) int ecc_map(void) { return 4; }
static int sp_add(void) { return 5; }
int wc_table[4] = {1, 2, 3, 4};
extern int wc_imported(void);
int use(void) { return sp_add() + ecc_map() + wc_imported(); }
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    need_tools("mips-linux-gnu-gcc", "mips-linux-gnu-nm")
    d = tmp_path_factory.mktemp("elf")
    (d / "lib.c").write_text(LIB_C)
    out = d / "libwolfssl.so"
    subprocess.run(
        ["mips-linux-gnu-gcc", "-shared", "-fPIC", "-Os", "-o", str(out), str(d / "lib.c")],
        check=True,
    )
    return out


def _nm_exports(lib: Path) -> set[str]:
    out = subprocess.run(
        ["mips-linux-gnu-nm", "-D", "--defined-only", str(lib)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {line.split()[-1] for line in out.splitlines() if len(line.split()) == 3}


def test_exports_match_nm(lib: Path) -> None:
    got = symbols.exported_symbols(lib)
    assert got == _nm_exports(lib)
    assert {"wolfSSL_new", "wolfSSL_read", "wc_ecc_mulmod", "wc_table"} <= got
    assert not {"ecc_map", "sp_add", "wc_imported"} & got  # hidden, static, undefined


def test_sstripped_library_is_read_from_its_dynamic_segment(lib: Path, tmp_path: Path) -> None:
    """The footprint lab installs libraries as OpenWrt does, sstrip -z: no section headers.
    The oracle is nm -D on the unstripped library; readelf confirms the headers are gone."""
    from openwrt_wolf.footprint.sizes import sstrip

    stripped = tmp_path / "libwolfssl.so.sstripped"
    stripped.write_bytes(sstrip(lib.read_bytes()))
    need_tools("mips-linux-gnu-readelf")
    hdr = subprocess.run(["mips-linux-gnu-readelf", "-h", str(stripped)], capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    assert re.search(r"Number of section headers:\s+0$", hdr, re.M), hdr
    assert symbols.exported_symbols(stripped) == _nm_exports(lib)


def test_check_reports_missing(lib: Path, tmp_path: Path) -> None:
    data = tmp_path / "c.toml"
    data.write_text(
        '[consumer.libustream-wolfssl]\nsymbols = ["wolfSSL_new", "wolfSSL_read"]\n'
        '[consumer.wpad-basic-wolfssl]\nsymbols = ["wc_ecc_mulmod", "ecc_map", "wc_imported"]\n'
        '[consumer.wpad-wolfssl]\nrequired = false\nsymbols = ["sp_add"]\n'
    )
    res = symbols.check(lib, symbols.load_consumers(data))
    by = {r.consumer: r for r in res.results}
    assert by["libustream-wolfssl"].missing == []
    assert by["wpad-basic-wolfssl"].missing == ["ecc_map", "wc_imported"]
    assert by["wpad-wolfssl"].missing == ["sp_add"]
    assert not res.ok
    data.write_text(
        '[consumer.x]\nsymbols = ["wolfSSL_new"]\n'
        '[consumer.y]\nrequired = false\nsymbols = ["nope"]\n'
    )
    assert symbols.check(lib, symbols.load_consumers(data)).ok  # informational misses don't fail


def test_shipped_consumer_list_is_consistent() -> None:
    cons = symbols.load_consumers()
    names = {c.name for c in cons}
    # the default packages USE_WOLFSSL selects (patch 0002) must each have a list
    assert {"libustream-wolfssl", "wpad-basic-wolfssl", "px5g-wolfssl", "uencrypt-wolfssl"} <= names
    for c in cons:
        assert len(set(c.symbols)) == len(c.symbols), c.name


def test_bad_inputs(tmp_path: Path) -> None:
    with pytest.raises(WolfError, match=r"missing\.so does not exist"):
        symbols.exported_symbols(tmp_path / "missing.so")
    (tmp_path / "text.so").write_text("not elf")
    with pytest.raises(WolfError, match="not an ELF file"):
        symbols.exported_symbols(tmp_path / "text.so")
    bad = tmp_path / "bad.toml"
    bad.write_text("[consumer.x]\nsymbols = []\n")
    with pytest.raises(WolfError, match="non-empty symbols list"):
        symbols.load_consumers(bad)
    bad.write_text("x = [")
    with pytest.raises(WolfError, match="cannot read"):
        symbols.load_consumers(bad)


def test_cli_stores_a_record(lib: Path, tmp_path: Path) -> None:
    import sys

    from openwrt_wolf.results.store import FileStore

    root = Path(__file__).resolve().parents[2]
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "invoke",
            "wolfssl-symbols",
            "--lib",
            str(lib),
            "--store",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=root,
    )
    assert r.returncode == 1  # our toy library lacks the real consumers' symbols
    assert "required symbols missing" in r.stdout
    recs = FileStore(tmp_path).query("wolfssl-symbols")
    assert len(recs) == 1
    back = symbols.SymbolCheck.from_dict(recs[0].data)
    by = {x.consumer: x for x in back.results}
    assert "wolfSSL_new" not in by["libustream-wolfssl"].missing  # the toy exports it
    assert "wolfSSL_write" in by["libustream-wolfssl"].missing
    assert back.exported == len(_nm_exports(lib))


@pytest.mark.parametrize("special", ["/proc/self/mem", "/dev/zero", "FIFO", "sparse 20 GB"])
def test_special_library_is_one_line(special: str, tmp_path: Path) -> None:
    # /proc/self/mem is a "regular file" of size 0 whose seek fails: pyelftools' OSError was a
    # traceback; the library is read as any file we did not write (a FIFO, /dev/zero, 20 GB)
    import sys

    path = special
    if special == "FIFO":
        os.mkfifo(tmp_path / "fifo.so")
        path = str(tmp_path / "fifo.so")
    elif special.startswith("sparse"):
        with (tmp_path / "big.so").open("wb") as fh:
            fh.truncate(20 << 30)
        path = str(tmp_path / "big.so")
    root = Path(__file__).resolve().parents[2]
    r = subprocess.run([sys.executable, "-m", "invoke", "wolfssl-symbols", "--lib", path,
                        "--store", str(tmp_path / "s")], capture_output=True, text=True,
                       cwd=root, timeout=60)  # fmt: skip
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert len(lines) == 1 and "library" in lines[0], r.stderr
    assert not (tmp_path / "s").exists()

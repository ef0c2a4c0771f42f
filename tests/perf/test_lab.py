"""`invoke perf --flavour all --target qemu --quick`, as CI runs it: the three libraries' own
benchmark tools cross-built against the footprint lab's builds and run under qemu-user. Each
stored figure is checked against the tool's own printed line (kept in the record), read here
with the tool's documented output format, not with the lab's parsers; the printed table
against the store; and each bad input gives one line."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from openwrt_wolf.footprint import lab as fp_lab
from openwrt_wolf.perf import crypto
from openwrt_wolf.results import store
from openwrt_wolf.results.perf import CRYPTO, CryptoSpeed
from tests.conftest import need_tools
from tests.perf import labrun
from tests.perf.labrun import Run

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ("mips-linux-gnu-gcc", "qemu-mips-static", "cmake", "autoreconf", "libtoolize", "perl",
         "make", "patch", "/usr/mips-linux-gnu/include/stdio.h")  # fmt: skip
MIB = 1024 * 1024
pytestmark = pytest.mark.xdist_group("perf-crypto")  # its tests wait on one shared run


def _wolf(*args: str, timeout: float = 7200) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}  # the table as a user's pipe gets it (term.py)
    return subprocess.run([str(ROOT / "wolf"), *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=env)  # fmt: skip


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, testrun_uid: str) -> Run:
    """One perf run per test run: the workers that run this module's tests share it."""
    need_tools(*TOOLS)
    return labrun.once(tmp_path_factory, testrun_uid, "perf-crypto", "--flavour", "all",
                       "--target", "qemu", "--quick", "--test", "crypto", columns=200)  # fmt: skip


def _records(st: Path) -> dict[str, CryptoSpeed]:
    return {r.flavour or "": CryptoSpeed.from_dict(r.data)
            for r in store.FileStore(st).query(CRYPTO)}  # fmt: skip


def _printed(record: CryptoSpeed) -> str:
    return "\n".join(record.outputs)


def _wolfcrypt_ms(text: str, label: str) -> float:
    # "<label words> <n> ops took <s> sec, avg <ms> ms," with brackets/spaces in the label
    words = r"[\s\[\]]+".join(re.escape(w) for w in label.split())
    m = re.search(rf"^{words}\s+\d+ ops took [\d.]+ sec, avg ([\d.]+) ms", text, re.M)
    assert m, label
    return float(m.group(1))


def _wolfcrypt_mib(text: str, label: str, size: int) -> float:
    blocks = text.split("wolfCrypt Benchmark (block bytes ")
    part = next(b for b in blocks if b.startswith(f"{size},"))
    m = re.search(rf"^{re.escape(label)}\s+[\d.]+ \w+ took [\d.]+ seconds,\s+([\d.]+) MiB/s",
                  part, re.M)  # fmt: skip
    assert m, (label, size)
    return float(m.group(1))


def _mbedtls_value(text: str, label: str) -> float:
    name, _, what = label.partition(" ")
    # the tool pads TYPE (" public"): any run of spaces before it
    m = re.search(rf"^\s+{re.escape(name)}\s+:\s+([\d.]+)\s+{re.escape(what)}/s", text, re.M)
    assert m, label
    return float(m.group(1))


def test_every_flavour_stored_emulated(run: Run) -> None:
    recs = _records(run[1])
    assert set(recs) == {"mbedtls", "wolfssl", "openssl"}
    for r in recs.values():
        assert r.where.target == "qemu" and r.where.emulated and r.quick
        assert r.where.clock == "cpu"


def test_wolfssl_figures_are_the_tools_own(run: Run) -> None:
    r = _records(run[1])["wolfssl"]
    tool = crypto.settings()["tool"]["wolfssl"]
    text = _printed(r)
    assert r.config == "minimal" and r.ecc == "sp-p256"
    # what this build has, from wolfSSL's own options.h (configure's output)
    options = (fp_lab.build_root() / r.footprint_key / "include/wolfssl/options.h").read_text()
    has = {"x25519": "HAVE_CURVE25519", "mlkem768-keygen": "WOLFSSL_HAVE_MLKEM"}
    for ident, define in has.items():
        assert (ident in r.missing) == (f"#define {define}" not in options), ident
    assert "mldsa65-sign" in r.missing  # no ML-DSA in either wolfSSL configuration
    ops = ["p256-ecdh", "p256-sign", "p256-verify", "rsa2048-sign", "rsa2048-verify"]
    if "x25519" not in r.missing:
        ops.append("x25519")
    for ident in ops:
        assert r.ms_per_op[ident] == pytest.approx(_wolfcrypt_ms(text, tool["operations"][ident]))
    for ident, label in tool["ciphers"].items():
        for size in (1024, 16384):
            assert r.mib_per_s[ident][str(size)] == pytest.approx(_wolfcrypt_mib(text, label, size),
                                                                  rel=1e-3)  # fmt: skip


def test_mbedtls_figures_are_the_tools_own(run: Run) -> None:
    r = _records(run[1])["mbedtls"]
    tool = crypto.settings()["tool"]["mbedtls"]
    assert set(r.missing) == {"mlkem768-keygen", "mlkem768-encaps", "mlkem768-decaps",
                              "mldsa65-sign", "mldsa65-verify"}  # Mbed TLS 3.6: no PQC  # fmt: skip
    for ident, label in tool["operations"].items():
        per_s = _mbedtls_value(_printed(r), label)
        assert r.ms_per_op[ident] == pytest.approx(1000 / per_s, rel=1e-3)
    for ident, label in tool["ciphers"].items():
        for i, size in enumerate((1024, 16384)):
            # one run per (block size, algorithm), in that order: cipher_args x sizes
            out = r.outputs[i * len(tool["cipher_args"]) + list(tool["ciphers"]).index(ident)]
            kib = _mbedtls_value(out, f"{label} KiB")
            assert r.mib_per_s[ident][str(size)] == pytest.approx(kib / 1024, rel=1e-3)


def test_openssl_figures_are_the_tools_own(run: Run) -> None:
    r = _records(run[1])["openssl"]
    assert r.missing == []  # OpenSSL 3.5 has all of them, ML-KEM-768 and ML-DSA-65 included
    text = _printed(r)
    # +R1:<count>:<bits>:<seconds> is RSA sign (apps/speed.c, -mr)
    m = re.search(r"^\+R1:(\d+):2048:([\d.]+)$", text, re.M)
    want = float(m[2]) * 1000 / int(m[1]) if m else None
    assert r.ms_per_op["rsa2048-sign"] == pytest.approx(want, rel=1e-3)
    m = re.search(r"^\+R16:(\d+):ML-KEM-768:([\d.]+)$", text, re.M)
    want = float(m[2]) * 1000 / int(m[1]) if m else None
    assert r.ms_per_op["mlkem768-encaps"] == pytest.approx(want, rel=1e-3)
    # +F:<n>:<cipher>:<bytes per second> after +H:<block size>, one run per block size
    for size in (1024, 16384):
        m = re.search(rf"^\+H:{size}\n\+F:\d+:AES-128-GCM:([\d.]+)$", text, re.M)
        assert m, size
        assert r.mib_per_s["aes-128-gcm"][str(size)] == pytest.approx(float(m[1]) / MIB, rel=1e-3)


def test_table_prints_ratios(run: Run) -> None:
    out = run[0].stdout
    assert "Performance on qemu (emulated" in out
    recs = _records(run[1])
    sign = {f: recs[f].ms_per_op["p256-sign"] for f in recs}
    row = next(ln for ln in out.splitlines() if "P-256 ECDSA sign" in ln)
    ratio = f"{sign['wolfssl'] / sign['mbedtls']:.2f}×"
    assert ratio in row, (row, sign)
    assert "EMULATED" in out


def test_report_only_reads_the_store(run: Run) -> None:
    r = _wolf("perf", "--flavour", "all", "--target", "qemu", "--report-only", "--store",
              str(run[1]), timeout=600)  # fmt: skip
    assert r.returncode == 0 and "P-256 ECDSA sign" in r.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "--target is required"),
        (("--target", "qemu", "--flavour", "gnutls"), "--flavour 'gnutls': unknown"),
        (("--target", "mars"), "unknown or unsupported target 'mars'"),
        (("--target", "qemu", "--clock", "sundial"), "--clock 'sundial'"),
        (("--target", "qemu", "--test", "speed"), "--test 'speed': unknown"),
        # refused before any connection: nothing listens on port 9 of 127.0.0.1
        (
            ("--target", "router", "--host", "127.0.0.1", "--port", "9", "--test", "memory"),
            "--test memory runs on --target qemu only",
        ),
        (("--target", "vm", "--test", "crypto,soak"), "--test soak runs on --target qemu only"),
        # the Wi-Fi guest is the lab's own VM
        (("--target", "qemu", "--test", "wifi"), "--test wifi runs on --target vm only, not qemu"),
        (
            ("--target", "router", "--host", "127.0.0.1", "--port", "9", "--test", "wifi"),
            "--test wifi runs on --target vm only, not router",
        ),
        (("--target", "qemu", "--arch", "sparc"), "--arch 'sparc': not an architecture"),
        (("--target", "vm", "--arch", "aarch64_cortex-a76"), "--arch: only with --target qemu"),
        (("--target", "qemu", "--cpu-crypto", "on"), "--cpu-crypto: only with an AArch64 --arch"),
        (("--target", "vm", "--test", "instructions"), "--test instructions runs on --target qemu"),
        (("--target", "qemu", "--test", "instruction"), "--test 'instruction': unknown"),
    ],
)
def test_bad_input_is_one_line(args: tuple[str, ...], message: str, tmp_path: Path) -> None:
    r = _wolf("perf", *args, "--store", str(tmp_path), timeout=600)
    assert r.returncode == 2, r.stderr
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and message in errors[0], r.stderr
    assert "Traceback" not in r.stderr


def _aes_instructions(lib: Path) -> int:
    """AESE/AESMC/PMULL instructions in an AArch64 library, by binutils' disassembler."""
    out = subprocess.run(["aarch64-linux-gnu-objdump", "-d", str(lib)], capture_output=True,
                         text=True, timeout=300, check=True).stdout  # fmt: skip
    return len(re.findall(r"\t(?:aese|aesmc|pmull2?)\s", out))


def test_aarch64_runs_beside_the_mips_records(run: Run, tmp_path: Path) -> None:
    """--arch aarch64_cortex-a76 (the Raspberry Pi 5's core), as OpenWrt builds Mbed TLS (its
    AESCE in) and with --cpu-crypto off (MBEDTLS_AESCE_C unset): the tool cross-built for
    AArch64 (readelf says so) and run under qemu-aarch64 -cpu cortex-a76; the library's AES
    instructions counted by objdump; figures the tool's own lines; each run under a key of its
    own beside the MIPS records of the same store, which stay as they were."""
    need_tools("aarch64-linux-gnu-gcc", "aarch64-linux-gnu-objdump", "qemu-aarch64-static",
               "readelf", "/usr/aarch64-linux-gnu/include/stdio.h")  # fmt: skip
    import shutil

    st = tmp_path / "store"
    shutil.copytree(run[1], st)
    mips_before = _records(st)["mbedtls"]
    base = ("perf", "--flavour", "mbedtls", "--target", "qemu", "--arch", "aarch64_cortex-a76",
            "--quick", "--test", "crypto", "--store", str(st))  # fmt: skip
    shipped, off = _wolf(*base), _wolf(*base, "--cpu-crypto", "off")
    for r in (shipped, off):
        assert r.returncode == 0, r.stderr[-3000:]
    by_key = {x.key: x for x in store.FileStore(st).query(CRYPTO)}
    assert by_key["mbedtls-qemu-crypto"].data == mips_before.to_dict()  # untouched
    tool = crypto.settings()["tool"]["mbedtls"]
    aes = {}
    for key, device in (("mbedtls-qemu-aarch64_cortex-a76-crypto", "aarch64_cortex-a76"),
                        ("mbedtls-qemu-aarch64_cortex-a76-noce-crypto",
                         "aarch64_cortex-a76-noce")):  # fmt: skip
        assert by_key[key].device == device
        rec = CryptoSpeed.from_dict(by_key[key].data)
        assert rec.where.emulated and "-cpu cortex-a76" in rec.where.machine
        program = Path(rec.commands[0].split(" -E ")[-1].split()[1])
        elf = subprocess.run(["readelf", "-h", str(program)], capture_output=True, text=True,
                             timeout=60)  # fmt: skip
        assert re.search(r"Machine:\s+AArch64", elf.stdout), elf.stdout
        for ident, label in tool["operations"].items():
            per_s = _mbedtls_value(_printed(rec), label)
            assert rec.ms_per_op[ident] == pytest.approx(1000 / per_s, rel=1e-3)
        # lib/: the build before sstrip, whose section headers objdump needs (the installed
        # copy that ran is the same code without them)
        (lib,) = (fp_lab.build_root() / rec.footprint_key / "lib").glob("libmbedcrypto.so.*.*")
        aes[device] = (_aes_instructions(lib), rec.notes)
    assert aes["aarch64_cortex-a76"][0] > 0 and aes["aarch64_cortex-a76-noce"][0] == 0, aes
    assert any(
        "crypto extensions: on, as OpenWrt builds" in n for n in aes["aarch64_cortex-a76"][1]
    )
    assert any("unset MBEDTLS_AESCE_C" in n for n in aes["aarch64_cortex-a76-noce"][1])
    assert "Performance on qemu-aarch64_cortex-a76-noce" in off.stdout
    back = _wolf("perf", "--flavour", "mbedtls", "--target", "qemu", "--report-only",
                 "--store", str(st), timeout=600)  # fmt: skip
    assert back.returncode == 0 and "Performance on qemu (emulated" in back.stdout

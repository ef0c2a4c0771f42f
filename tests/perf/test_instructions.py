"""The instruction counter (data/perf/insncount.c, perf/instructions.py) against binutils: a
loop of known length, cross-built for AArch64 and MIPS, run under Debian's qemu-user with the
plugin; the count of 2N iterations minus that of N is N times the loop body objdump lists.
And the count file read as untrusted."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from openwrt_wolf.errors import WolfError
from openwrt_wolf.perf import instructions
from tests.conftest import need_tools

LOOP = r"""
volatile unsigned long sink;
int main(int argc, char **argv)
{
	unsigned long n = strtoul(argv[1], 0, 10), s = 0;
	for (unsigned long i = 0; i < n; i++)
		s += i ^ (s >> 3);
	sink = s;
	return 0;
}
"""

# gcc prefix, qemu, sysroot, the loop's closing branch as objdump prints it, delay slots
ARCHES = {
    "aarch64": ("aarch64-linux-gnu", "qemu-aarch64", "/usr/aarch64-linux-gnu",
                r"\tb\.(?:ne|hi|cc|lo)\s", 0),
    "mips": ("mips-linux-gnu", "qemu-mips", "/usr/mips-linux-gnu", r"\tbnez?\s", 1),
}  # fmt: skip


def _loop_body(objdump: str, branch: str, delay: int) -> int:
    """Instructions in main's loop: from the backward branch's target to the branch, plus the
    delay slot on MIPS (objdump lists it after the branch)."""
    main = objdump.split("<main>:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    addrs = [int(ln.split(":")[0], 16) for ln in main if re.match(r"^\s+[0-9a-f]+:", ln)]
    for i, ln in enumerate(main):
        m = re.search(branch + r"[^<]*?([0-9a-f]+) <main\+0x[0-9a-f]+>", ln)
        if m and int(m.group(1), 16) < addrs[i]:
            return i - addrs.index(int(m.group(1), 16)) + 1 + delay
    raise AssertionError(f"no backward branch in main:\n{chr(10).join(main)}")


@pytest.mark.parametrize("arch", sorted(ARCHES))
def test_count_is_the_loop_objdump_lists(arch: str, tmp_path: Path) -> None:
    prefix, qemu, sysroot, branch, delay = ARCHES[arch]
    need_tools(f"{prefix}-gcc", f"{prefix}-objdump", qemu, "gcc", f"{sysroot}/include/stdio.h")
    src = tmp_path / "loop.c"
    src.write_text("#include <stdlib.h>\n" + LOOP)
    exe = tmp_path / "loop"
    subprocess.run([f"{prefix}-gcc", "-O1", "-o", str(exe), str(src)], check=True, timeout=120)
    dump = subprocess.run([f"{prefix}-objdump", "-d", "--no-show-raw-insn", str(exe)],
                          capture_output=True, text=True, check=True,
                          timeout=120).stdout  # fmt: skip
    body = _loop_body(dump, branch, delay)
    assert 3 <= body <= 20, body  # the loop's few instructions, found
    plugin = instructions.plugin()
    counts = {}
    for n in (100_000, 200_000):
        out = tmp_path / f"count-{n}"
        subprocess.run([qemu, "-plugin", f"{plugin},out={out}", "-L", sysroot, str(exe), str(n)],
                       check=True, timeout=300)  # fmt: skip
        counts[n] = instructions.read_count(out)
    assert counts[200_000] - counts[100_000] == pytest.approx(100_000 * body, abs=64), (
        body,
        counts,
    )


def test_the_static_qemu_is_not_the_counter() -> None:
    """qemu-*-static cannot load plugins: the lab names the dynamic one it needs."""
    need_tools("qemu-aarch64")
    from openwrt_wolf.perf.qemu_user import QemuUser

    q = QemuUser(qemu="/usr/bin/qemu-aarch64-static", cpu="cortex-a76", sysroot="/", version="?")
    found = instructions.counting_qemu(q)
    assert Path(found.qemu).name == "qemu-aarch64" and found.cpu == "cortex-a76"
    assert "-plugin" in subprocess.run([found.qemu, "-h"], capture_output=True, text=True,
                                       timeout=30).stdout  # fmt: skip


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "is not 'insns <n>'"),
        (b"insns 12", "is not 'insns <n>'"),  # cut short: no newline
        (b"insns -1\n", "is not 'insns <n>'"),
        (b"insns 1\ninsns 2\n", "is not 'insns <n>'"),
        (b"\xff" * 100_000, "is not 'insns <n>'"),
        (b"insns " + b"9" * 30 + b"\n", "is not 'insns <n>'"),
    ],
)
def test_a_bad_count_file_is_one_line(content: bytes, message: str, tmp_path: Path) -> None:
    f = tmp_path / "count"
    f.write_bytes(content)
    with pytest.raises(WolfError, match=message) as e:
        instructions.read_count(f)
    assert "\n" not in str(e.value)


def test_no_count_file_and_a_fifo_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(WolfError, match="wrote no count"):
        instructions.read_count(tmp_path / "absent")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(WolfError, match="not a regular file"):
        instructions.read_count(fifo)


ROOT = Path(__file__).resolve().parents[2]
A76 = "aarch64_cortex-a76"


def _aes_instructions(lib: Path) -> int:
    """AESE/AESMC/PMULL instructions in an AArch64 library, by binutils' disassembler."""
    out = subprocess.run(["aarch64-linux-gnu-objdump", "-d", str(lib)], capture_output=True,
                         text=True, timeout=300, check=True).stdout  # fmt: skip
    return len(re.findall(r"\t(?:aese|aesmc|pmull2?)\s", out))


def test_mbedtls_aesce_counted_in_uhttpd(tmp_path: Path) -> None:
    """`perf --test instructions` on the Pi 5's core with Mbed TLS as OpenWrt builds it (AESCE
    in: objdump finds AESE in the library) and with --cpu-crypto off (none): every session
    negotiated the suite asked for (the client's own report); AES-GCM per MiB drops by more
    than 3x with the extension, while ChaCha20 and the X25519 handshake, which AESCE does not
    touch, stay within 5% (a count that were noise or start-up would move them too)."""
    need_tools("aarch64-linux-gnu-gcc", "aarch64-linux-gnu-objdump", "qemu-aarch64-static",
               "qemu-aarch64", "gcc", "openssl",
               "/usr/aarch64-linux-gnu/include/stdio.h")  # fmt: skip
    from openwrt_wolf.footprint import lab as fp_lab
    from openwrt_wolf.results import store
    from openwrt_wolf.results.perf import INSTRUCTIONS, Instructions

    st = tmp_path / "store"
    base = ["perf", "--flavour", "mbedtls", "--target", "qemu", "--arch", A76, "--quick",
            "--test", "instructions", "--store", str(st)]  # fmt: skip
    for extra in ([], ["--cpu-crypto", "off"]):
        r = subprocess.run([str(ROOT / "wolf"), *base, *extra], cwd=ROOT, capture_output=True,
                           text=True, timeout=5400)  # fmt: skip
        assert r.returncode == 0, r.stderr[-3000:]
    recs = {x.key: Instructions.from_dict(x.data) for x in store.FileStore(st).query(INSTRUCTIONS)}
    on = recs[f"mbedtls-qemu-{A76}-instructions"]
    off = recs[f"mbedtls-qemu-{A76}-noce-instructions"]
    for rec in (on, off):
        assert not rec.missing, rec.missing
        assert rec.negotiated["aes128gcm"]["cipher"] == "TLS_AES_128_GCM_SHA256"
        assert rec.negotiated["chacha20"]["cipher"] == "TLS_CHACHA20_POLY1305_SHA256"
        assert rec.common.emulated and "qemu-aarch64 " in rec.counter
    aes = {}
    for name, rec in (("on", on), ("off", off)):
        (lib,) = (fp_lab.build_root() / rec.common.footprint_key / "lib").glob(
            "libmbedcrypto.so.*.*"
        )
        aes[name] = _aes_instructions(lib)
    assert aes["on"] > 0 and aes["off"] == 0, aes
    assert off.per_mib["aes128gcm"] > 3 * on.per_mib["aes128gcm"], (on.per_mib, off.per_mib)
    assert off.per_mib["chacha20"] == pytest.approx(on.per_mib["chacha20"], rel=0.05)
    assert off.per_handshake["x25519"] == pytest.approx(on.per_handshake["x25519"], rel=0.05)

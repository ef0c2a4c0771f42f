"""The stand-in's package and kernel bytes depend on nothing of the host: two interpreters with
different hash seeds generate byte-identical payloads for every package of targets.toml, the
generators' bytes are pinned by sha256, and the payloads compress like code (xz, the
independent oracle) except the firmware blobs."""

from __future__ import annotations

import hashlib
import lzma
import os
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.standin import make_standin

ROOT = Path(__file__).resolve().parents[2]
_DIGEST = """
import hashlib, tomllib
from pathlib import Path
from tests.standin import make_standin as m
spec = tomllib.loads(Path("tests/standin/targets.toml").read_text())
h = hashlib.sha256()
for name, (_v, size, _d, _c, path) in spec["packages"].items():
    h.update(m._incompressible(name, size) if "/firmware/" in path else m._code(name, size))
print(h.hexdigest())
"""


def test_payloads_are_the_same_in_every_interpreter() -> None:
    digests = {
        subprocess.run([sys.executable, "-c", _DIGEST], cwd=ROOT, capture_output=True, text=True,
                       check=True, timeout=300,
                       env={**os.environ, "PYTHONHASHSEED": seed}).stdout.strip()
        for seed in ("0", "12345")
    }  # fmt: skip
    assert len(digests) == 1 and len(next(iter(digests))) == 64


# sha256 of the first 100,000 bytes: the same on every machine and CPython 3.11+, because
# random.Random(str) seeds from the string's sha512 (seed version 2, kept across versions) into
# MT19937, and SHAKE-256 is FIPS 202. A change here changes every stand-in package.
PINNED = {
    ("code", "libc"): "9d8300a8184390e085deb1de6e79f951185cc4ff83223966e1edec43f608905f",
    ("blob", "ath10k-firmware-qca9887-ct"):
        "5f8093049baa57b4a4b3abd1d01583735dc99227755f3336b414b269d16a269d",
}  # fmt: skip


def test_payload_bytes_are_pinned() -> None:
    got = {
        ("code", "libc"): make_standin._code("libc", 100_000),
        ("blob", "ath10k-firmware-qca9887-ct"):
            make_standin._incompressible("ath10k-firmware-qca9887-ct", 100_000),
    }  # fmt: skip
    assert {k: hashlib.sha256(v).hexdigest() for k, v in got.items()} == PINNED


def test_payloads_compress_like_code_and_blobs_do_not() -> None:
    spec = tomllib.loads((ROOT / "tests/standin/targets.toml").read_text())
    size = spec["packages"]["libc"][1]
    code = make_standin._code("libc", size)
    ratio = len(lzma.compress(code, preset=9 | lzma.PRESET_EXTREME)) / len(code)
    assert 0.3 < ratio < 0.5  # program code: xz keeps a third to a half
    blob = make_standin._incompressible("ath10k-firmware-qca9887-ct", 1 << 20)
    assert len(lzma.compress(blob)) > len(blob)  # random bytes: xz only adds
    # each package has its own bytes: squashfs cannot deduplicate one against another
    assert code[:60_000] != make_standin._code("libgcc", 60_000)

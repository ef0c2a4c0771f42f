"""An independent reader/writer of apk v3 ADB files for the signing tests, from apk-tools'
documented layout (src/adb.h): "ADB." + schema, then 8-byte aligned blocks whose 32-bit
little-endian header holds the type (top 2 bits) and the size with header (low 30 bits).
A signature block (type 1) is sign_ver, hash_alg, the key id (16 bytes), then the signature
over le32(schema) || those 18 bytes || SHA-512(ADB block payload)."""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass

ADB, SIG, DATA = 0, 1, 2
SHA512 = 4  # APK_DIGEST_SHA512


@dataclass
class AdbFile:
    schema: bytes
    blocks: list[tuple[int, bytes]]

    @classmethod
    def parse(cls, raw: bytes) -> AdbFile:
        if raw[:4] != b"ADB.":
            raise ValueError(f"not an uncompressed ADB file: {raw[:4]!r}")
        off, blocks = 8, []
        while off < len(raw):
            (ts,) = struct.unpack_from("<I", raw, off)
            kind, size = ts >> 30, ts & 0x3FFFFFFF
            if kind == 3:
                raise ValueError("extended blocks are not used by these small files")
            blocks.append((kind, raw[off + 4 : off + size]))
            off += (size + 7) & ~7
        return cls(raw[4:8], blocks)

    def payload(self, kind: int) -> bytes:
        return next(p for k, p in self.blocks if k == kind)

    def signed_message(self, sig_payload: bytes) -> bytes:
        """What a v0 signature signs (adb.c: adb_digest_v0_signature)."""
        return self.schema + sig_payload[:18] + hashlib.sha512(self.payload(ADB)).digest()

    def serialize(self) -> bytes:
        out = bytearray(b"ADB." + self.schema)
        for kind, payload in self.blocks:
            size = 4 + len(payload)
            out += struct.pack("<I", (kind << 30) | size) + payload
            out += b"\0" * (((size + 7) & ~7) - size)
        return bytes(out)


def signature_block(key_id: bytes, signature: bytes) -> bytes:
    return bytes([0, SHA512]) + key_id + signature

"""One key policy, for every record kind and every cache entry of the labs.

A key says what was measured or built: the same thing again gets the same key (the store
keeps the record it replaces under .history; a cache hands back what it has), anything else
a key of its own. Readable parts come first, what a person looks for in a listing (flavour,
device, place, test), then, where the rest of the identity is more than a name, a short
sha256 of it:

- build, build-failure: the request's hash alone (results/build.py BuildRequest.key);
- footprint: <library>-<version>-<config>[-<ecc>]-<hash of the build's inputs>;
- tls-stack: <arch>-<flavour>-<userland entry>;
- memory: memory-[<device>-][<flavour>-]<hash of the image and the settings>;
- perf-*: <flavour>-<place>-<test>[-image-<rootfs sha256>…] (results/perf.py record_key);
- flash: <device>-<host>-<port>-<time> (each flash is its own record).

Every key is checked here against what the store accepts as a file name (KEY), so a key made
from an odd part fails where it is made, in one line. The hashes are the ones the records
have always had: keys in committed stores do not move (tests/results/test_key_policy.py)."""

from __future__ import annotations

import hashlib
import json
import re

from ..errors import WolfError

KEY = re.compile(r"^[A-Za-z0-9._-]{1,128}$")  # <store>/<kind>/<key>.json: a plain file name


def checked(key: str) -> str:
    if not KEY.match(key):
        raise WolfError(f"not a record key: {key[:140]!r}: letters, digits, . _ - (≤128)")
    return key


def named(*parts: str | None) -> str:
    """The readable parts that are there, joined with '-'."""
    return checked("-".join(p for p in parts if p))


def digest(text: str, n: int) -> str:
    """The first n hex digits of text's sha256."""
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def digest_json(obj: object, n: int, *, compact: bool = False) -> str:
    """digest() of obj as sorted JSON (values JSON lacks as str()). ``compact``: without
    spaces, as build requests have always been hashed (another form would move every key
    of a build store and of the build caches)."""
    sep = (",", ":") if compact else None
    return digest(json.dumps(obj, sort_keys=True, default=str, separators=sep), n)

"""The records of `invoke sources`: one Resolution per needed file, the substitutions file
that collects them (<tree>/wolf-substitutions.json), and how a substitute's version is chosen."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import WolfError
from .srcedit import Edit
from .srcneeded import Needed

CLASSES = ("exact", "same-version", "substitute", "missing")
ALLOWABLE = ("same-version", "substitute", "missing")
SUBSTITUTIONS = "wolf-substitutions.json"
SCHEMA = 1


@dataclass(frozen=True)
class Resolution:
    """Where one needed file came from and how it compares with OpenWrt's pin."""

    needed: Needed
    cls: str  # one of CLASSES
    origin: str = ""  # "dl/", a local path, a Debian pool URL, "git:<repo>@<commit>", ...
    file: str = ""  # the name it has in dl/ (OpenWrt's, or the substitute's)
    sha256: str = ""
    version: str = ""  # the version or commit it is (substitutes)
    note: str = ""
    edits: tuple[Edit, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.needed.file,
            "expected": self.needed.hash,
            "dirs": list(self.needed.dirs),
            "class": self.cls,
            "origin": self.origin,
            "placed": self.file,
            "sha256": self.sha256,
            "version": self.version,
            "note": self.note,
            "edits": [e.to_dict() for e in self.edits],
        }


@dataclass(frozen=True)
class Substitutions:
    """<tree>/wolf-substitutions.json: the last `invoke sources` run on the tree."""

    tree: str
    created: str
    allow: tuple[str, ...]
    files: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    env: tuple[tuple[str, str], ...] = ()  # what make needs with these substitutes

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(CLASSES, 0)
        for f in self.files:
            out[str(f["class"])] = out.get(str(f["class"]), 0) + 1
        return out

    def not_exact(self) -> list[dict[str, Any]]:
        return [f for f in self.files if f["class"] != "exact"]

    def digest(self) -> str:
        """What the build request names: the files and their classes, not when they were made."""
        blob = json.dumps(list(self.files), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:32]

    def summary(self) -> dict[str, Any]:
        """What a build record carries."""
        return {
            "file": str(Path(self.tree) / SUBSTITUTIONS),
            "digest": self.digest(),
            "created": self.created,
            "counts": self.counts(),
            "not_exact": self.not_exact(),
            "env": dict(self.env),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "tree": self.tree,
            "created": self.created,
            "allow": list(self.allow),
            "counts": self.counts(),
            "files": list(self.files),
            "env": dict(self.env),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Substitutions:
        if d.get("schema") != SCHEMA or not isinstance(d.get("files"), list):
            raise WolfError("not a substitutions file of this version (schema)")
        env = tuple((str(k), str(v)) for k, v in dict(d.get("env", {})).items())
        return cls(
            str(d["tree"]), str(d["created"]), tuple(d.get("allow", [])), tuple(d["files"]), env
        )


def read_substitutions(tree: Path) -> Substitutions | None:
    """The tree's substitutions file, None when `invoke sources` never ran there."""
    path = tree / SUBSTITUTIONS
    if not path.is_file():
        return None
    if path.stat().st_size > 16 << 20:
        raise WolfError(f"{path} is larger than 16 MiB; not a substitutions file")
    try:
        return Substitutions.from_dict(json.loads(path.read_text()))
    except (ValueError, KeyError, TypeError) as e:
        raise WolfError(f"{path} is not a substitutions file: {e}") from None


def parse_allow(text: str | None) -> tuple[str, ...]:
    words = tuple(w.strip() for w in (text or "").split(",") if w.strip())
    for w in words:
        if w not in ALLOWABLE:
            raise WolfError(f"--allow {w}: unknown class", hint=f"one of {', '.join(ALLOWABLE)}")
    return words


def version_key(v: str) -> tuple[int, ...]:
    """A version as numbers; a yyyymmdd date reads as (yyyy, mm, dd) so 20241016 and
    2023.02.20 compare."""
    if re.fullmatch(r"\d{8}", v):
        return (int(v[:4]), int(v[4:6]), int(v[6:]))
    return tuple(int(n) for n in re.findall(r"\d+", v))


def closest(want: str, have: list[str]) -> str | None:
    """The version in ``have`` closest to ``want``: the most leading parts in common, then
    the smallest step at the first differing part, newer first on a tie."""
    w = version_key(want)

    def score(v: str) -> tuple[int, int, int]:
        k = version_key(v)
        common = 0
        while common < min(len(k), len(w)) and k[common] == w[common]:
            common += 1
        step = abs(k[common] - w[common]) if common < min(len(k), len(w)) else 0
        return (-common, step, -1 if k > w else 0)

    return min(have, key=score) if have else None

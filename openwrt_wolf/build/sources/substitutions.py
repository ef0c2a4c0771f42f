"""The records of `invoke sources`: one Resolution per needed file, the substitutions file
that collects them (<tree>/wolf-substitutions.json), and how a substitute's version is chosen."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...catalogue import names
from ...errors import WolfError
from ...files import outputs
from ...trust import untrusted
from .edit import Edit
from .listing import Needed

CLASSES = ("exact", "same-version", "substitute", "missing")
ALLOWABLE = ("same-version", "substitute", "missing")
SUBSTITUTIONS = "wolf-substitutions.json"
SCHEMA = 1
MAX_FILE = 16 << 20


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
    def from_dict(cls, d: dict[str, Any], where: str = "substitutions file") -> Substitutions:
        """From what was read (untrusted): every field checked before a path reaches the
        tree (edits are undone by path) or a value reaches make's environment."""
        if not isinstance(d, dict) or d.get("schema") != SCHEMA:
            raise WolfError(f"{where}: not a substitutions file of this version (schema)")
        files = untrusted.check(list[dict[str, Any]], d.get("files"), where, "files")
        for i, f in enumerate(files):
            _check_file(f, where, f"files[{i}]")
        env = untrusted.check(dict[str, str], d.get("env", {}), where, "env")
        for k, v in env.items():
            names.make_variable(f"{k}={v}")  # make reads its environment as variables
        return cls(
            untrusted.check(str, d.get("tree"), where, "tree"),
            untrusted.check(str, d.get("created"), where, "created"),
            tuple(untrusted.check(list[str], d.get("allow", []), where, "allow")),
            tuple(files),
            tuple(sorted(env.items())),
        )


_FILE_FIELDS: dict[str, Any] = {
    "file": str, "expected": str, "dirs": list[str], "class": str, "origin": str,
    "placed": str, "sha256": str, "version": str, "note": str, "edits": list[dict[str, str]],
}  # fmt: skip


def _tree_path(rel: str, where: str) -> None:
    """A path inside the tree: relative, without ``..``."""
    parts = rel.split("/")
    if not rel or rel.startswith("/") or ".." in parts or "\0" in rel:
        raise WolfError(f"{where}: {rel[:80]!r} is not a path inside the tree")


def _check_file(f: dict[str, Any], where: str, at: str) -> None:
    for key, tp in _FILE_FIELDS.items():
        untrusted.check(tp, f.get(key), where, f"{at}.{key}")
    if f["class"] not in CLASSES:
        raise WolfError(f"{where}: field {at}.class is {f['class'][:40]!r}, not one of {CLASSES}")
    for name in (f["file"], *([f["placed"]] if f["placed"] else [])):
        untrusted.file_name(name, f"{where} {at}")
    for d in f["dirs"]:
        _tree_path(d, f"{where} {at}.dirs")
    for j, e in enumerate(f["edits"]):
        for key in ("path", "what", "old", "new"):
            untrusted.check(str, e.get(key), where, f"{at}.edits[{j}].{key}")
        _tree_path(e["path"], f"{where} {at}.edits[{j}].path")


def _owned(tree: Path) -> outputs.Owned:
    return outputs.Owned(tree, "the OpenWrt tree we edit")


def read_substitutions(tree: Path) -> Substitutions | None:
    """The tree's substitutions file, None when `invoke sources` never ran there. A link at
    its name is refused (one line), not read nor later written through (a dangling one made
    its target)."""
    if _owned(tree).no_link(SUBSTITUTIONS) is None:
        return None
    path = tree / SUBSTITUTIONS
    d = untrusted.load_json(path, "substitutions file", MAX_FILE, hint="`./wolf sources --tree`"
                            " writes it; remove it to start over")  # fmt: skip
    return Substitutions.from_dict(d, f"substitutions file {path}")


def write_substitutions(tree: Path, subs: Substitutions) -> None:
    """<tree>/wolf-substitutions.json, a new file renamed over whatever is there (a link too,
    never written through)."""
    _owned(tree).write_text(SUBSTITUTIONS, json.dumps(subs.to_dict(), indent=1,
                                                      sort_keys=True) + "\n")  # fmt: skip


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

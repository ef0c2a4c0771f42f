"""The results store: every capability (build, footprint, memory, ...) writes typed records
here as schema-versioned JSON, atomically (temp file + rename), so nothing measured is ever
half-written or lost. Layout: <root>/<kind>/<key>.json; a replaced record is kept under
<root>/<kind>/.history/<key>/ (records are only ever added). Written as a directory we own
(files/outputs.py Owned): a link planted at a record is replaced, one at a kind folder or
.history is refused, never followed."""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import stat
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Protocol

from ..errors import WolfError
from ..files import outputs
from ..files.outputs import WriteError as WriteError  # callers catch store.WriteError
from ..trust import untrusted
from . import key_policy

SCHEMA_VERSION = 1
write_atomic = outputs.write_text  # the one writer (outputs.py), by the name callers use
_KEY = key_policy.KEY  # the one key policy (results/key_policy.py)
HISTORY = ".history"  # <kind>/.history/<key>/<created>.json: replaced records
log = logging.getLogger("openwrt_wolf.store")

# The record envelope's fields and the JSON types each may hold (None: may be null).
_TYPES: dict[str, tuple[type, ...]] = {
    "kind": (str,),
    "key": (str,),
    "release": (str,),
    "device": (str, type(None)),
    "flavour": (str, type(None)),
    "data": (dict,),
    "created": (str,),
    "schema_version": (int,),
}


def now_utc() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Record:
    """One stored result. ``data`` is the capability's own typed model, as a dict."""

    kind: str  # "build", "footprint", "memory", "size", ...
    key: str  # the request hash, or another stable id
    release: str
    device: str | None
    flavour: str | None
    data: dict[str, Any]
    created: str = field(default_factory=now_utc)
    schema_version: int = SCHEMA_VERSION
    path: str | None = field(default=None, compare=False)  # the file it was read from

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        del d["path"]
        return {"schema": f"openwrt-wolf/record/{self.schema_version}", **d}

    @classmethod
    def from_dict(cls, d: Any, where: str = "record") -> Record:
        """Check the envelope (a JSON object, every field there with its type) before use: a
        hand-edited or foreign file must not reach a report as a half-valid record."""
        if not isinstance(d, dict):
            raise WolfError(f"{where}: a record is a JSON object, this is a {type(d).__name__}")
        if d.get("schema_version") != SCHEMA_VERSION:
            raise WolfError(
                f"{where}: schema version {d.get('schema_version')!r}, this tool reads "
                f"{SCHEMA_VERSION}",
                hint="re-run the job that wrote it, or use the matching openwrt-wolf version",
            )
        for name, types in _TYPES.items():
            if name not in d:
                raise WolfError(f"{where}: field {name!r} is missing")
            # bool is an int to Python, never a schema version
            if not isinstance(d[name], types) or isinstance(d[name], bool):
                want = " or ".join("null" if t is type(None) else t.__name__ for t in types)
                what = untrusted.describe(d[name])
                raise WolfError(f"{where}: field {name} is {what}, not {want}")
        if not _KEY.match(d["kind"]) or not _KEY.match(d["key"]):
            raise WolfError(f"{where}: kind/key {d['kind']!r}/{d['key']!r} are not record names")
        return cls(**{k: d[k] for k in _TYPES})


MAX_RECORD = untrusted.MAX_JSON


def skipped(e: WolfError) -> None:
    """The one warning for a record that is not read (its file named in ``e``)."""
    log.warning("warning: skipped result record %s (delete it or re-run the job that "
                "wrote it)", e)  # fmt: skip


def _listable(d: Path, what: str) -> bool:
    """Whether ``d`` is a directory to list: False when it is absent, WolfError when it is
    there but cannot be listed (unreadable, a symlink loop) or is no directory."""
    try:
        st = d.stat()
    except FileNotFoundError:
        return False
    except OSError as e:
        raise WolfError(f"{what} {d}: {untrusted.os_reason(e)}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise WolfError(f"{what} {d} is {untrusted.kind_of(st.st_mode)}, not a directory")
    return True


def _records_in(d: Path) -> list[Path]:
    return [p for p in untrusted.listdir(d, "store directory") if p.name.endswith(".json")]


def _subdirs(d: Path) -> list[Path]:
    """The directories in ``d`` (kinds, or a record's kept versions); no hidden ones."""
    if not _listable(d, "store directory"):
        return []
    out = []
    for p in untrusted.listdir(d, "store directory"):
        if p.name.startswith("."):
            continue
        try:
            if stat.S_ISDIR(p.stat().st_mode):
                out.append(p)
        except OSError:
            continue  # a dangling link or a loop among the kinds: no kind of ours
    return out


class Store(Protocol):
    def put(self, record: Record) -> Path: ...
    def get(self, kind: str, key: str) -> Record | None: ...
    def query(
        self,
        kind: str | None = None,
        *,
        release: str | None = None,
        device: str | None = None,
        flavour: str | None = None,
        since: str | None = None,
    ) -> list[Record]: ...


class FileStore:
    """The default Store: a directory of JSON files."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _path(self, kind: str, key: str) -> Path:
        for part, what in ((kind, "kind"), (key, "key")):
            if not _KEY.match(part):
                raise WolfError(f"invalid record {what} {part!r}")
        return self.root / kind / f"{key}.json"

    def _owned(self) -> outputs.Owned:
        """The store as a directory we own: a link planted in it (a kind, .history, a record)
        is never followed (files/outputs.py Owned)."""
        return outputs.Owned(self.root, "the results store")

    def put(self, record: Record) -> Path:
        rel = self._path(record.kind, record.key).relative_to(self.root)
        self._keep(rel)
        text = json.dumps(record.to_dict(), indent=2, sort_keys=True) + "\n"
        return self._owned().write_text(rel, text)  # a link at its name is replaced

    def _keep(self, rel: Path) -> None:
        """Records are only ever added: the one a put replaces (a forced rebuild of the same
        request) stays as <kind>/.history/<key>/<its created>.json. A hard link, made before
        the new file is renamed over the old, so no reader sees the record missing. What is
        no file (a FIFO, a directory, a link) is not kept; a file that does not read is, by
        its mtime. A link on the way (the kind, .history) is refused, never followed."""
        owned = self._owned()
        st = owned.stat(rel)
        if st is None or not stat.S_ISREG(st.st_mode):
            return
        path = self.root / rel
        try:
            created = self._load(path).created
        except WolfError:
            created = ""
        stamp = re.sub(r"[^0-9A-Za-z]", "", created) or f"mtime{st.st_mtime_ns}"
        dest = rel.parent / HISTORY / rel.stem / f"{stamp}.json"
        if owned.no_link(dest) is not None:  # kept already (a link there: refused)
            return
        if not owned.link(rel, dest):  # a file system without hard links
            data = untrusted.read_bytes(path, "store record", MAX_RECORD)

            def fill(out: IO[bytes]) -> None:
                out.write(data)

            owned.write(dest, fill)

    def history(
        self,
        kind: str,
        *,
        release: str | None = None,
        device: str | None = None,
        flavour: str | None = None,
    ) -> list[Record]:
        """Every record of a kind the store ever held (current and replaced), oldest first."""
        out = {
            (r.key, r.created): r
            for r in self.query(kind, release=release, device=device, flavour=flavour)
        }
        old = self.root / kind / HISTORY
        kept = [p for d in _subdirs(old) for p in _records_in(d)]
        for path in sorted(kept):
            r = self._load_or_warn(path)
            if r is None:
                continue
            if (release and r.release != release) or (device and r.device != device):
                continue
            if flavour and r.flavour != flavour:
                continue
            out.setdefault((r.key, r.created), r)
        return sorted(out.values(), key=lambda r: r.created)

    def get(self, kind: str, key: str) -> Record | None:
        """The record, or None when there is none or it is unreadable (said in one warning
        line): the job then runs again and replaces it."""
        path = self._path(kind, key)
        if not path.exists():
            return None
        return self._load_or_warn(path)

    def _load(self, path: Path) -> Record:
        """The record in a file, read through untrusted.py: a regular file of at most
        MAX_RECORD bytes, JSON with finite 64-bit numbers, the envelope checked."""
        doc = untrusted.load_json(path, "", MAX_RECORD)
        return dataclasses.replace(Record.from_dict(doc, str(path)), path=str(path))

    def _load_or_warn(self, path: Path) -> Record | None:
        try:
            return self._load(path)
        except WolfError as e:
            skipped(e)
            return None

    def _paths(self, kind: str | None) -> Iterator[Path]:
        """The record files of a kind (every kind: None). A kind directory that cannot be
        listed is an error, not an empty kind: a report or a --fail-on gate must not pass on
        records it never saw."""
        if not _listable(self.root, "store"):
            return
        kinds = [self.root / kind] if kind else sorted(_subdirs(self.root))
        for d in kinds:
            if _listable(d, "store directory"):
                yield from sorted(_records_in(d))

    def query(
        self,
        kind: str | None = None,
        *,
        release: str | None = None,
        device: str | None = None,
        flavour: str | None = None,
        since: str | None = None,
    ) -> list[Record]:
        out = []
        for path in self._paths(kind):
            r = self._load_or_warn(path)  # one bad record must not hide all the others
            if r is None:
                continue
            if release and r.release != release:
                continue
            if device and r.device != device:
                continue
            if flavour and r.flavour != flavour:
                continue
            if since and r.created < since:
                continue
            out.append(r)
        return sorted(out, key=lambda r: r.created)

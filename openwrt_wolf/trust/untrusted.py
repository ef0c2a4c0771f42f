"""The one door for files we did not write in this run: result records, baselines,
profiles.json, manifests, sha256sums, package indexes. Nothing in them is trusted
(docs/threat-model.md).

- ``read_bytes``: a regular file only (a FIFO would hang the read, /dev/zero never ends, a
  directory or a symlink loop is no file), its size checked before reading and while
  reading, every failure one line naming the file. ``open_file``: the same checks for a
  reader that streams and bounds what it reads (openwrt_wolf/files/archive.py).
- ``load_json``/``loads_json``: JSON whose numbers are finite and fit in 64 bits: NaN,
  Infinity, 1e400 and a 5,000-digit integer (Python's int-str limit raises on it) are
  refused with the field's path, never passed on.
- ``load_cached``: a file of our own cache, read the same way; absent, damaged or from an
  older version is ``None`` (the caller makes it again), never an error and never trusted.
- ``typed``: a dataclass from a JSON object, every field checked against its annotation;
  the error names the file and the field (``build.json: field data.fit.limit: a string
  where a whole number belongs``).
- ``file_name``: a name that a file lists for another file beside it (profiles.json's
  images, sha256sums) is a plain name in that directory: no ``/``, no ``..``.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import math
import os
import stat
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO, Literal, TypeVar, get_args, get_origin

from ..errors import WolfError

T = TypeVar("T")

MAX_JSON = 64 << 20  # a store record, baseline or profiles.json: MB, not GB
MAX_TEXT = 16 << 20  # a manifest or sha256sums: one line per package or file
MAX_INT = 1 << 63  # sizes and counts fit in 64 bits; anything longer is not ours
_MAX_DIGITS = len(str(MAX_INT))
CHUNK = 1 << 20

_KINDS = (
    (stat.S_ISREG, "a file"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def kind_of(mode: int) -> str:
    """'a FIFO (named pipe)', 'a directory', 'a file', ... for a stat mode."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def os_reason(e: OSError) -> str:
    """An OSError as the few words a user needs (no errno numbers, no repr)."""
    if e.errno == errno.ELOOP:
        return "a symlink loop"
    if e.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if e.errno == errno.ENOENT:
        return "does not exist"
    return e.strerror or type(e).__name__


def open_file(path: Path, what: str, *, hint: str | None = None) -> BinaryIO:
    """A regular file opened for reading, for a reader that bounds what it reads itself (an
    archive, streamed): stat first, so a FIFO, a device, a directory or a symlink loop is
    one line without being opened; then opened O_NONBLOCK and checked again with fstat."""
    it = f"{what} {path}" if what else str(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise WolfError(f"{it} does not exist", hint=hint) from None
    except OSError as e:
        raise WolfError(f"{it}: {os_reason(e)}", hint=hint) from None
    if not stat.S_ISREG(st.st_mode):
        raise WolfError(f"{it} is {kind_of(st.st_mode)}, not a file", hint=hint)
    try:
        # O_NONBLOCK: should the path become a FIFO after the stat, open must not hang on it
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise WolfError(f"{it}: {os_reason(e)}", hint=hint) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise WolfError(f"{it} changed into {kind_of(mode)}", hint=hint)
    return os.fdopen(fd, "rb")


def read_bytes(
    path: Path,
    what: str,
    limit: int,
    *,
    hint: str | None = None,
    holds: str = "such a file holds",
    big_hint: str | None = None,
) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; WolfError (one line) else.
    ``what`` names the file's role in messages ("baseline", "profiles.json"; "" for none)."""
    it = f"{what} {path}" if what else str(path)
    with open_file(path, what, hint=hint) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > limit:
            raise WolfError(
                f"{it} has {size:,} bytes, more than {holds} ({limit:,} B)", hint=big_hint or hint
            )
        parts, total = [], 0
        try:
            while chunk := fh.read(CHUNK):
                total += len(chunk)
                if total > limit:  # it grew while we read
                    raise WolfError(f"{it} grew past {limit:,} bytes while being read")
                parts.append(chunk)
        except OSError as e:
            raise WolfError(f"{it}: {os_reason(e)}", hint=hint) from None
    return b"".join(parts)


def listdir(d: Path, what: str) -> list[Path]:
    """The entries of a directory; WolfError (one line) when it cannot be listed."""
    try:
        return list(Path(d).iterdir())
    except OSError as e:
        raise WolfError(f"{what} {d}: {os_reason(e)}") from None


def read_text(path: Path, what: str, limit: int = MAX_TEXT) -> str:
    """A text file (manifest, sha256sums): bytes that are not UTF-8 become U+FFFD."""
    return read_bytes(path, what, limit).decode("utf-8", "replace")


class _Refused(str):
    """A number JSON may not carry into our models; replaced by an error with its path."""


def _parse_int(text: str) -> int | _Refused:
    if len(text.lstrip("-")) > _MAX_DIGITS:
        return _Refused(f"an integer of {len(text.lstrip('-')):,} digits")
    n = int(text)
    return n if -MAX_INT <= n < MAX_INT else _Refused(f"{text} (beyond 64 bits)")


def _parse_float(text: str) -> float | _Refused:
    x = float(text)
    return x if math.isfinite(x) else _Refused(f"{text[:20]} (not a finite number)")


def _parse_constant(name: str) -> _Refused:
    return _Refused(f"{name} (not a number JSON allows)")


def _first_refused(v: Any, path: str) -> tuple[str, _Refused] | None:
    if isinstance(v, _Refused):
        return path, v
    if isinstance(v, dict):
        items = v.items()
    elif isinstance(v, list):
        items = ((f"[{i}]", x) for i, x in enumerate(v))  # type: ignore[assignment]
    else:
        return None
    for k, x in items:
        sub = (f"{path}{k}" if k.startswith("[") else f"{path}.{k}") if path else str(k)
        got = _first_refused(x, sub)
        if got:
            return got
    return None


def loads_json(raw: bytes | str, where: str) -> Any:
    """JSON with only finite, 64-bit numbers; WolfError naming ``where`` and the field."""
    refused = False

    def mark(v: Any) -> Any:
        nonlocal refused
        refused = refused or isinstance(v, _Refused)
        return v

    try:
        doc = json.loads(
            raw,
            parse_int=lambda s: mark(_parse_int(s)),
            parse_float=lambda s: mark(_parse_float(s)),
            parse_constant=lambda s: mark(_parse_constant(s)),
        )
    except json.JSONDecodeError as e:
        raise WolfError(f"{where}: not JSON ({e.msg} at line {e.lineno})") from None
    except UnicodeDecodeError:
        raise WolfError(f"{where}: not JSON (not UTF-8 text)") from None
    except RecursionError:
        raise WolfError(f"{where}: not JSON we read (nested too deeply)") from None
    if refused:
        try:
            got = _first_refused(doc, "")
        except RecursionError:
            got = None
        path, why = got if got else ("?", "a number")
        raise WolfError(f"{where}: field {path or '(top)'} is {why}")
    return doc


def load_json(path: Path, what: str, limit: int = MAX_JSON, *, hint: str | None = None) -> Any:
    """A JSON file read through ``read_bytes`` and ``loads_json``."""
    return loads_json(read_bytes(path, what, limit, hint=hint), f"{what} {path}".strip())


def load_cached(path: Path, what: str, parse: Callable[[Any], T]) -> T | None:
    """A cache entry of ours: ``parse`` of its JSON, or None when it is absent, unreadable
    or refused by ``parse`` (a WolfError): the caller makes the entry again."""
    try:
        return parse(load_json(path, what))
    except WolfError:
        return None


# --- typed models from JSON objects -------------------------------------------------------

_NAMES: tuple[tuple[type, str], ...] = (  # bool first: it is an int to Python
    (bool, "true or false"),
    (int, "a whole number"),
    (float, "a number"),
    (str, "a string"),
    (list, "a list"),
    (dict, "an object"),
)


def describe(v: Any) -> str:
    """What a JSON value is, in words (never the value: it may be anything)."""
    if v is None:
        return "null"
    return next((name for t, name in _NAMES if isinstance(v, t)), type(v).__name__)


def _want(tp: Any) -> str:
    if tp is type(None):
        return "null"
    names = dict(_NAMES)
    if tp in names:
        return names[tp]
    origin = get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_want(a) for a in get_args(tp))
    if origin is Literal:
        return "one of " + ", ".join(str(a) for a in get_args(tp))
    if origin in (list, tuple):
        return "a list"
    if origin is dict or dataclasses.is_dataclass(tp):
        return "an object"
    return str(tp)


class _Mismatch(Exception):
    def __init__(self, path: str, text: str) -> None:
        super().__init__(text)
        self.path, self.text = path, text


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:  # resolved once per class (the annotations are strings)
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _convert(tp: Any, v: Any, path: str) -> Any:
    if tp is Any:
        return v
    if tp is type(None):
        if v is None:
            return None
        raise _Mismatch(path, f"{describe(v)} where null belongs")
    origin = get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        alts = get_args(tp)
        if v is None and type(None) in alts:
            return None
        deepest: _Mismatch | None = None
        for a in alts:
            if a is type(None):
                continue
            try:
                return _convert(a, v, path)
            except _Mismatch as e:
                if deepest is None or len(e.path) > len(deepest.path):
                    deepest = e
        if deepest is not None and deepest.path != path:
            raise deepest  # inside an object or list: the field that is wrong
        raise _Mismatch(path, f"{describe(v)} where {_want(tp)} belongs")
    if origin is Literal:
        if isinstance(v, str | int) and not isinstance(v, bool) and v in get_args(tp):
            return v
        raise _Mismatch(path, f"{describe(v)} where {_want(tp)} belongs")
    if tp is float:
        if isinstance(v, int | float) and not isinstance(v, bool):
            return v
    elif tp in (int, str, bool):
        if isinstance(v, tp) and (tp is bool or not isinstance(v, bool)):
            return v
    elif origin in (list, tuple):
        if isinstance(v, list):
            args = get_args(tp)
            item = args[0] if args else Any
            got = [_convert(item, x, f"{path}[{i}]") for i, x in enumerate(v)]
            return tuple(got) if origin is tuple else got
    elif origin is dict:
        if isinstance(v, dict):
            _k, item = get_args(tp) or (str, Any)
            return {k: _convert(item, x, f"{path}.{k}") for k, x in v.items()}
    elif dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if isinstance(v, dict):
            return _object(tp, v, path)
    else:
        raise TypeError(f"untrusted.typed cannot check {tp!r}")  # a programming error
    raise _Mismatch(path, f"{describe(v)} where {_want(tp)} belongs")


def _object(cls: type[T], d: dict[str, Any], path: str) -> T:
    hints = _hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        sub = f"{path}.{f.name}" if path else f.name
        if f.name not in d:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise _Mismatch(sub, "missing")
            continue
        kwargs[f.name] = _convert(hints[f.name], d[f.name], sub)
    return cls(**kwargs)


def typed(cls: type[T], value: Any, where: str, path: str = "") -> T:
    """``cls`` (a dataclass) from a JSON object; unknown keys are ignored, a missing field
    without a default or a value of the wrong type is one WolfError naming ``where`` and the
    field's path."""
    try:
        if not isinstance(value, dict):
            raise _Mismatch(path, f"{describe(value)} where an object belongs")
        return _object(cls, value, path)
    except _Mismatch as e:
        raise WolfError(f"{where}: field {e.path or '(top)'} is {e.text}") from None


def check(tp: Any, value: Any, where: str, path: str) -> Any:
    """One value against a type (``int | None``, ``list[str]``, ...), as ``typed`` checks."""
    try:
        return _convert(tp, value, path)
    except _Mismatch as e:
        raise WolfError(f"{where}: field {e.path} is {e.text}") from None


def file_name(name: str, where: str) -> str:
    """A file name another file lists (profiles.json's images, sha256sums): a plain name in
    the same directory, so a list cannot point the reader at ../../etc/shadow."""
    if (
        not name
        or name in (".", "..")
        or "/" in name
        or "\0" in name
        or not name.isprintable()
        or len(name) > 255
    ):
        raise WolfError(f"{where}: {name[:60]!r} is not a file name in its directory")
    return name

"""One fetch-verify-cache for every downloader (issue 33): a file in a cache (or a tree's dl/)
taken from the first of its origins whose bytes verify.

Under the caller's lock, a cached file that verifies is returned. Otherwise each origin in
turn — a local file copied, or an http(s) URL streamed (bounded in size and time by
httpget.py), resumed with Range when asked and the server honours it — is written into
``<dest>.part``, its sha256 taken on the way, verified, and put in place by outputs.publish
(the one rename): a broken download never looks like a finished one. A .part that fails
verification is removed. What went wrong is reported per origin (NotFetched.failures), so the
caller words its own one-line error and hint."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import stat
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from .. import term
from ..errors import WolfError
from . import httpget, outputs
from .hashing import file_sha256
from .locks import locked

CHUNK = 1 << 16


@dataclass(frozen=True)
class Origin:
    """One place a file may come from."""

    where: str  # an http(s) URL, or a local file's path
    name: str = ""  # how the caller's failures name it ("mirror", "openwrt"); default where
    label: str = ""  # the progress line's; default the destination's file name

    @property
    def is_url(self) -> bool:
        return self.where.startswith(("http://", "https://"))

    @property
    def shown(self) -> str:
        return self.name or self.where


@dataclass(frozen=True)
class Verdict:
    ok: bool
    got: str  # the digest that decided: the sha256, or the caller's (a tree digest)
    how: str = "sha256"  # how it was accepted, in the caller's words


# (the file, its sha256 when it was taken while the bytes streamed in, else None) -> verdict
Verifier = Callable[[Path, str | None], Verdict]


def sha256(expected: str) -> Verifier:
    """The plain verifier: the file's sha256 is ``expected``."""

    def check(path: Path, known: str | None) -> Verdict:
        got = known or file_sha256(path)
        return Verdict(got == expected, got)

    return check


@dataclass(frozen=True)
class Failure:
    """Why one origin gave nothing."""

    origin: Origin
    reason: str  # a few words: "HTTP 404", "ConnectionError", "more than 1,000 bytes", ...
    got: str | None = None  # the bytes arrived and failed verification: their digest
    status: int | None = None  # the server answered with this HTTP status
    unreached: bool = False  # the server did not answer (connection refused, no route, DNS)
    broken: bool = False  # the transfer broke off midway (with resume, the .part is kept)
    missing: bool = False  # a local origin that is not a regular file
    error: BaseException | None = None  # the exception, for the caller's own wording (ENOSPC)

    @property
    def mismatch(self) -> bool:
        return self.got is not None


class NotFetched(WolfError):
    """No origin gave verified bytes; ``failures`` says why, one per origin tried."""

    def __init__(self, dest: Path, failures: list[Failure]) -> None:
        said = "; ".join(f"{f.origin.shown}: {f.reason}" for f in failures) or "no origin"
        super().__init__(f"{dest.name} not fetched ({said})")
        self.failures = failures


@dataclass(frozen=True)
class Got:
    path: Path
    origin: Origin | None  # None: the cache held it already
    how: str  # the verdict's


def fetch(
    dest: Path,
    origins: Sequence[Origin],
    verify: Verifier,
    *,
    lock: Path | None,
    max_bytes: int | None = None,
    resume: bool = False,
    past_mismatch: bool = False,
    remove_bad: bool = True,
) -> Got:
    """``dest`` verified: the cached one, else fetched from the first origin that gives it.

    ``lock``: the lock file held throughout (None: the caller holds one that covers dest).
    ``max_bytes``: what a server may send (EFBIG past it); a local file is the user's own.
    ``resume``: a .part left by a broken download is continued with Range, and a transfer
    that breaks keeps its .part for the next run (else every failure removes it).
    ``past_mismatch``: bytes that fail verification end the tries (the default: a server
    serving other bytes is an error, not a fallback) or only that origin's.
    ``remove_bad``: a cached dest that fails verification is removed (a damaged cache entry);
    False leaves it to be replaced (a tree's dl/, which the caller reads on).
    Raises NotFetched with the failures; a verifier's WolfError after the .part is removed."""
    # the folders made by the link rule first: a linked folder below the cache (upstream/ a
    # link) is one line before the lock, the cached file or a .part is opened by name there
    for f in (dest, *([lock] if lock is not None else [])):
        owned, rel = _owned(f)
        owned.folder_of(rel)
    with locked(lock) if lock is not None else contextlib.nullcontext():
        if dest.is_file():
            try:
                v: Verdict | None = verify(dest, None)
            except WolfError:  # not even readable as what it should be: damaged too
                v = None
            if v is not None and v.ok:
                return Got(dest, None, v.how)
            if remove_bad:
                dest.unlink()
        part = dest.with_name(dest.name + ".part")
        failures: list[Failure] = []
        for o in origins:
            try:
                failure, known = _into(o, part, o.label or dest.name, max_bytes, resume)
                if failure is None:
                    v = _verified(verify, part, known)
                    if v.ok:
                        outputs.publish(part, dest)  # refused after a termination signal
                        return Got(dest, o, v.how)
                    part.unlink(missing_ok=True)
                    failure = Failure(o, f"{v.how} {v.got} is not the expected one", got=v.got)
            except BaseException:  # interrupted: a .part is kept only to be resumed
                if not resume:
                    part.unlink(missing_ok=True)
                raise
            failures.append(failure)
            if failure.mismatch and not past_mismatch:
                break
        raise NotFetched(dest, failures)


def _verified(verify: Verifier, part: Path, known: str | None) -> Verdict:
    try:
        return verify(part, known)
    except BaseException:  # the verifier's own error line: the bytes are not kept either
        part.unlink(missing_ok=True)
        raise


def reason(e: BaseException) -> str:
    """A failure in a few words: 'HTTP 404', 'ConnectionError', 'No space left on device'."""
    import requests

    if isinstance(e, requests.HTTPError) and e.response is not None:
        return f"HTTP {e.response.status_code}"
    if isinstance(e, OSError) and not isinstance(e, requests.RequestException) and e.strerror:
        return e.strerror  # "No space left on device", "more than 268,435,456 bytes"
    return type(e).__name__


def _into(
    o: Origin, part: Path, label: str, max_bytes: int | None, resume: bool
) -> tuple[Failure | None, str | None]:
    """The origin's bytes into ``part``: (None, their sha256 when it is the whole file's) or
    (the failure, None). The .part is removed on failure, unless resume keeps it."""
    try:
        if o.is_url:
            return _from_url(o, part, label, max_bytes, resume)  # a server's answer is bounded
        src = Path(o.where)
        if not src.is_file():  # a FIFO or a device is not waited on or read for ever
            return Failure(o, "not a file there", missing=True), None
        with src.open("rb") as fi, _part(part) as fo:
            size = src.stat().st_size
            return None, _copy(iter(lambda: fi.read(CHUNK), b""), fo, label, size, 0, None)
    except OSError as e:  # requests' errors are OSErrors too: they were handled below
        part.unlink(missing_ok=True)
        return Failure(o, reason(e), error=e), None


def _from_url(
    o: Origin, part: Path, label: str, max_bytes: int | None, resume: bool
) -> tuple[Failure | None, str | None]:
    import requests  # here: a run that downloads nothing does not load it

    have = _part_size(part) if resume else 0
    headers = {"Range": f"bytes={have}-"} if have else {}
    keep = resume and have > 0  # nothing new arrived yet: the .part is as the last run left it

    def failed(f: Failure) -> tuple[Failure, None]:
        if not keep:
            part.unlink(missing_ok=True)
        return f, None

    try:  # bounded in size and time, headers and redirects too (httpget.py)
        r = httpget.get(o.where, headers=headers, limit=_bound(max_bytes))
    except requests.RequestException as e:
        return failed(Failure(o, reason(e), unreached=True, error=e))
    with r:
        if have and r.status_code == 416:  # nothing left to send: the .part is whole (or bad)
            return None, None
        if r.status_code not in (200, 206):
            return failed(Failure(o, f"HTTP {r.status_code}", status=r.status_code))
        if r.status_code == 200:
            have = 0  # the server ignores Range: the whole file again
        total = _total(r, have, max_bytes)  # refused past max_bytes before a byte is read
        keep = resume
        try:
            with _part(part, append=bool(have)) as fo:
                known = _copy(r.iter_content(CHUNK), fo, label, total, have, max_bytes)
        except requests.RequestException as e:
            return failed(Failure(o, reason(e), broken=True, error=e))
        except OSError as e:  # the disk, or max_bytes: the .part is of no use
            part.unlink(missing_ok=True)
            return Failure(o, reason(e), error=e), None
    return None, (None if have else known)  # a resumed file's is taken by the verifier


def _part(part: Path, *, append: bool = False) -> IO[bytes]:
    """The .part opened by outputs.Owned: a link planted at its name (to any file) is one
    error line, never written through, also when a download is resumed."""
    owned, rel = _owned(part)
    return owned.open_part(rel, append=append)


def _part_size(part: Path) -> int:
    """What a broken download left to resume from: a regular file's size (lstat; a link
    there is refused when it is opened), else 0."""
    owned, rel = _owned(part)
    st = owned.stat(rel)
    return st.st_size if st is not None and stat.S_ISREG(st.st_mode) else 0


def _bound(max_bytes: int | None) -> int:
    return httpget.BODY_MAX if max_bytes is None else max_bytes


def _total(r: httpget.Answer, have: int, max_bytes: int | None) -> int | None:
    """The whole file's size as the answer gives it (its Content-Length after ``have``)."""
    length = r.length  # Refused when it is not a byte count
    if length is None:
        return None
    if have + length > _bound(max_bytes):
        raise httpget.too_big(_bound(max_bytes))
    return have + length


def _copy(
    chunks: Iterable[bytes],
    out: IO[bytes],
    label: str,
    total: int | None,
    have: int,
    max_bytes: int | None,
) -> str:
    """Chunks into ``out`` with a progress line; their sha256. OSError EFBIG past max_bytes."""
    h = hashlib.sha256()
    with term.progress(label, total, unit="B") as bar:
        bar.advance(have)
        for chunk in chunks:
            if max_bytes is not None and bar.completed + len(chunk) > max_bytes:
                raise OSError(errno.EFBIG, f"more than {max_bytes:,} bytes")
            out.write(chunk)
            h.update(chunk)
            bar.advance(len(chunk))
    return h.hexdigest()


def _owned(part: Path) -> tuple[outputs.Owned, str]:
    """A .part in the cache is owned from the cache's root (a linked folder on the way, as
    upstream/, refused); elsewhere (a tree's dl/) from its own folder."""
    from .. import paths

    return paths.in_cache(part, "a download directory")

"""Streaming one URL to a file with progress: through a .part file renamed at the end, so a
broken download never looks like a finished one; the sha256 is taken on the way."""

from __future__ import annotations

import contextlib
import errno
import hashlib
from pathlib import Path

from .. import term
from . import outputs

CONNECT_TIMEOUT = 15.0
READ_TIMEOUT = 60.0
CHUNK = 1 << 16


def download(url: str, dest: Path, label: str, *, max_bytes: int | None = None) -> str:
    """Stream url to dest; return the sha256 of what arrived. Raises requests' errors (an
    HTTP status as HTTPError) and OSError (EFBIG past ``max_bytes``); nothing is left at
    dest or beside it then."""
    import requests  # here: a run that downloads nothing does not load it

    part = dest.with_name(dest.name + ".part")
    h = hashlib.sha256()
    try:
        with requests.get(url, stream=True, timeout=(CONNECT_TIMEOUT, READ_TIMEOUT)) as r:
            r.raise_for_status()
            total = int(r.headers.get("content-length") or 0) or None
            with part.open("wb") as fh, term.progress(label, total, unit="B") as bar:
                for chunk in r.iter_content(CHUNK):
                    if max_bytes is not None and bar.completed + len(chunk) > max_bytes:
                        raise OSError(errno.EFBIG, f"more than {max_bytes:,} bytes")
                    fh.write(chunk)
                    h.update(chunk)
                    bar.advance(len(chunk))
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            part.unlink()
        raise
    outputs.publish(part, dest)
    return h.hexdigest()


def reason(e: BaseException) -> str:
    """A download failure in a few words: 'HTTP 404', 'ConnectionError', ..."""
    import requests

    if isinstance(e, requests.HTTPError) and e.response is not None:
        return f"HTTP {e.response.status_code}"
    if isinstance(e, OSError) and not isinstance(e, requests.RequestException) and e.strerror:
        return e.strerror  # "No space left on device", "more than 268,435,456 bytes"
    return type(e).__name__

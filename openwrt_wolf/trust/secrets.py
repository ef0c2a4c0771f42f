"""Secrets never printed (docs/threat-model.md "Secrets"): passwords in queue, mirror and
artifact URLs, in every form a URL can carry one —

- the user field and the password (``scheme://user:PASSWORD@host``, ``scheme://SECRET@host``),
  whatever characters the password holds (``#``, ``/``, ``?`` and ``@`` included, where a URL
  parser would read a fragment, a path or a query instead);
- query parameters that carry credentials (``?password=``, ``username``, ``token``, ...);
- once a URL was parsed, its password anywhere in a text (as written and percent-decoded),
  e.g. inside a library's error message.

``redact`` shows one URL without them; ``scrub`` takes them out of any text. The terminal,
the log and the one-line errors pass every line through ``scrub`` (term.clean), so a
message that forgot to redact still prints no secret.
"""

from __future__ import annotations

import re
import threading
from urllib.parse import unquote

HIDDEN = "***"
# query parameters whose values are credentials (redis-py reads password and username)
_QUERY_SECRET = re.compile(
    r"([?&;](?:password|passwd|pass|pwd|username|user|token|secret|auth|api[_-]?key|key)=)"
    r"[^&;#\s]*",
    re.I,
)
# scheme://userinfo@ — the userinfo up to the LAST @ before the host, any characters but
# whitespace (a password may hold #, /, ? and @)
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<info>[^\s]*)@")
# a URL given as one value (an option, a variable) is one token: its userinfo runs to its
# last @, whatever it holds (a space or a newline in a password is still the password)
_VALUE_USERINFO = re.compile(r"(?P<scheme>^\s*[A-Za-z][A-Za-z0-9+.-]*://)(?P<info>.*)@", re.S)
_UNSHOWN = re.compile(r"[\s\x00-\x1f\x7f-\x9f]")
_known: set[str] = set()
_lock = threading.Lock()


def _hide_userinfo(m: re.Match[str]) -> str:
    info = m.group("info")
    user, sep, _password = info.partition(":")
    if sep and all(c not in user for c in "/?#@"):
        return f"{m.group('scheme')}{user}:{HIDDEN}@"
    return f"{m.group('scheme')}{HIDDEN}@"


def redact(url: str) -> str:
    """The URL as printed: a password (or a user field alone) replaced by ***, credentials
    in the query replaced by ***; the host, port, path and queue name kept."""
    return _QUERY_SECRET.sub(rf"\1{HIDDEN}", _USERINFO.sub(_hide_userinfo, url))


def shown(value: str, limit: int = 120) -> str:
    """A URL given as a value, as an error line may echo it: credentials hidden (also where
    whitespace or a control character in the value stops ``redact``'s URL), and only up to
    the first whitespace or control character: a malformed URL's newline was echoed with
    whatever followed it."""
    text = _QUERY_SECRET.sub(rf"\1{HIDDEN}", _VALUE_USERINFO.sub(_hide_userinfo, value.strip()))
    cut = _UNSHOWN.search(text)
    if cut or len(text) > limit:
        text = text[: min(cut.start() if cut else limit, limit)] + "…"
    return text


def one_token(value: str, where: str) -> str:
    """A URL given as a value (an option, a variable) is one token: whitespace or a control
    character in it is one error line (urlsplit drops a newline or a tab, a client keeps a
    space in the password), echoed as ``shown`` makes it; its credentials are remembered."""
    remember(value)
    if _UNSHOWN.search(value.strip()):
        from ..errors import WolfError

        raise WolfError(
            f"{where} {shown(value)}: a URL holds no whitespace or control character",
            hint="percent-encode them, e.g. %20 for a space",
        )
    return value


def remember(url: str) -> None:
    """Scrub this URL's credentials from every text printed from now on (this process)."""
    found: set[str] = set()
    m = _VALUE_USERINFO.search(url)
    if m:
        info = m.group("info")
        _user, sep, password = info.partition(":")
        found |= {info, unquote(info)}
        if sep:
            found |= {password, unquote(password)}
    for q in _QUERY_SECRET.finditer(url):
        if q.group(1)[1:].lower().startswith("user"):
            continue  # a user name is hidden in the URL shown, but not searched for in texts
        value = url[q.end(1) : q.end()]
        found |= {value, unquote(value)}
    with _lock:
        _known.update(s for s in found if len(s) >= 3)  # "a" would scrub every "a"


def scrub(text: str) -> str:
    """``text`` without URL credentials and without any secret ``remember``ed."""
    text = redact(text)
    with _lock:
        known = sorted(_known, key=len, reverse=True)
    for s in known:
        text = text.replace(s, HIDDEN)
    return text

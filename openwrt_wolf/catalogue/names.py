"""OpenWrt's names, checked where a value enters a make command line, a config file or a
feed list (docs/threat-model.md "Values that reach make, configs and feeds"): make expands
``$(...)`` in a variable given on its command line, a newline in a .config value adds a
config line, a newline or a space in a feeds.conf URL adds a feed. So:

- a package name is OpenWrt's: letters, digits, ``.``, ``_``, ``+``, ``-``, starting with a
  letter or digit (the Package/<name> of a Makefile, the CONFIG_PACKAGE_<name> symbol); in
  PACKAGES= a leading ``-`` removes a default package; in --packages ``@group`` names a
  flavour's package group (data/flavours.toml), expanded before anything reaches make;
- a feed line is ``src-<method> <name> <url>`` as scripts/feeds parses it: the name a word,
  the URL one token without whitespace, ``#`` (a comment there) or control characters;
- any other value on make's command line (FILES=, BIN_DIR=, PROFILE=) is a plain path or
  word: no ``$``, no whitespace, no quote, backslash, ``#`` or control character.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..errors import WolfError

PACKAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,99}$")
MAX_PACKAGES = 200
FEED_NAME = re.compile(r"^\w{1,64}$", re.ASCII)
FEED_METHOD = re.compile(r"^src-[\w-]{1,32}$", re.ASCII)
# scripts/feeds runs `ln -s '%s' ...`, `git clone ... '%s' ...` through the shell: a quote
# there would end the quoting and run the rest
FEED_URL = re.compile(r"^[^\s#'\x00-\x1f\x7f-\x9f]{1,4096}$")
MAKE_WORD = re.compile(r"^[A-Za-z0-9._+,/@%=:~-]{0,4096}$")


def _shown(value: str) -> str:
    return repr(value[:80])


def package(entry: str, where: str = "--packages", *, group: bool = True) -> str:
    """One PACKAGES entry: an OpenWrt package name, or ``-name`` to remove one, or (with
    ``group``) ``@group``."""
    prefixes = ("-", "@") if group else ("-",)
    bare = entry[1:] if isinstance(entry, str) and entry.startswith(prefixes) else entry
    if not isinstance(entry, str) or not PACKAGE.match(str(bare)):
        raise WolfError(
            f"{where} {_shown(str(entry))}: not an OpenWrt package name",
            hint="letters, digits, '.', '_', '+', '-'; a leading '-' removes a default package"
            + ("; '@group' names a package group" if group else ""),
        )
    return entry


def packages(value: str | Iterable[str] | None, where: str = "--packages") -> tuple[str, ...]:
    """``--packages a,-b,c`` (or a list of entries) as checked entries, empty ones dropped."""
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else list(value)
    out = tuple(package(p.strip() if isinstance(p, str) else p, where) for p in items
                if not isinstance(p, str) or p.strip())  # fmt: skip
    if len(out) > MAX_PACKAGES:
        raise WolfError(f"{where}: {len(out)} packages, more than {MAX_PACKAGES}")
    return out


def feed(method: str, name: str, url: str, where: str = "--feed") -> tuple[str, str, str]:
    """One feeds.conf line's parts, each as scripts/feeds reads it."""
    if not FEED_METHOD.match(method) or not FEED_NAME.match(name):
        raise WolfError(f"{where}: {_shown(f'{method} {name}')} is not a feeds.conf method/name")
    if not FEED_URL.match(url):
        raise WolfError(
            f"{where} {_shown(url)}: not one feeds.conf token",
            hint="a path or URL without spaces, quotes, '#' or control characters",
        )
    return method, name, url


def make_variable(arg: str) -> str:
    """A ``NAME=value`` argument for make: PACKAGES holds package entries, every other value
    is a plain word or path (make would expand ``$(shell ...)`` in it)."""
    name, sep, value = arg.partition("=")
    if not sep or not re.fullmatch(r"[A-Z][A-Z0-9_]*", name):
        raise WolfError(f"make argument {_shown(arg)}: not NAME=value")
    if name == "PACKAGES":
        for entry in value.split(" "):
            if entry:
                package(entry, "PACKAGES=", group=False)
    elif not MAKE_WORD.match(value):
        raise WolfError(
            f"{name}={_shown(value)}: not a plain path or word for make",
            hint="make expands $ and splits at spaces; use a path of letters, digits, ./_-",
        )
    return arg

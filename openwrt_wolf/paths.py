"""Where things live on disk: results store, download cache, logs. Environment overrides first.

A directory named by the environment is checked where it is taken: ``~nosuchuser/x``, a
relative or empty $HOME, a cache that is a file, a FIFO, /dev/full or a folder we may not
write are one error line each (docs/threat-model.md "Environment"), never a traceback from
the first mkdir deep inside a task."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .errors import WolfError
from .files.outputs import Owned

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = Path(__file__).resolve().parent / "data"


def expand(value: str | os.PathLike[str], where: str) -> Path:
    """A path from an option or a variable with ``~`` and ``~user`` expanded; ``where`` names
    it in the error (``--tree``, ``$OPENWRT_WOLF_STORE``)."""
    text = os.fspath(value)
    if text.startswith("~") and text[1:2] in ("", "/"):
        return home() / text[2:]
    try:
        return Path(text).expanduser()
    except RuntimeError:  # ~nosuchuser: pathlib knows no such user
        user = text[1:].split("/", 1)[0]
        raise WolfError(f"{where} {text[:80]!r}: there is no user {user[:40]!r}") from None


def home() -> Path:
    """$HOME as an absolute path (an empty or relative one would put ~/.cache under the
    current directory), else the password database's."""
    env = os.environ.get("HOME")
    if env is None:
        return Path.home()
    if not os.path.isabs(env):
        raise WolfError(f"$HOME {env[:80]!r} is not an absolute path", hint="export HOME=/root")
    return Path(env)


def store_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """Results store: --store, else $OPENWRT_WOLF_STORE, else ./results of the project."""
    if override:
        return expand(override, "--store")
    env = os.environ.get("OPENWRT_WOLF_STORE")
    return expand(env, "$OPENWRT_WOLF_STORE") if env else PROJECT_ROOT / "results"


def check_store(override: str | os.PathLike[str] | None = None) -> None:
    """Before a task that files records does its work: the store is a directory we may write
    (or can be made), so a build of an hour does not end in a store it cannot write."""
    where = "--store" if override else "$OPENWRT_WOLF_STORE"
    writable_dir(store_dir(override), f"results store ({where})", make=False)


def cache_dir() -> Path:
    """Downloads and builds reused across runs: $OPENWRT_WOLF_CACHE or ~/.cache/openwrt-wolf,
    made when missing; one error line when it cannot be a directory we write."""
    env = os.environ.get("OPENWRT_WOLF_CACHE")
    if env:
        return writable_dir(expand(env, "$OPENWRT_WOLF_CACHE").absolute(), "$OPENWRT_WOLF_CACHE")
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):  # a relative one is to be ignored (XDG Base Directory)
        return writable_dir(Path(xdg) / "openwrt-wolf", "cache ($XDG_CACHE_HOME)")
    return writable_dir(home() / ".cache" / "openwrt-wolf", "cache (~/.cache)")


def writable_dir(path: Path, what: str, *, make: bool = True) -> Path:
    """``path`` as a directory we may write into (a link to one is one): made when missing
    (with ``make``; else its nearest existing parent must be writable), else one line."""
    hint = "name a directory you may write" + (
        "" if what.startswith("$") or "--" in what else " with $OPENWRT_WOLF_CACHE"
    )
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):  # mkdir would say only "File exists"
            raise WolfError(f"{what} {path} is a link to a missing folder", hint=hint) from None
        st = None
    except OSError as e:  # a link loop, a file where a parent folder belongs
        raise WolfError(f"{what} {path}: {e.strerror}", hint=hint) from None
    if st is not None and not stat.S_ISDIR(st.st_mode):
        from .trust.untrusted import kind_of

        raise WolfError(f"{what} {path} is {kind_of(st.st_mode)}, not a directory", hint=hint)
    if st is None and make:
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise WolfError(f"{what} {path} cannot be made: {e.strerror}", hint=hint) from None
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise WolfError(f"{what} {path}: {probe} is not a directory", hint=hint)
    if not os.access(probe, os.W_OK | os.X_OK):
        raise WolfError(f"{what} {path}: {probe} is not writable (permission denied)", hint=hint)
    return path


CACHE = "the cache"  # Owned's name for it: "links inside the cache are not followed"


def in_cache(path: Path | str, outside: str = "") -> tuple[Owned, str]:
    """A file of ours below the cache (a memo, a measurement, a kept record, a stamp) as the
    cache (``Owned`` with the cache's root as its top: the user's choice, a link there
    followed) and its path inside: below the root no folder that is a link is followed and
    a link at the file's name is replaced. A path outside the cache (a folder a test or a
    caller named, a tree's dl/) is owned from its own folder down (``outside`` its name)."""
    path = Path(path)
    top = cache_dir()
    try:
        return Owned(top, CACHE), str(path.relative_to(top))
    except ValueError:
        return Owned(path.parent, outside or f"the folder of {path.name}"), path.name


def cache_write_text(path: Path | str, text: str) -> Path:
    """``text`` into the file ``path`` below the cache, atomically, by ``in_cache``'s rule."""
    owned, rel = in_cache(path)
    return owned.write_text(rel, text)


def cache_copy_file(src: Path, path: Path | str) -> Path:
    """``src``'s bytes into the file ``path`` below the cache, by ``in_cache``'s rule."""
    owned, rel = in_cache(path)
    return owned.copy_file(src, rel)

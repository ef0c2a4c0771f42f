"""Writing a file: every --output (size-report, history, what-if) and every record, stamp and
list we keep, through one writer; and every finished file or tree a task built under a work
name (downloads, unpacked trees, compiled programs) put in place by one rename, ``publish``.

- A regular file, or a new path, is replaced atomically: a temporary file in the same
  directory (O_TMPFILE: it has no name while it is written, so a SIGKILL leaves nothing;
  mkstemp where the file system has none), fsync'd, linked at a random name and renamed
  over it. Readers see the old
  file or the new one; a link planted at a guessable temporary name leads nowhere. The file
  keeps the mode of the one it replaces; a new one gets 0666 less the umask.
- A symlink is written through: the file it names is written, the link stays.
- A character device (/dev/null, a terminal) or a FIFO (``--output >(gzip >x)``) is written
  into, as a shell's ``>`` would, and never replaced. A FIFO that no process reads is an error
  line, not a hang. A block device, a socket or a directory is refused.
- An existing file the run reads (``inputs``: the image, its output directory, the store) is
  refused: what a task reads is not what it overwrites.
- Nothing is published after a termination signal (signals.check): the temporary file is
  removed and the task ends with the signal.
- Inside a directory we own or read (``Owned``: the results store, a download directory, an
  OpenWrt tree's bookkeeping, its dl/ and the files we edit in it) no link is followed: the
  directories on the way are opened with O_NOFOLLOW from the top down, a link there is one
  line; a link at the file's own name is replaced, removed itself or refused, never written
  through (the rule above for a symlink is --output's alone).
WriteError (one line) when it cannot be written."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import shutil
import stat
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO

from .. import signals
from ..errors import WolfError
from ..trust import untrusted

Fill = Callable[[IO[bytes]], None]


class WriteError(WolfError):
    """A file could not be written (disk full, read-only, no permission, a special file)."""


def _umask() -> int:
    # /proc says it without changing it (os.umask can only be read by setting it)
    with contextlib.suppress(OSError, ValueError, StopIteration):
        status = Path("/proc/self/status").read_text().splitlines()
        return int(next(ln for ln in status if ln.startswith("Umask:")).split()[1], 8)
    old = os.umask(0o022)
    os.umask(old)
    return old


def _refused(mode: int) -> str | None:
    for test, what in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return what
    return None


def _an_input(real: Path, inputs: Sequence[Path | str]) -> Path | None:
    """The input (a file, or a directory of input files) that the existing ``real`` is, also
    under another name (a hard link)."""
    st = os.stat(real)
    for given in inputs:
        where = Path(os.path.realpath(given))
        if real == where or real.is_relative_to(where):
            return Path(given)
        with contextlib.suppress(OSError):
            if os.path.samefile(real, where):
                return Path(given)
            if st.st_nlink > 1 and where.is_dir() and _holds(where, st):
                return Path(given)
    return None


def _holds(top: Path, st: os.stat_result) -> bool:
    """Is the file ``st`` is of (dev, inode) in the tree under top?"""
    for dirpath, _dirs, files in os.walk(top):
        for name in files:
            with contextlib.suppress(OSError):
                other = os.lstat(os.path.join(dirpath, name))
                if (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
                    return True
    return False


def check(
    path: Path | str,
    *,
    option: str = "--output",
    inputs: Sequence[Path | str] = (),
    new_dirs: bool = False,
) -> Path:
    """Before any work is done: WriteError unless ``path`` can be written by write().
    ``new_dirs``: a missing directory will be made (else it is an error)."""
    path = Path(path)
    real = Path(os.path.realpath(path))
    try:
        st: os.stat_result | None = os.stat(real)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise WriteError(f"{option} {path}: {e.strerror}") from None
    if st is None:
        if not new_dirs and not real.parent.is_dir():
            raise WriteError(
                f"{option} {path}: directory {real.parent} does not exist",
                hint="name a file in an existing directory",
            )
        return path
    what = _refused(st.st_mode)
    if what:
        example = f", e.g. {path / 'report.md'}" if stat.S_ISDIR(st.st_mode) else ""
        raise WriteError(f"{option} {path} is {what}", hint=f"give a file name{example}")
    given = _an_input(real, inputs) if stat.S_ISREG(st.st_mode) else None
    if given is not None:
        what = "" if Path(os.path.realpath(given)) == real else f" (in {given})"
        raise WriteError(
            f"{option} {path} is a file this run reads{what}; it is not overwritten",
            hint="write the output somewhere else",
        )
    return path


def write(path: Path | str, fill: Fill, *, inputs: Sequence[Path | str] = ()) -> None:
    """Write what ``fill`` writes into the file object it is given, by the rules above."""
    path = Path(path)
    check(path, option="file", inputs=inputs, new_dirs=True)
    real = Path(os.path.realpath(path))
    try:
        st = os.stat(real)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    else:
        if stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode):
            _write_into(real, path, fill)
            return
        mode = stat.S_IMODE(st.st_mode)
    _replace(real, mode, fill)


def replace_bytes(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """``path`` itself replaced by a new file holding ``data``, whatever is there: a link is
    replaced, never written through, a special file refused by the rename's own rules. For a
    file inside a tree we do not own (an ImageBuilder's `repositories`, a patched file), where
    a link may lead out of it. ``mode``: the new file's (default 0666 less the umask)."""

    def fill(out: IO[bytes]) -> None:
        out.write(data)

    _replace(path, 0o666 & ~_umask() if mode is None else mode, fill)


def replace_link(path: Path, target: str) -> None:
    """``path`` itself replaced by a symbolic link to ``target`` (one a patch creates in a
    tree): made under a random name beside it and renamed over whatever is there, so nothing
    is followed, and the target is never read."""

    def make(fd: int, name: str, made: list[str]) -> None:
        while not made:
            tmp = _tmp_name(name)
            with contextlib.suppress(FileExistsError):  # taken: draw another name
                os.symlink(target, tmp, dir_fd=fd)
                made.append(tmp)

    _renamed_over(path, make)


def publish(made: Path | str, path: Path | str) -> None:
    """A finished file or directory ``made`` (built under a temporary name beside ``path``, on
    the same file system: a download's .part, a tree unpacked or compiled into a work name)
    renamed over ``path`` in one step: readers see the old one or the new one, never half.
    Nothing is published after a termination signal: the caller's cleanup removes ``made``.
    A directory replaces only a missing path or an empty directory (rename(2)'s rule); errors
    are the OSError the caller already handles (ENOSPC, ENOTEMPTY, EXDEV)."""
    signals.check()
    os.replace(made, path)


@contextlib.contextmanager
def work(made: Path) -> Iterator[Path]:
    """The work name a finished file or tree is built under before ``publish``: removed when
    the block ends in any exception, a termination signal or Ctrl-C included (a cleanup for
    OSError alone left ``.copying``/``.partial`` names behind), untouched once published."""
    try:
        yield made
    except BaseException:
        if made.is_dir() and not made.is_symlink():
            shutil.rmtree(made, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                made.unlink()
        raise


def write_text(path: Path | str, text: str, *, inputs: Sequence[Path | str] = ()) -> None:
    def fill(out: IO[bytes]) -> None:
        out.write(text.encode("utf-8"))

    write(path, fill, inputs=inputs)


def copy_file(src: Path, path: Path | str, *, inputs: Sequence[Path | str] = ()) -> None:
    """src's bytes into path (streamed)."""

    def fill(out: IO[bytes]) -> None:
        with src.open("rb") as fh:
            shutil.copyfileobj(fh, out, 1 << 20)

    write(path, fill, inputs=inputs)


def _failed(path: Path, e: BaseException) -> WriteError | None:
    if isinstance(e, IsADirectoryError):
        return WriteError(f"cannot write {path}: it is a directory")
    if isinstance(e, OSError):
        what = "disk full" if e.errno == errno.ENOSPC else (e.strerror or str(e))
        return WriteError(f"cannot write {path}: {what}")
    return None


Make = Callable[[int, str, list[str]], None]  # (its directory's fd, its name, names made)


def _tmp_name(name: str) -> str:
    return f".{name}.{os.urandom(6).hex()}.tmp"


def _replace(real: Path, mode: int, fill: Fill, dirfd: int | None = None) -> None:
    def make(fd: int, name: str, made: list[str]) -> None:
        try:
            # a file with no name until it is whole: SIGKILL (or a power cut) while it is
            # written leaves nothing beside the old file (a mkstemp name stayed there)
            out = os.open(".", os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o600, dir_fd=fd)
            tmp = None
        except OSError as e:
            if e.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                raise
            out, tmp = _mkstemp_at(fd, name)
            made.append(tmp)
        with os.fdopen(out, "wb") as fh:  # O_RDWR: _named may read it back
            fill(fh)
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
            signals.check()  # interrupted while writing: publish nothing
            if tmp is None:
                made.append(_named(fh.fileno(), fd, name))

    _renamed_over(real, make, dirfd)


def _renamed_over(real: Path, make: Make, dirfd: int | None = None) -> None:
    """A new entry that ``make`` creates in real's directory (its name put in the list),
    renamed over real; removed instead when anything fails or a termination signal came
    meanwhile. ``dirfd``: that directory, opened by the caller (Owned: nothing followed on the
    way); None: real's parent, made when missing."""
    made: list[str] = []
    fd = dirfd
    try:
        if fd is None:
            real.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(real.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        make(fd, real.name, made)
        signals.check()  # interrupted while writing: publish nothing
        os.replace(made[0], real.name, src_dir_fd=fd, dst_dir_fd=fd)
    except BaseException as e:
        for tmp in made:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=fd)
        err = _failed(real, e)
        if err is not None:
            raise err from None
        raise
    finally:
        if dirfd is None and fd is not None:
            os.close(fd)


def _mkstemp_at(fd: int, name: str) -> tuple[int, str]:
    """A new file at a random name in the directory ``fd`` (mkstemp's O_EXCL, 0600)."""
    while True:
        tmp = _tmp_name(name)
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        with contextlib.suppress(FileExistsError):  # taken: draw another name
            return os.open(tmp, flags, 0o600, dir_fd=fd), tmp


_AT_EMPTY_PATH = 0x1000
_libc = ctypes.CDLL(None, use_errno=True)


def _named(out: int, fd: int, name: str) -> str:
    """The whole O_TMPFILE file ``out`` given a random name in the directory ``fd`` (the
    rename's source): linkat(out, "", AT_EMPTY_PATH), else through /proc/self/fd, else
    (neither allowed here) its bytes copied into a new file."""
    while True:
        tmp = _tmp_name(name)
        if _libc.linkat(out, b"", fd, os.fsencode(tmp), _AT_EMPTY_PATH) == 0:
            return tmp
        if ctypes.get_errno() == errno.EEXIST:  # taken: draw another name
            continue
        try:
            os.link(f"/proc/self/fd/{out}", tmp, dst_dir_fd=fd, follow_symlinks=True)
            return tmp
        except FileExistsError:
            continue
        except OSError:
            break
    copy, tmp = _mkstemp_at(fd, name)
    try:
        offset = 0
        while chunk := os.pread(out, 1 << 20, offset):
            os.write(copy, chunk)
            offset += len(chunk)
        os.fchmod(copy, os.fstat(out).st_mode & 0o7777)
        os.fsync(copy)
    except BaseException:
        os.unlink(tmp, dir_fd=fd)
        raise
    finally:
        os.close(copy)
    return tmp


def _write_into(real: Path, shown: Path, fill: Fill) -> None:
    """Into a character device or a FIFO, without creating, truncating or replacing it."""
    try:
        # O_NONBLOCK: a FIFO with no reader is ENXIO at once instead of a wait forever
        fd = os.open(real, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as e:
        if e.errno == errno.ENXIO:
            raise WriteError(
                f"cannot write {shown}: it is a FIFO that no process reads",
                hint="start its reader first, or name a file",
            ) from None
        raise _failed(shown, e) or e from None
    try:
        kind = os.fstat(fd).st_mode
        if not (stat.S_ISCHR(kind) or stat.S_ISFIFO(kind)):
            raise WriteError(f"cannot write {shown}: it changed while being opened")
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        with os.fdopen(fd, "wb", closefd=False) as fh:
            fill(fh)
    except OSError as e:
        raise _failed(shown, e) or e from None
    finally:
        os.close(fd)


# --- directories we own: nothing followed below their top ---------------------------------


class LinkRefused(WriteError):
    """A symbolic link inside a directory the project owns (``Owned``): never followed."""


_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


class Owned:
    """A directory the project owns or reads — the results store, a download directory of the
    cache or of a tree (dl/), an OpenWrt tree's bookkeeping and the files we edit in it — where
    only someone else makes a symbolic link. Its top is the directory as given (a link there is
    the user's choice, followed as for --output); below it nothing is followed: each directory
    on the way is opened from the one before with O_NOFOLLOW, and a link there is one line
    (``<path> is a symbolic link; links inside <what> are not followed``). At the file's own
    name a link is replaced (``write``, ``move``: a new entry renamed over it), removed itself
    (``unlink``) or refused (``open_part``, ``regular``, ``no_link``), never written through.
    ``rel``: a relative path below the top, without ``..``."""

    def __init__(self, top: Path | str, what: str) -> None:
        self.top = Path(top)
        self.what = what

    def path(self, rel: str | Path) -> Path:
        return self.top.joinpath(*self._parts(rel))

    def _parts(self, rel: str | Path) -> list[str]:
        text = str(rel)
        parts = text.split("/")
        if text.startswith("/") or "\0" in text or any(p in ("", ".", "..") for p in parts):
            raise WriteError(f"{text[:200]!r} is not a path inside {self.top}")
        return parts

    def _refused(self, fd: int, parts: Sequence[str]) -> WriteError:
        shown = self.top.joinpath(*parts)
        try:
            mode = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False).st_mode
        except OSError:
            return WriteError(f"{shown} is not a directory")
        if stat.S_ISLNK(mode):
            return LinkRefused(
                f"{shown} is a symbolic link; links inside {self.what} are not followed",
                hint="remove the link: nothing of ours makes one there",
            )
        return WriteError(f"{shown} is {untrusted.kind_of(mode)}, not a directory")

    @contextlib.contextmanager
    def _dir(self, parts: Sequence[str], *, make: bool) -> Iterator[int]:
        """The directory top/parts opened, no link followed below the top (made when
        ``make``); FileNotFoundError when it is missing and not made."""
        try:
            if make:
                self.top.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.top, _DIR)
        except FileNotFoundError:
            raise
        except OSError as e:
            raise WriteError(f"{self.what} {self.top}: {untrusted.os_reason(e)}") from None
        try:
            for i in range(len(parts)):
                step = self._step(fd, parts[: i + 1], make)
                os.close(fd)
                fd = step
            yield fd
        finally:
            os.close(fd)

    def _step(self, fd: int, parts: Sequence[str], make: bool) -> int:
        """The next directory on the way, opened from ``fd`` without following a link."""
        name = parts[-1]
        try:
            try:
                return os.open(name, _DIR | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                if not make:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o777, dir_fd=fd)
                return os.open(name, _DIR | os.O_NOFOLLOW, dir_fd=fd)
        except FileNotFoundError:
            if not make:
                raise
            raise WriteError(f"{self.top.joinpath(*parts)} vanished while being made") from None
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENOTDIR):
                raise self._refused(fd, parts) from None
            shown = self.top.joinpath(*parts)
            raise WriteError(f"{shown}: {untrusted.os_reason(e)}") from None

    def folder_of(self, rel: str | Path) -> None:
        """The folder top/rel is in made, no link followed on the way (one line for a link):
        before anything opens a path there by name (a lock file, a cached file's check)."""
        with self._dir(self._parts(rel)[:-1], make=True):
            pass

    def stat(self, rel: str | Path) -> os.stat_result | None:
        """lstat of top/rel (None: it, or a directory on its way, is missing); a link on the
        way is refused, one at rel itself is returned as the link it is."""
        parts = self._parts(rel)
        try:
            with self._dir(parts[:-1], make=False) as fd:
                return os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise WriteError(f"{self.path(rel)}: {untrusted.os_reason(e)}") from None

    def no_link(self, rel: str | Path) -> os.stat_result | None:
        """``stat``, and a link at rel itself refused too (a file we read there)."""
        st = self.stat(rel)
        if st is not None and stat.S_ISLNK(st.st_mode):
            parts = self._parts(rel)
            with self._dir(parts[:-1], make=False) as fd:
                raise self._refused(fd, parts)
        return st

    def regular(self, rel: str | Path) -> os.stat_result:
        """top/rel as a regular file, no link on the way or at its name; one line else."""
        st = self.no_link(rel)
        if st is None:
            raise WriteError(f"{self.path(rel)} does not exist")
        if not stat.S_ISREG(st.st_mode):
            raise WriteError(f"{self.path(rel)} is {untrusted.kind_of(st.st_mode)}, not a file")
        return st

    def write(self, rel: str | Path, fill: Fill, *, mode: int | None = None) -> Path:
        """A new file at top/rel (directories on the way made), renamed over whatever is
        there: a link is replaced, never written through. ``mode``: default the replaced
        regular file's, else 0666 less the umask."""
        parts = self._parts(rel)
        shown = self.top.joinpath(*parts)
        with self._dir(parts[:-1], make=True) as fd:
            if mode is None:
                try:
                    st = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
                    mode = stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else None
                except FileNotFoundError:
                    pass
            _replace(shown, 0o666 & ~_umask() if mode is None else mode, fill, fd)
        return shown

    def write_text(self, rel: str | Path, text: str) -> Path:
        def fill(out: IO[bytes]) -> None:
            out.write(text.encode("utf-8"))

        return self.write(rel, fill)

    def copy_file(self, src: Path, rel: str | Path) -> Path:
        """src's bytes (a file of ours or the user's, read as it is named) into top/rel."""

        def fill(out: IO[bytes]) -> None:
            with src.open("rb") as fh:
                shutil.copyfileobj(fh, out, 1 << 20)

        return self.write(rel, fill)

    def copy(self, src: str | Path, rel: str | Path) -> Path:
        """top/src (a regular file, nothing followed) copied to top/rel with its mode and
        mtime (shutil.copy2's), written as ``write`` writes."""
        st = self.regular(src)
        parts = self._parts(src)

        def fill(out: IO[bytes]) -> None:
            with self._dir(parts[:-1], make=False) as fd:
                flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
                with os.fdopen(os.open(parts[-1], flags, dir_fd=fd), "rb") as fh:
                    if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                        raise WriteError(f"{self.path(src)} changed while being copied")
                    shutil.copyfileobj(fh, out, 1 << 20)
            out.flush()
            os.utime(out.fileno(), ns=(st.st_atime_ns, st.st_mtime_ns))

        return self.write(rel, fill, mode=stat.S_IMODE(st.st_mode))

    def move(self, src: str | Path, rel: str | Path) -> None:
        """top/src renamed to top/rel (directories on the way made): whatever is at rel, a
        link too, is replaced; across file systems copied (``copy``) and src removed."""
        sp, dp = self._parts(src), self._parts(rel)
        with self._dir(sp[:-1], make=False) as sfd, self._dir(dp[:-1], make=True) as dfd:
            try:
                signals.check()
                os.replace(sp[-1], dp[-1], src_dir_fd=sfd, dst_dir_fd=dfd)
                return
            except OSError as e:
                if e.errno != errno.EXDEV:
                    raise _failed(self.path(rel), e) or e from None
        self.copy(src, rel)
        self.unlink(src)

    def take(self, src: Path, rel: str | Path) -> Path:
        """A finished work file of ours (``src``, anywhere) put at top/rel: renamed over
        whatever is there (a link too), across file systems copied by ``write``."""
        parts = self._parts(rel)
        with self._dir(parts[:-1], make=True) as fd:
            try:
                signals.check()
                os.replace(src, parts[-1], dst_dir_fd=fd)
                return self.top.joinpath(*parts)
            except OSError as e:
                if e.errno != errno.EXDEV:
                    raise _failed(self.path(rel), e) or e from None
        self.copy_file(src, rel)
        src.unlink()
        return self.top.joinpath(*parts)

    def link(self, src: str | Path, rel: str | Path) -> bool:
        """A hard link top/rel to the entry top/src (never what a link there names);
        False where the file system makes none (the caller copies)."""
        sp, dp = self._parts(src), self._parts(rel)
        with self._dir(sp[:-1], make=False) as sfd, self._dir(dp[:-1], make=True) as dfd:
            try:
                os.link(sp[-1], dp[-1], src_dir_fd=sfd, dst_dir_fd=dfd, follow_symlinks=False)
            except OSError:
                return False
        return True

    def unlink(self, rel: str | Path, *, missing_ok: bool = True) -> None:
        """The entry top/rel removed itself (a link, not what it names)."""
        parts = self._parts(rel)
        try:
            with self._dir(parts[:-1], make=False) as fd:
                os.unlink(parts[-1], dir_fd=fd)
        except FileNotFoundError:
            if not missing_ok:
                raise WriteError(f"{self.path(rel)} does not exist") from None
        except OSError as e:
            raise WriteError(f"cannot remove {self.path(rel)}: {untrusted.os_reason(e)}") from None

    def open_part(self, rel: str | Path, *, append: bool = False) -> IO[bytes]:
        """A work file (a download's .part) opened for writing, emptied first unless
        ``append`` (a resumed download): never through a link (O_NOFOLLOW: one line), and only
        a regular file (a FIFO or a device at its name is refused, not written into)."""
        parts = self._parts(rel)
        shown = self.top.joinpath(*parts)
        with self._dir(parts[:-1], make=True) as fd:
            flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            flags |= os.O_APPEND if append else 0
            try:
                st = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            if st is not None and stat.S_ISLNK(st.st_mode):
                raise self._refused(fd, parts)
            if st is not None and not stat.S_ISREG(st.st_mode):
                raise WriteError(f"{shown} is {untrusted.kind_of(st.st_mode)}, not a file")
            try:
                out = os.open(parts[-1], flags, 0o666, dir_fd=fd)
            except OSError as e:
                if e.errno == errno.ELOOP:  # made a link since the stat
                    raise self._refused(fd, parts) from None
                raise
        if not stat.S_ISREG(os.fstat(out).st_mode):
            os.close(out)
            raise WriteError(f"{shown} changed while being opened")
        if not append:
            os.ftruncate(out, 0)
        fcntl.fcntl(out, fcntl.F_SETFL, fcntl.fcntl(out, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(out, "ab" if append else "wb")

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
WriteError (one line) when it cannot be written."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO

from .. import signals
from ..errors import WolfError

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

    def make(real: Path, made: list[str]) -> None:
        while not made:
            name = str(real.parent / f".{real.name}.{os.urandom(6).hex()}.tmp")
            with contextlib.suppress(FileExistsError):  # taken: draw another name
                os.symlink(target, name)
                made.append(name)

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


def _replace(real: Path, mode: int, fill: Fill) -> None:
    def make(real: Path, made: list[str]) -> None:
        try:
            # a file with no name until it is whole: SIGKILL (or a power cut) while it is
            # written leaves nothing beside the old file (a mkstemp name stayed there)
            fd = os.open(real.parent, os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o600)
            tmp = None
        except OSError as e:
            if e.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                raise
            fd, tmp = tempfile.mkstemp(prefix=f".{real.name}.", suffix=".tmp", dir=real.parent)
            made.append(tmp)
        with os.fdopen(fd, "wb") as fh:  # O_RDWR: _named may read it back
            fill(fh)
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
            signals.check()  # interrupted while writing: publish nothing
            if tmp is None:
                made.append(_named(fh.fileno(), real))

    _renamed_over(real, make)


def _renamed_over(real: Path, make: Callable[[Path, list[str]], None]) -> None:
    """A new entry that ``make`` creates beside real (its name put in the list), renamed over
    real; removed instead when anything fails or a termination signal came meanwhile."""
    made: list[str] = []
    try:
        real.parent.mkdir(parents=True, exist_ok=True)
        make(real, made)
        signals.check()  # interrupted while writing: publish nothing
        os.replace(made[0], real)
    except BaseException as e:
        for tmp in made:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        err = _failed(real, e)
        if err is not None:
            raise err from None
        raise


_AT_FDCWD, _AT_EMPTY_PATH = -100, 0x1000
_libc = ctypes.CDLL(None, use_errno=True)


def _named(fd: int, real: Path) -> str:
    """The whole O_TMPFILE file given a random name beside ``real`` (the rename's source):
    linkat(fd, "", AT_EMPTY_PATH), else through /proc/self/fd, else (neither allowed here)
    its bytes copied into a mkstemp file."""
    while True:
        name = str(real.parent / f".{real.name}.{os.urandom(6).hex()}.tmp")
        if _libc.linkat(fd, b"", _AT_FDCWD, os.fsencode(name), _AT_EMPTY_PATH) == 0:
            return name
        if ctypes.get_errno() == errno.EEXIST:  # taken: draw another name
            continue
        try:
            os.link(f"/proc/self/fd/{fd}", name, follow_symlinks=True)
            return name
        except FileExistsError:
            continue
        except OSError:
            break
    out, name = tempfile.mkstemp(prefix=f".{real.name}.", suffix=".tmp", dir=real.parent)
    try:
        offset = 0
        while chunk := os.pread(fd, 1 << 20, offset):
            os.write(out, chunk)
            offset += len(chunk)
        os.fchmod(out, os.fstat(fd).st_mode & 0o7777)
        os.fsync(out)
    except BaseException:
        os.unlink(name)
        raise
    finally:
        os.close(out)
    return name


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

"""Glue for tasks.py: logging set-up and turning WolfError into one line + exit code."""

from __future__ import annotations

import functools
import logging
import math
import os
import re
import signal
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from . import paths, signals
from .errors import CommandError, WolfError

F = TypeVar("F", bound=Callable[..., Any])


def setup_logging(verbose: bool = False) -> None:
    """Commands we run are logged as '$ <line that reproduces it>' on stderr, every line
    through term.clean (no secret, no control character)."""
    from .term import LogFormatter

    level = logging.DEBUG if verbose else logging.INFO
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LogFormatter("%(message)s"))
    logging.basicConfig(level=level, handlers=[handler], force=True)
    logging.captureWarnings(True)  # a library's warning quotes names too: cleaned the same way


def _error(*lines: str) -> None:
    """Error lines on stderr, each cleaned like every other line (term.clean): a newline in
    a name stays inside its line."""
    from .term import clean

    print("\n".join(_cut(clean(line, newlines=False)) for line in lines), file=sys.stderr)


LONGEST_LINE = 1000


def _cut(line: str) -> str:
    """An error line that names a value of 100,000 characters (or 10,000 unknown devices)
    is no clearer for holding all of them."""
    return (
        line
        if len(line) <= LONGEST_LINE
        else f"{line[: LONGEST_LINE - 30]}… ({len(line):,} characters)"
    )


def _no_empty_values(kwargs: dict[str, Any]) -> None:
    """An option given an empty or blank value (`--library ''`) is refused: taken as not
    given, it ran the defaults (every library, every case) instead of what was meant."""
    for name, value in kwargs.items():
        items = value if isinstance(value, list) else [value]
        if any(isinstance(v, str) and not v.strip() for v in items):
            option = f"-{name}" if len(name) == 1 else f"--{name.rstrip('_').replace('_', '-')}"
            raise WolfError(f"{option} {value!r}: an empty value",
                            hint="leave the option out for its default")  # fmt: skip


def guarded(fn: F) -> F:
    """Wrap a task body: WolfError -> 'error: ...' on stderr and exit 2; Ctrl-C, SIGTERM or
    SIGHUP -> cleaned up as KeyboardInterrupt, exit 128 + the signal (130, 143, 129)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        setup_logging()
        signals.reset()
        try:
            with signals.as_interrupt():
                from .term import check_environment

                check_environment()  # $COLUMNS, ...: one error line before any work
                _no_empty_values(kwargs)
                result = fn(*args, **kwargs)
            signals.check()  # a signal whose KeyboardInterrupt Python dropped in a finalizer
            return result
        except CommandError as e:
            _error(f"error: {e.message}", *e.details().split("\n")[1:])
            raise SystemExit(e.exit_code) from None
        except WolfError as e:
            _error(f"error: {e}", *([e.note] if e.note else []))
            raise SystemExit(e.exit_code) from None
        except KeyboardInterrupt:
            sig = signals.received() or signal.SIGINT
            _error(f"error: interrupted{signals.describe(sig)}")
            raise SystemExit(128 + sig) from None

    return wrapper  # type: ignore[return-value]


# invoke converts an option to int/float from its default's type *before* a task body runs,
# so `-j abc` became a ValueError traceback. Tasks take such options as strings (default
# None) and convert them here, inside `guarded`, into one error line.


def _example(option: str, default: object) -> str:
    """The hint of a bad value: ``e.g. -j 1``, ``e.g. $COLUMNS=200`` for a variable."""
    return f"e.g. {option}={default}" if option.startswith("$") else f"e.g. {option} {default}"


def integer(
    value: object,
    option: str,
    *,
    default: int,
    minimum: int | None = None,
    maximum: int | None = None,
) -> int:
    """An integer option value (``default`` when not given), within its bounds."""
    if value is None or value == "":
        return default
    text = str(value).strip()
    try:
        # no option counts that high (int() of 5,000 digits raises); ASCII digits only (int()
        # takes any script's, and "5_0")
        if len(text) > 30 or not re.fullmatch(r"[+-]?[0-9]+", text):
            raise ValueError
        n = int(text)
    except ValueError:
        raise WolfError(
            f"{option} {text[:30]!r} is not a whole number", hint=_example(option, default)
        ) from None
    if minimum is not None and n < minimum:
        raise WolfError(f"{option} {n}: must be at least {minimum}")
    if maximum is not None and n > maximum:
        raise WolfError(f"{option} {n}: must be at most {maximum}")
    return n


def tcp_port(value: object, default: int) -> int:
    """--port: 1 to 65535 (65536 was tried, and reported as a refused connection)."""
    return integer(value, "--port", default=default, minimum=1, maximum=65535)


def number(
    value: object,
    option: str,
    *,
    default: float,
    minimum: float = 0.0,
    maximum: float = 10 * 365 * 86400.0,
) -> float:
    """A finite number option value (nan and inf are no durations), within its bounds: the
    default maximum, ten years of seconds, keeps 1e300 out of sleep() (an OverflowError)."""
    if value is None or value == "":
        return default
    text = str(value).strip()
    try:
        if len(text) > 30 or not text.isascii() or "_" in text:
            raise ValueError
        x = float(text)
    except ValueError:
        raise WolfError(
            f"{option} {text[:30]!r} is not a number", hint=_example(option, f"{default:g}")
        ) from None
    if not math.isfinite(x):
        raise WolfError(
            f"{option} {text!r} is not a finite number", hint=_example(option, f"{default:g}")
        )
    if x < minimum:
        raise WolfError(f"{option} {x:g}: must be at least {minimum:g}")
    if x > maximum:
        raise WolfError(f"{option} {x:g}: must be at most {maximum:g}")
    return x


def path(value: str | None, option: str) -> str | None:
    """A path option (or a URL|DIR one) as the modules take it: ``~`` and ``~user``
    expanded, within the kernel's lengths (a longer one was an OSError traceback from the
    first exists()). ``~nosuchuser/x`` is one error line here, before any work."""
    if value is None or value == "":
        return value
    text = str(value)
    raw = os.fsencode(text)
    if len(raw) >= 4096 or any(len(part) > 255 for part in raw.split(b"/")):
        raise WolfError(f"{option} {text[:40]!r}...: longer than a path may be (4,095 bytes, "
                        "255 a name)")  # fmt: skip
    if re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", text):  # a URL: --mirror, --artifacts
        from .trust import secrets

        secrets.one_token(text, option)
    return str(paths.expand(text, option)) if text.startswith("~") else text  # URLs as given


def path_list(value: str | None, option: str) -> str | None:
    """A comma-separated list of paths, each as ``path`` takes it."""
    if value is None or value == "":
        return value
    return ",".join(path(p, option) or "" for p in str(value).split(","))


def comma_list(value: str | None) -> list[str]:
    """A comma list option's values, blanks dropped."""
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def required(value: str | None, option: str, *, hint: str) -> str:
    """A value the task cannot do without. Not invoke-required: then `invoke TASK --help`
    would take --help as that value instead of showing the help."""
    if value is None or not str(value).strip():
        raise WolfError(f"{option} is required", hint=hint)
    return str(value)


# --- the `invoke` command of .venv ----------------------------------------------------------


def main() -> None:
    """`invoke` and `inv` in .venv (pyproject's [project.scripts], so ./wolf runs it too):
    invoke's own program, but its configuration files (~/.invoke.yaml, /etc/invoke.yaml,
    invoke.yaml beside tasks.py) are read as what they are, files we did not write: with
    $HOME a regular file invoke's loader raised NotADirectoryError before any task (it only
    skips ENOENT); a FIFO there hung it. And Python in UTF-8 mode, whatever the locale: the
    project's data files are UTF-8 (LANG=C PYTHONUTF8=0 read devices.toml as ASCII)."""
    if not sys.flags.utf8_mode:
        os.execv(sys.executable, [sys.executable, "-X", "utf8", sys.argv[0], *sys.argv[1:]])
    import invoke
    from invoke.program import Program

    program = Program(
        name="Invoke", binary="inv[oke]", binary_names=["invoke", "inv"],
        version=invoke.__version__, config_class=_config_class(),
    )  # fmt: skip
    try:
        try:
            program.run()
        finally:  # what is still buffered (all of a short help) is written here, not at exit
            sys.stdout.flush()
    except BrokenPipeError:
        # the reader went away (`./wolf --help X | head`): nothing more to say, as a shell
        # tool that gets SIGPIPE; stdout is pointed at /dev/null so its flush at exit is quiet
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(141)


def _config_class() -> type:
    import stat

    from invoke.config import Config
    from invoke.exceptions import Exit

    from .term import clean
    from .trust.untrusted import kind_of, os_reason

    def refuse(path: str, why: str) -> Exit:
        return Exit(clean(f"error: invoke's configuration file {path}: {why}", newlines=False), 2)

    def checked(path: str) -> str:
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            # not there (also under a $HOME that is a file): what invoke skips
            raise FileNotFoundError(2, "no such file", path) from None
        except OSError as e:
            raise refuse(path, os_reason(e)) from None
        if not stat.S_ISREG(st.st_mode):
            raise refuse(path, f"{kind_of(st.st_mode)}, not a file")
        return path

    def loader(name: str) -> Any:
        def load(self: Any, path: str) -> Any:
            checked(path)
            try:
                return getattr(Config, name)(self, path)
            except Exit:
                raise
            except Exception as e:  # bad YAML or JSON, an error in ~/.invoke.py
                first = (str(e).splitlines() or [""])[0][:200]
                raise refuse(path, f"{type(e).__name__}: {first}") from None

        return load

    methods = {n: loader(n) for n in ("_load_yaml", "_load_yml", "_load_json", "_load_py")}
    return type("WolfConfig", (Config,), methods)

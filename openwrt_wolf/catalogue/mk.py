"""A small GNU Make variable evaluator, enough to read OpenWrt's image Makefiles.

It knows what OpenWrt's target/linux/<target>/image/*.mk and target.mk files use: `define` /
`endef`, `:=` `=` `+=` `?=`, line continuations, `ifeq`/`ifneq`/`ifdef`/`ifndef`/`else`,
`include`, `$(call ...)`, `$$` deferral and the common text functions. It runs no recipes and no
`$(shell)`; rules and recipe lines are skipped. Anything it cannot do raises MakeError, so a
caller can say which device it could not read and why.

The tree is untrusted (docs/threat-model.md): files are read only when they are regular files
inside it and of a bounded size (``read_source``), and what its Makefiles ask for is bounded:
the size of every value, the nesting of expansions, evals and includes, and the work of one
read (``Work``). Past a bound the read ends with ``Refused``, one line: no OpenWrt tree comes
near any of them (the v25.12.5 tree's 104 targets: 531,000 expansions, nesting 5 deep).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import WolfError
from ..trust import untrusted

MAX_DEPTH = 100  # nested expansions before we call it a loop
MAX_NESTING = 32  # evals and includes inside each other (OpenWrt nests 4)
MAX_VALUE = 32 << 10  # characters of one value or expansion (OpenWrt's longest: 6,901)
MAX_SOURCE = 4 << 20  # bytes of one Makefile or DTS (OpenWrt's biggest: about 150 KiB)
# units of work of one read and of one target in it: OpenWrt's 104 targets take 840,000,
# its biggest (ramips) 245,000
WORK = 4_000_000
WORK_TARGET = 1_000_000
_CHARS = 256  # characters scanned or made that cost a unit; each $, paren, comma, line costs one


class MakeError(Exception):
    """The text uses Make we cannot evaluate (or is not valid Make)."""


class Refused(WolfError):
    """A file of the tree we do not read (not a regular file, outside the tree, too big), or
    Make that asks for more than any OpenWrt tree does: the whole read ends with one line."""


@dataclass
class Work:
    """What one read of a tree may still cost, shared by every Make of the read; the target
    being read has a share of its own (``target``), so one bomb ends the read early."""

    left: int = WORK
    target_left: int = WORK_TARGET
    depth: int = 0  # expansions in progress
    nesting: int = 0  # evals and includes in progress

    def target(self) -> None:
        """A new target's share."""
        self.target_left = WORK_TARGET

    def spend(self, units: int) -> None:
        self.left -= units
        self.target_left -= units
        if self.left < 0 or self.target_left < 0:
            most, of = (WORK, "the tree") if self.left < 0 else (WORK_TARGET, "one target")
            raise Refused(
                f"the Makefiles of {of} ask for more than {most:,} units of expansion work "
                "(OpenWrt's biggest target takes 245,000): an expansion bomb?",
                hint="is it an OpenWrt tree? a chain of assignments or a nested $(foreach)",
            )


def too_long(n: int, what: str) -> None:
    """Refused when a value would be longer than MAX_VALUE (say so before making it)."""
    if n > MAX_VALUE:
        raise Refused(
            f"{what} would be {n:,} characters, more than {MAX_VALUE:,} (an OpenWrt value is "
            "a few thousand): an expansion bomb?",
            hint="is it an OpenWrt tree? a chain of assignments doubling a value",
        )


def read_source(path: Path, root: Path | None, what: str = "Makefile") -> str:
    """A file of the tree as text: a regular file (a FIFO, a device or a directory is refused
    without being opened), inside ``root`` when given (links are followed only to files of the
    tree), of at most MAX_SOURCE bytes. Refused, one line naming the file, else."""
    shown = path
    if root is not None:
        real = Path(os.path.realpath(path))
        if path.is_relative_to(root):
            shown = path.relative_to(root)
        if not real.is_relative_to(root):
            raise Refused(
                f"{what} {shown} of the tree {root} leads out of it (a link): not read",
                hint="the tree's files are read only inside the tree",
            )
    try:
        data = untrusted.read_bytes(
            path, what, MAX_SOURCE, holds="a Makefile or DTS of an OpenWrt tree holds",
            big_hint="is it an OpenWrt tree?",
        )  # fmt: skip
    except WolfError as e:
        raise Refused(e.message, hint=e.hint) from None
    return data.decode("utf-8", errors="replace")


@dataclass(frozen=True)
class Var:
    value: str
    recursive: bool  # '=' and define: expanded on use; ':=' stored already expanded


# Returns the file to read for an `include` word, or None to skip it.
IncludeHook = Callable[[str], Path | None]

_DIRECTIVE = re.compile(r"^(-?include|sinclude|export|unexport|override|private|vpath|undefine)\b")
# a variable name without references, then the first operator (or ':' of a rule)
_ASSIGN_FAST = re.compile(r"([^:=$+?!]*)(:::=|::=|:=|\+=|\?=|!=|=|:(?!:?:?=))")
_PREFIXES = re.compile(r"(?:(?:export|override|private)\b[ \t]*)+")
_FUNCTION = re.compile(r"([a-z-]+)[ \t]+")
_SUBST_REF = re.compile(r"([^:=]+):([^=]*)=(.*)", re.S)
_COND = re.compile(r"^(ifeq|ifneq|ifdef|ifndef)\b\s*(.*)$")


_PARENS = {"(": re.compile(r"[()]"), "{": re.compile(r"[{}]")}


def _find_close(text: str, start: int, opener: str) -> int:
    """Index of the paren closing the one just before `start` (same kind, nested)."""
    depth = 1
    for m in _PARENS[opener].finditer(text, start):
        depth += 1 if m.group() == opener else -1
        if depth == 0:
            return m.start()
    raise MakeError(f"unterminated variable reference: ${opener}{text[start : start + 40]}")


_ARGS = re.compile(r"[(){},]")


def split_args(text: str, limit: int | None = None) -> list[str]:
    """Split function arguments at top-level commas (not inside nested parens)."""
    out: list[str] = []
    depth = 0
    start = 0
    for m in _ARGS.finditer(text):  # only the parens and commas: the rest is C's to scan
        c = m.group()
        if c in "({":
            depth += 1
        elif c in ")}":
            depth -= 1
        elif depth == 0 and (limit is None or len(out) < limit - 1):
            out.append(text[start : m.start()])
            start = m.end()
    out.append(text[start:])
    return out


def pattern_match(pattern: str, word: str) -> str | None:
    """Make's % pattern: the stem if `word` matches, else None."""
    if "%" not in pattern:
        return "" if pattern == word else None
    pre, _, post = pattern.partition("%")
    if word.startswith(pre) and word.endswith(post) and len(word) >= len(pre) + len(post):
        return word[len(pre) : len(word) - len(post)]
    return None


def patsubst(pattern: str, replacement: str, words: list[str]) -> str:
    out = []
    for w in words:
        stem = pattern_match(pattern, w)
        if stem is None:
            out.append(w)
        else:
            out.append(replacement.replace("%", stem, 1) if "%" in pattern else replacement)
    return " ".join(out)


def _split_assignment(line: str) -> tuple[str, str, str] | None:
    """(name, operator, value) when the line is a variable assignment, outside $(...);
    ("", ":", "") for a rule line (target: prerequisites); None for anything else."""
    fast = _ASSIGN_FAST.match(line)
    if fast:  # no $ before the operator: the common case, without the character loop
        op = fast.group(2)
        if op == ":":
            return "", ":", ""
        return fast.group(1).strip(), op, line[fast.end() :].lstrip()
    depth = 0
    i = 0
    while i < len(line):
        c = line[i]
        if c == "$" and i + 1 < len(line) and line[i + 1] in "({":
            depth += 1
            i += 2
            continue
        if depth and c in "({":
            depth += 1
        elif depth and c in ")}":
            depth -= 1
        elif depth == 0:
            for op in ("::=", ":::=", ":=", "+=", "?=", "!="):
                if line.startswith(op, i):
                    return line[:i].strip(), op, line[i + len(op) :].lstrip()
            if c == ":":
                return "", ":", ""  # a rule, or a target-specific variable: not ours
            if c == "=":
                return line[:i].strip(), "=", line[i + 1 :].lstrip()
        i += 1
    return None


def _strip_comment(line: str) -> str:
    """The line up to its first `#` that no backslash escapes (`\\#` is a `#`)."""
    out = []
    start = 0
    while (k := line.find("#", start)) >= 0:
        if k > 0 and line[k - 1] == "\\":
            out.append(line[start : k - 1] + "#")
            start = k + 1
            continue
        out.append(line[start:k])
        return "".join(out)
    out.append(line[start:])
    return "".join(out)


def _quoted_pair(text: str) -> tuple[str, str] | None:
    """The two quoted words of `ifeq "a" "b"` (or 'a'), each up to its first closing quote as
    make reads them; None when the text is not two such words."""
    if text[:1] not in ("'", '"'):
        return None
    end = text.find(text[0], 1)
    rest = text[end + 1 :].lstrip() if end > 0 else ""
    if end < 0 or len(rest) == len(text) - end - 1 or rest[:1] not in ("'", '"'):
        return None
    close = rest.find(rest[0], 1)
    if close != len(rest) - 1:
        return None
    return text[1:end], rest[1:close]


def _continued(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _joined(pieces: list[str]) -> str:
    """Continued physical lines (their backslashes removed) as one, as Make joins them: the
    text before each break without its trailing blanks, one space, the next line without its
    leading ones. Built in one pass: joining them one by one took the square of the time."""
    out = [pieces[0]]
    for nxt in pieces[1:]:
        while out and not out[-1].strip():  # blank pieces vanish into the one space
            out.pop()
        if out:
            out[-1] = out[-1].rstrip()
        out += [" ", nxt.lstrip()]
    return "".join(out)


def _join_lines(lines: list[str], i: int) -> tuple[str, int]:
    """The logical line starting at lines[i] (its continuations removed) and the index
    after it."""
    if not lines[i].endswith("\\"):  # nearly every line
        return lines[i], i + 1
    pieces = []
    while True:
        line = lines[i]
        i += 1
        if not _continued(line) or i >= len(lines):
            pieces.append(line[:-1] if _continued(line) else line)
            return _joined(pieces), i
        pieces.append(line[:-1])


def logical_lines(text: str) -> list[str]:
    """Physical lines, with backslash-newline joined into one space as Make does."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line, i = _join_lines(lines, i)
        out.append(line)
    return out


class Make:
    """Variables and their evaluation. `copy()` gives an independent set (one per device)."""

    def __init__(
        self,
        variables: dict[str, Var] | None = None,
        *,
        include: IncludeHook | None = None,
        cwd: Path | None = None,
        root: Path | None = None,
        work: Work | None = None,
    ) -> None:
        self.vars: dict[str, Var] = dict(variables or {})
        self.include = include
        self.cwd = cwd
        self.root = root  # the tree: files are read only inside it (read_source)
        self.work = work or Work()
        self.notes: list[str] = []

    def copy(self) -> Make:
        m = Make(self.vars, root=self.root, work=self.work)  # Var is immutable: shared safely
        m.include, m.cwd = self.include, self.cwd
        return m

    # --- variables ---------------------------------------------------------------------

    def set(self, name: str, value: str, recursive: bool = False) -> None:
        self.vars[name] = Var(value, recursive)

    def defined(self, name: str) -> bool:
        return name in self.vars

    def raw(self, name: str) -> str | None:
        v = self.vars.get(name)
        return None if v is None else v.value

    def get(self, name: str, args: Sequence[str] = ()) -> str:
        """The value of a variable as a reference $(name) would give it."""
        return self._lookup(name, args, 0)

    # --- expansion ---------------------------------------------------------------------

    def expand(self, text: str, args: Sequence[str] = (), _depth: int = 0) -> str:
        """``_depth`` is kept for the functions' signature; the nesting that counts is the
        read's own (Work.depth), also across $(eval) and includes."""
        if "$" not in text:
            return text
        work = self.work
        if work.depth >= MAX_DEPTH:
            raise MakeError("variable expansion nests too deep (a variable refers to itself?)")
        work.spend(1 + text.count("$") + len(text) // _CHARS)
        work.depth += 1
        try:
            out = self._expand(text, args)
        finally:
            work.depth -= 1
        work.spend(len(out) // _CHARS)
        return out

    def _expand(self, text: str, args: Sequence[str]) -> str:
        out: list[str] = []
        size = 0
        i = 0
        n = len(text)
        while i < n:
            j = text.find("$", i)
            if j < 0:
                out.append(text[i:])
                break
            piece = text[i:j]
            if j + 1 >= n:
                out.append(piece + "$")  # a lone trailing $ expands to nothing useful; keep it
                break
            c = text[j + 1]
            if c == "$":
                piece += "$"
                i = j + 2
            elif c in "({":
                end = _find_close(text, j + 2, c)
                piece += self._reference(text[j + 2 : end], args, 0)
                i = end + 1
            else:
                piece += self._lookup(c, args, 0)
                i = j + 2
            out.append(piece)
            size += len(piece)
            too_long(size, "an expansion")
        return "".join(out)

    def _lookup(self, name: str, args: Sequence[str], depth: int) -> str:
        if name.isdigit():
            k = int(name)
            return args[k - 1] if 0 < k <= len(args) else ""
        v = self.vars.get(name)
        if v is None:
            return ""
        return self.expand(v.value, args, depth) if v.recursive else v.value

    def _reference(self, body: str, args: Sequence[str], depth: int) -> str:
        # what finding its end and splitting its arguments walk through (None for a name)
        if n := body.count("(") + body.count("{") + body.count(","):
            self.work.spend(n)
        m = _FUNCTION.match(body)
        if m and m.group(1) in mkfuncs.FUNCTIONS:
            try:
                return mkfuncs.FUNCTIONS[m.group(1)](self, body[m.end() :], args, depth)
            except ValueError:  # $(word x,...): make says "non-numeric argument" too
                raise MakeError(f"$({m.group(1)} ...): a non-numeric argument") from None
        name = self.expand(body, args, depth)
        sub = _SUBST_REF.fullmatch(name) if ":" in name else None
        if sub:  # substitution reference $(VAR:a=b)
            pat, rep = sub.group(2), sub.group(3)
            if "%" not in pat:
                pat, rep = "%" + pat, "%" + rep
            return patsubst(pat, rep, self._lookup(sub.group(1), args, depth).split())
        return self._lookup(name, args, depth)

    # --- evaluation --------------------------------------------------------------------

    def eval_file(self, path: Path) -> None:
        if not os.path.lexists(path):
            raise MakeError(f"cannot read {path}: No such file or directory")
        self.eval(read_source(path, self.root), where=str(path))

    def eval(self, text: str, args: Sequence[str] = (), where: str = "") -> None:
        """Read Makefile text: assignments, defines, conditionals, includes."""
        work = self.work
        if work.nesting >= MAX_NESTING:
            raise Refused(
                f"{where or 'the tree'}: $(eval) and include nest more than {MAX_NESTING} deep "
                "(does a Makefile include itself?)",
                hint="is it an OpenWrt tree? OpenWrt nests them 4 deep",
            )
        work.spend(1 + text.count("\n") + len(text) // _CHARS)
        work.nesting += 1
        try:
            self._eval(text, args, where)
        finally:
            work.nesting -= 1

    def _eval(self, text: str, args: Sequence[str], where: str) -> None:
        lines = text.split("\n")
        i = 0
        # conditional stack: (this branch active, some branch already taken, parent active);
        # a branch is active only when its parent is, so the innermost says it for all
        conds: list[tuple[bool, bool, bool]] = []
        in_rule = False
        while i < len(lines):
            # join continuations (define bodies keep theirs: they are read again by eval)
            physical, i = _join_lines(lines, i)
            active = conds[-1][0] if conds else True
            if physical.startswith("\t") and in_rule:
                continue  # a recipe line
            line = _strip_comment(physical).strip()
            if not line:
                continue
            word = line.split(None, 1)[0]
            if word in ("define",) or line.startswith(("define ", "override define ")):
                i, name, op, body = self._read_define(lines, i, line, where)
                if active:
                    self._assign(self.expand(name, args), op, body, args)
                in_rule = False
                continue
            cm = _COND.match(line)
            if cm:
                ok = active and self._condition(cm.group(1), cm.group(2), args, where)
                conds.append((ok, ok, active))
                continue
            if word == "else":
                if not conds:
                    raise MakeError(f"{where}: else without if")
                _, taken, parent = conds[-1]
                rest = line[4:].strip()
                em = _COND.match(rest)
                if em:
                    ok = parent and not taken and self._condition(em.group(1), em.group(2), args)
                else:
                    ok = parent and not taken
                conds[-1] = (ok, taken or ok, parent)
                continue
            if word == "endif":
                if not conds:
                    raise MakeError(f"{where}: endif without if")
                conds.pop()
                continue
            if not active:
                continue
            in_rule = self._statement(line, args, where)
        if conds:
            raise MakeError(f"{where}: missing endif")

    def _read_define(
        self, lines: list[str], i: int, head: str, where: str
    ) -> tuple[int, str, str, str]:
        rest = head.removeprefix("override ").removeprefix("define").strip()
        op = "="
        for cand in ("::=", ":=", "+=", "?=", "="):
            if rest.endswith(cand):
                rest, op = rest[: -len(cand)].strip(), cand
                break
        depth = 1
        body: list[str] = []
        while i < len(lines):
            stripped = lines[i].strip()
            i += 1
            if stripped == "endef" or stripped.startswith("endef "):
                depth -= 1
                if depth == 0:
                    # make joins backslash-newlines in a define body when it reads it
                    return i, rest, op, "\n".join(logical_lines("\n".join(body)))
            elif stripped.startswith("define ") or stripped == "define":
                depth += 1
            body.append(lines[i - 1])
        raise MakeError(f"{where}: define {rest} has no endef")

    def _condition(self, kind: str, rest: str, args: Sequence[str], where: str = "") -> bool:
        if kind in ("ifdef", "ifndef"):
            name = self.expand(rest.strip(), args).strip()
            value = self.raw(name)
            return bool(value) == (kind == "ifdef")
        rest = rest.strip()
        if rest.startswith("("):
            end = _find_close(rest, 1, "(")
            parts = split_args(rest[1:end], limit=2)
            if len(parts) != 2:
                raise MakeError(f"{where}: cannot read condition {kind} {rest}")
            a, b = (self.expand(p, args).strip() for p in parts)
        else:
            quoted = _quoted_pair(rest)
            if quoted is None:
                raise MakeError(f"{where}: cannot read condition {kind} {rest[:60]}")
            a, b = (self.expand(q, args) for q in quoted)
        return (a == b) == (kind == "ifeq")

    def _statement(self, line: str, args: Sequence[str], where: str) -> bool:
        """One logical line; returns True when it starts a rule (recipe lines follow)."""
        prefixes = _PREFIXES.match(line)
        if prefixes:  # `export override A := x`: all of them at once (no recursion per word)
            rest = line[prefixes.end() :].strip()
            asg = _split_assignment(rest) if rest else None
            if not asg or asg[1] == ":":
                return False
            line = rest
        dm = _DIRECTIVE.match(line)
        if dm:
            d = dm.group(1)
            rest = line[dm.end() :].strip()
            if d in ("include", "-include", "sinclude"):
                for word in self.expand(rest, args).split():
                    self._include(word, optional=d != "include", where=where)
                return False
            if d == "undefine":
                self.vars.pop(self.expand(rest, args).strip(), None)
            return False
        asg = _split_assignment(line)
        if asg and asg[1] == ":":
            return True  # a rule: its recipe lines follow
        if asg:
            name, op, value = asg
            self._assign(self.expand(name, args), op, value, args)
            return False
        # A bare expansion such as $(eval ...): evaluate it for its side effects; what it
        # leaves is read as Makefile text again, as make does.
        result = self.expand(line, args).strip() if "$" in line else line
        if result == line:
            raise MakeError(f"{where}: not an assignment, rule or directive: {line[:60]!r}")
        if result:
            self.eval(result, args, where)
        return False

    def _assign(self, name: str, op: str, value: str, args: Sequence[str]) -> None:
        name = name.strip()
        if not name:
            raise MakeError("assignment to an empty variable name")
        too_long(len(value), f"the value of {name[:60]}")
        old = self.vars.get(name)
        if op in (":=", "::=", ":::="):
            self.vars[name] = Var(self.expand(value, args), False)
        elif op == "=":
            self.vars[name] = Var(value, True)
        elif op == "?=":
            if old is None:
                self.vars[name] = Var(value, True)
        elif op == "+=":
            if old is None:
                self.vars[name] = Var(value, True)
            else:
                add = value if old.recursive else self.expand(value, args)
                too_long(len(old.value) + 1 + len(add), f"the value of {name[:60]}")
                joined = f"{old.value} {add}" if old.value else add
                self.vars[name] = Var(joined, old.recursive)
        elif op == "!=":
            self.notes.append(f"skipped shell assignment {name} != {value}")

    def _include(self, word: str, *, optional: bool, where: str) -> None:
        path = self.include(word) if self.include else None
        if path is None:
            return
        if not os.path.lexists(path):
            if optional:
                return
            raise MakeError(f"{where}: include {word}: no such file {path}")
        self.eval_file(path)  # anything but a regular file of the tree is refused there


def read_defines(text: str, names: Sequence[str]) -> dict[str, Var]:
    """Only the named `define` blocks of a file (e.g. Device/Init from include/image.mk),
    without evaluating the rest of it."""
    lines = text.split("\n")
    out: dict[str, Var] = {}
    m = Make()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        i += 1
        if line.startswith("define "):
            i, name, _op, body = m._read_define(lines, i, line, "")
            if name in names:
                out[name] = Var(body, True)
    return out


from . import mkfuncs  # noqa: E402  (its functions call back into Make)

"""A small GNU Make variable evaluator, enough to read OpenWrt's image Makefiles.

It knows what OpenWrt's target/linux/<target>/image/*.mk and target.mk files use: `define` /
`endef`, `:=` `=` `+=` `?=`, line continuations, `ifeq`/`ifneq`/`ifdef`/`ifndef`/`else`,
`include`, `$(call ...)`, `$$` deferral and the common text functions. It runs no recipes and no
`$(shell)`; rules and recipe lines are skipped. Anything it cannot do raises MakeError, so a
caller can say which device it could not read and why.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

MAX_DEPTH = 100  # nested expansions before we call it a loop


class MakeError(Exception):
    """The text uses Make we cannot evaluate (or is not valid Make)."""


@dataclass(frozen=True)
class Var:
    value: str
    recursive: bool  # '=' and define: expanded on use; ':=' stored already expanded


# Returns the file to read for an `include` word, or None to skip it.
IncludeHook = Callable[[str], Path | None]

_DIRECTIVE = re.compile(r"^(-?include|sinclude|export|unexport|override|private|vpath|undefine)\b")
# a variable name without references, then the first operator (or ':' of a rule)
_ASSIGN_FAST = re.compile(r"([^:=$+?!]*)(:::=|::=|:=|\+=|\?=|!=|=|:(?!:?:?=))")
_COND = re.compile(r"^(ifeq|ifneq|ifdef|ifndef)\b\s*(.*)$")


def _find_close(text: str, start: int, opener: str) -> int:
    """Index of the paren closing the one just before `start` (same kind, nested)."""
    closer = ")" if opener == "(" else "}"
    depth = 1
    i = start
    while i < len(text):
        c = text[i]
        if c == opener:
            depth += 1
        elif c == closer:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise MakeError(f"unterminated variable reference: ${opener}{text[start : start + 40]}")


def split_args(text: str, limit: int | None = None) -> list[str]:
    """Split function arguments at top-level commas (not inside nested parens)."""
    out: list[str] = []
    depth = 0
    cur: list[str] = []
    for c in text:
        if c in "({":
            depth += 1
        elif c in ")}":
            depth -= 1
        if c == "," and depth == 0 and (limit is None or len(out) < limit - 1):
            out.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    out.append("".join(cur))
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
    if "#" not in line:
        return line
    out = []
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\" and i + 1 < len(line) and line[i + 1] == "#":
            out.append("#")
            i += 2
            continue
        if c == "#":
            break
        out.append(c)
        i += 1
    return "".join(out)


def logical_lines(text: str) -> list[str]:
    """Physical lines, with backslash-newline joined into one space as Make does."""
    lines = text.split("\n")
    out: list[str] = []
    buf: str | None = None
    for line in lines:
        cont = (len(line) - len(line.rstrip("\\"))) % 2 == 1
        piece = line[:-1] if cont else line
        buf = piece if buf is None else buf.rstrip() + " " + piece.lstrip()
        if not cont:
            out.append(buf)
            buf = None
    if buf is not None:
        out.append(buf)
    return out


class Make:
    """Variables and their evaluation. `copy()` gives an independent set (one per device)."""

    def __init__(
        self,
        variables: dict[str, Var] | None = None,
        *,
        include: IncludeHook | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.vars: dict[str, Var] = dict(variables or {})
        self.include = include
        self.cwd = cwd
        self.notes: list[str] = []

    def copy(self) -> Make:
        m = Make(self.vars)  # Var is immutable: sharing them is safe
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
        if "$" not in text:
            return text
        if _depth > MAX_DEPTH:
            raise MakeError("variable expansion nests too deep (a variable refers to itself?)")
        out: list[str] = []
        i = 0
        n = len(text)
        while i < n:
            j = text.find("$", i)
            if j < 0:
                out.append(text[i:])
                break
            out.append(text[i:j])
            if j + 1 >= n:
                out.append("$")  # a lone trailing $ expands to nothing useful; keep it
                break
            c = text[j + 1]
            if c == "$":
                out.append("$")
                i = j + 2
            elif c in "({":
                end = _find_close(text, j + 2, c)
                out.append(self._reference(text[j + 2 : end], args, _depth + 1))
                i = end + 1
            else:
                out.append(self._lookup(c, args, _depth + 1))
                i = j + 2
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
        m = re.match(r"([a-z-]+)[ \t]+", body)
        if m and m.group(1) in mkfuncs.FUNCTIONS:
            return mkfuncs.FUNCTIONS[m.group(1)](self, body[m.end() :], args, depth)
        name = self.expand(body, args, depth)
        sub = re.fullmatch(r"([^:=]+):([^=]*)=(.*)", name, re.S)
        if sub:  # substitution reference $(VAR:a=b)
            pat, rep = sub.group(2), sub.group(3)
            if "%" not in pat:
                pat, rep = "%" + pat, "%" + rep
            return patsubst(pat, rep, self._lookup(sub.group(1), args, depth).split())
        return self._lookup(name, args, depth)

    # --- evaluation --------------------------------------------------------------------

    def eval_file(self, path: Path) -> None:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as e:
            raise MakeError(f"cannot read {path}: {e.strerror}") from None
        self.eval(text, where=str(path))

    def eval(self, text: str, args: Sequence[str] = (), where: str = "") -> None:
        """Read Makefile text: assignments, defines, conditionals, includes."""
        lines = text.split("\n")
        i = 0
        # conditional stack: (this branch active, some branch already taken, parent active)
        conds: list[tuple[bool, bool, bool]] = []
        in_rule = False
        while i < len(lines):
            physical = lines[i]
            i += 1
            # join continuations (define bodies keep theirs: they are read again by eval)
            while (len(physical) - len(physical.rstrip("\\"))) % 2 == 1 and i < len(lines):
                physical = physical[:-1].rstrip() + " " + lines[i].lstrip()
                i += 1
            active = all(c[0] for c in conds)
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
            qm = re.fullmatch(r"""(["'])(.*?)\1\s+(["'])(.*?)\3""", rest)
            if not qm:
                raise MakeError(f"{where}: cannot read condition {kind} {rest}")
            a, b = self.expand(qm.group(2), args), self.expand(qm.group(4), args)
        return (a == b) == (kind == "ifeq")

    def _statement(self, line: str, args: Sequence[str], where: str) -> bool:
        """One logical line; returns True when it starts a rule (recipe lines follow)."""
        dm = _DIRECTIVE.match(line)
        if dm:
            d = dm.group(1)
            rest = line[dm.end() :].strip()
            if d in ("include", "-include", "sinclude"):
                for word in self.expand(rest, args).split():
                    self._include(word, optional=d != "include", where=where)
                return False
            if d in ("export", "override", "private") and rest:
                asg = _split_assignment(rest)
                if asg and asg[1] != ":":
                    return self._statement(rest, args, where)
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
                joined = f"{old.value} {add}" if old.value else add
                self.vars[name] = Var(joined, old.recursive)
        elif op == "!=":
            self.notes.append(f"skipped shell assignment {name} != {value}")

    def _include(self, word: str, *, optional: bool, where: str) -> None:
        path = self.include(word) if self.include else None
        if path is None:
            return
        if not path.is_file():
            if optional:
                return
            raise MakeError(f"{where}: include {word}: no such file {path}")
        self.eval_file(path)


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

"""GNU Make's built-in functions for the evaluator in mk.py: $(if), $(call), $(foreach),
$(filter), $(patsubst), ... each a small function over its (unexpanded) arguments."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from .mk import Make, MakeError, Var, patsubst, pattern_match, split_args, too_long

_Fn = Callable[[Make, str, Sequence[str], int], str]


def _simple(fn: Callable[[list[str]], str], nargs: int | None = None) -> _Fn:
    def run(m: Make, body: str, args: Sequence[str], depth: int) -> str:
        return fn([m.expand(a, args, depth) for a in split_args(body, nargs)])

    return run


def _fn_if(m: Make, body: str, args: Sequence[str], depth: int) -> str:
    parts = split_args(body, 3)
    if m.expand(parts[0], args, depth).strip():
        return m.expand(parts[1], args, depth) if len(parts) > 1 else ""
    return m.expand(parts[2], args, depth) if len(parts) > 2 else ""


def _fn_or(m: Make, body: str, args: Sequence[str], depth: int) -> str:
    for p in split_args(body):
        v = m.expand(p, args, depth).strip()
        if v:
            return v
    return ""


def _fn_and(m: Make, body: str, args: Sequence[str], depth: int) -> str:
    v = ""
    for p in split_args(body):
        v = m.expand(p, args, depth).strip()
        if not v:
            return ""
    return v


def _fn_call(m: Make, body: str, args: Sequence[str], depth: int) -> str:
    parts = split_args(body)
    name = m.expand(parts[0], args, depth).strip()
    params = [m.expand(p, args, depth) for p in parts[1:]]
    v = m.vars.get(name)
    if v is None:
        return ""
    return m.expand(v.value, params, depth) if v.recursive else v.value


def _fn_foreach(m: Make, body: str, args: Sequence[str], depth: int) -> str:
    parts = split_args(body, 3)
    var, words, text = parts + [""] * (3 - len(parts))
    name = m.expand(var, args, depth).strip()
    saved = m.vars.get(name)
    out = []
    size = 0
    try:
        for w in m.expand(words, args, depth).split():
            m.work.spend(1)  # an iteration costs, also one that makes nothing
            m.vars[name] = Var(w, False)
            out.append(m.expand(text, args, depth))
            size += len(out[-1]) + 1
            too_long(size, "a $(foreach)")
    finally:
        if saved is None:
            m.vars.pop(name, None)
        else:
            m.vars[name] = saved
    return " ".join(out)


def _fn_eval(m: Make, body: str, args: Sequence[str], depth: int) -> str:
    m.eval(m.expand(body, args, depth), args)
    return ""


def _fn_error(m: Make, body: str, args: Sequence[str], depth: int) -> str:
    raise MakeError(f"$(error {m.expand(body, args, depth).strip()})")


def _fn_value(m: Make, body: str, args: Sequence[str], depth: int) -> str:
    return m.raw(m.expand(body, args, depth).strip()) or ""


def _fn_shell(m: Make, body: str, args: Sequence[str], depth: int) -> str:
    m.notes.append(f"skipped $(shell {body.strip()[:60]})")
    return ""


def _fn_wildcard(m: Make, body: str, args: Sequence[str], depth: int) -> str:
    """Names as the pattern spells them (relative ones against the Makefile's directory);
    only the tree's own directories are listed."""
    out: list[str] = []
    for pat in m.expand(body, args, depth).split():
        spelled = Path(pat)
        where = spelled.parent if spelled.is_absolute() or m.cwd is None else m.cwd / spelled.parent
        if m.root is not None and not Path(os.path.realpath(where)).is_relative_to(m.root):
            continue  # names of the host's files are not the tree's facts
        if where.is_dir():
            listed = [p.name for p in where.iterdir()]
            m.work.spend(len(listed))
            names = sorted(n for n in listed if fnmatch.fnmatch(n, spelled.name))
            out += [str(spelled.parent / n) if str(spelled.parent) != "." else n for n in names]
    return " ".join(out)


def _filter(keep: bool) -> _Fn:
    def run(m: Make, body: str, args: Sequence[str], depth: int) -> str:
        pats, words = (m.expand(a, args, depth).split() for a in split_args(body, 2))
        hit = [w for w in words if any(pattern_match(p, w) is not None for p in pats) == keep]
        return " ".join(hit)

    return run


def _subst(a: list[str]) -> str:
    if not a[0]:
        return a[2]
    too_long(len(a[2]) + a[2].count(a[0]) * max(0, len(a[1]) - len(a[0])), "a $(subst)")
    return a[2].replace(a[0], a[1])


def _patsubst(a: list[str]) -> str:
    words = a[2].split()
    too_long(len(a[2]) + len(words) * len(a[1]), "a $(patsubst)")
    return patsubst(a[0].strip(), a[1].strip(), words)


def _affix(a: list[str], prefix: bool) -> str:
    words = a[1].split()
    too_long(len(a[1]) + len(words) * len(a[0]), "an $(addprefix) or $(addsuffix)")
    return " ".join(a[0] + w if prefix else w + a[0] for w in words)


def _word(a: list[str]) -> str:
    words = a[1].split()
    n = int(a[0].strip())
    return words[n - 1] if 0 < n <= len(words) else ""


def _wordlist(a: list[str]) -> str:
    s, e = int(a[0].strip()), int(a[1].strip())
    return " ".join(a[2].split()[s - 1 : e])


def _dir(a: list[str]) -> str:
    return " ".join((w[: w.rfind("/") + 1] if "/" in w else "./") for w in a[0].split())


def _basename(a: list[str]) -> str:
    out = []
    for w in a[0].split():
        dot, slash = w.rfind("."), w.rfind("/")
        out.append(w[:dot] if dot > slash else w)
    return " ".join(out)


FUNCTIONS: dict[str, _Fn] = {
    "if": _fn_if,
    "or": _fn_or,
    "and": _fn_and,
    "call": _fn_call,
    "foreach": _fn_foreach,
    "eval": _fn_eval,
    "error": _fn_error,
    "value": _fn_value,
    "shell": _fn_shell,
    "wildcard": _fn_wildcard,
    "filter": _filter(True),
    "filter-out": _filter(False),
    "info": _simple(lambda a: ""),
    "warning": _simple(lambda a: ""),
    "subst": _simple(_subst, 3),
    "patsubst": _simple(_patsubst, 3),
    "strip": _simple(lambda a: " ".join(",".join(a).split())),
    "findstring": _simple(lambda a: a[0] if a[0] in a[1] else "", 2),
    "sort": _simple(lambda a: " ".join(sorted(set(",".join(a).split())))),
    "word": _simple(_word, 2),
    "wordlist": _simple(_wordlist, 3),
    "words": _simple(lambda a: str(len(",".join(a).split()))),
    "firstword": _simple(lambda a: (",".join(a).split() or [""])[0]),
    "lastword": _simple(lambda a: (",".join(a).split() or [""])[-1]),
    "notdir": _simple(lambda a: " ".join(w.rsplit("/", 1)[-1] for w in ",".join(a).split())),
    "dir": _simple(_dir),
    "basename": _simple(_basename),
    "addprefix": _simple(lambda a: _affix(a, True), 2),
    "addsuffix": _simple(lambda a: _affix(a, False), 2),
    "abspath": _simple(lambda a: " ".join(",".join(a).split())),
    "realpath": _simple(lambda a: " ".join(",".join(a).split())),
}

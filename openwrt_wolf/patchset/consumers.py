"""Derive the wolfSSL symbols each USE_WOLFSSL package imports, from its sources.

Each consumer's recipe (data/wolfssl_consumers.toml, [consumer.<pkg>.derive]) names a source
root, files, defines and include directories. Every file is compiled with the cross compiler
against a configured wolfSSL tree (its wolfssl/options.h decides which API exists), and the
object's undefined symbols in libwolfssl's namespaces are read with pyelftools. ``write``
puts the new lists back into the data file, leaving its comments and other tables alone.
"""

from __future__ import annotations

import fnmatch
import re
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from .. import proc
from ..errors import WolfError
from .symbols import CONSUMERS_FILE

_CC_TIMEOUT = 300.0


@dataclass
class Derived:
    consumer: str
    symbols: list[str]
    previous: list[str]

    @property
    def added(self) -> list[str]:
        return sorted(set(self.symbols) - set(self.previous))

    @property
    def removed(self) -> list[str]:
        return sorted(set(self.previous) - set(self.symbols))


def undefined_symbols(obj: Path) -> set[str]:
    """Global symbols an object file references but does not define (its .symtab)."""
    try:
        with obj.open("rb") as fh:
            tab = ELFFile(fh).get_section_by_name(".symtab")
            if not isinstance(tab, SymbolTableSection):
                raise WolfError(f"{obj}: no symbol table")
            return {
                s.name
                for s in tab.iter_symbols()
                if s.name
                and s["st_shndx"] == "SHN_UNDEF"
                and s["st_info"]["bind"] in ("STB_GLOBAL", "STB_WEAK")
            }
    except ELFError as e:
        raise WolfError(f"{obj} is not an ELF object ({e})") from None


def _expand(item: str, root: Path, wolfssl: Path, libubox: Path | None) -> Path:
    if "{libubox}" in item:
        if libubox is None:
            raise WolfError("a recipe needs libubox headers", hint="pass --libubox DIR")
        return Path(item.replace("{libubox}", str(libubox)))
    if "{wolfssl}" in item:
        return Path(item.replace("{wolfssl}", str(wolfssl)))
    return root / item


def derive(
    roots: dict[str, Path],
    wolfssl: Path,
    *,
    libubox: Path | None = None,
    cc: str = "mips-linux-gnu-gcc",
    path: Path = CONSUMERS_FILE,
) -> list[Derived]:
    """Compile every consumer's recipe; return its wolfSSL imports and the stored list."""
    if not (wolfssl / "wolfssl" / "options.h").is_file():
        raise WolfError(
            f"no wolfssl/options.h under {wolfssl}",
            hint="pass a configured wolfSSL source tree (./configure ... done)",
        )
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    spec: dict[str, Any] = data.get("derive", {})
    namespaces = list(spec.get("namespaces", []))
    cflags = list(spec.get("cflags", []))
    out: list[Derived] = []
    with tempfile.TemporaryDirectory(prefix="wolf-consumers-") as tmp:
        for name, c in sorted(data.get("consumer", {}).items()):
            rec = c.get("derive")
            if not rec:
                continue
            root_name = rec["root"]
            if root_name not in roots:
                raise WolfError(
                    f"consumer {name} needs the {root_name} sources",
                    hint=f"pass --{root_name} DIR",
                )
            root = roots[root_name]
            args = [f"-D{d}" for d in rec.get("defines", [])]
            args += [f"-I{wolfssl}"]
            args += [f"-I{_expand(i, root, wolfssl, libubox)}" for i in rec.get("include", [])]
            found: set[str] = set()
            for i, f in enumerate(rec["files"]):
                src = root / f
                if not src.is_file():
                    raise WolfError(f"consumer {name}: no {f} under {root}")
                obj = Path(tmp) / f"{name}-{i}.o"
                proc.run([cc, *cflags, *args, "-c", str(src), "-o", str(obj)], timeout=_CC_TIMEOUT)
                found |= undefined_symbols(obj)
            mine = sorted(s for s in found if any(fnmatch.fnmatchcase(s, n) for n in namespaces))
            out.append(Derived(name, mine, list(c.get("symbols", []))))
    return out


def _toml_list(names: list[str]) -> str:
    lines: list[str] = []
    cur = "    "
    for n in names:
        item = f'"{n}", '
        if len(cur) + len(item) > 100:
            lines.append(cur.rstrip())
            cur = "    "
        cur += item
    lines.append(cur.rstrip())
    return "[\n" + "\n".join(lines) + "\n]"


def write(results: list[Derived], path: Path = CONSUMERS_FILE) -> None:
    """Replace each consumer's ``symbols = [...]`` in the data file (atomically)."""
    from ..results.store import write_atomic

    text = path.read_text(encoding="utf-8")
    for r in results:
        pat = re.compile(
            r"(\[consumer\." + re.escape(r.consumer) + r"\]\n(?:(?!\[)[^\n]*\n)*?)"
            r"symbols = \[\n.*?\n\]",
            re.S,
        )
        block = "symbols = " + _toml_list(r.symbols)

        def repl(m: re.Match[str], block: str = block) -> str:
            return m.group(1) + block

        new, n = pat.subn(repl, text)
        if n != 1:
            raise WolfError(f"{path}: cannot find the symbols list of {r.consumer}")
        text = new
    tomllib.loads(text)  # never write a file we could not read back
    write_atomic(path, text)

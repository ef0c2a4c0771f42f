"""Does a built libwolfssl.so export every wolfSSL symbol the USE_WOLFSSL packages import?

The consumers and the symbols each one imports live in data/wolfssl_consumers.toml (derived
from their sources, see docs/patches.md). The library side is read from the ELF dynamic
symbol table (.dynsym) with pyelftools: defined (section index not UNDEF), global or weak,
default or protected visibility, functions or objects.
"""

from __future__ import annotations

import fnmatch
import io
import struct
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from elftools.common.exceptions import ELFError
from elftools.elf.dynamic import DynamicSegment
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from ..errors import WolfError
from ..paths import DATA_DIR
from ..trust import untrusted

CONSUMERS_FILE = DATA_DIR / "wolfssl_consumers.toml"


@dataclass(frozen=True)
class Consumer:
    name: str  # the OpenWrt package
    source: str  # where the list was derived from
    required: bool  # a default package of USE_WOLFSSL (False: informational)
    symbols: tuple[str, ...]


@dataclass
class ConsumerResult:
    consumer: str
    required: bool
    needed: int
    missing: list[str] = field(default_factory=list)


@dataclass
class SymbolCheck:
    library: str
    exported: int
    results: list[ConsumerResult]

    @property
    def ok(self) -> bool:
        return all(not r.missing for r in self.results if r.required)

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "ok": self.ok}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SymbolCheck:
        return cls(d["library"], d["exported"], [ConsumerResult(**r) for r in d["results"]])


def load_consumers(path: Path = CONSUMERS_FILE) -> list[Consumer]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise WolfError(f"cannot read {path}: {e}") from None
    out: list[Consumer] = []
    for name, c in sorted(data.get("consumer", {}).items()):
        syms = c.get("symbols")
        if not isinstance(syms, list) or not syms or not all(isinstance(s, str) for s in syms):
            raise WolfError(f"{path}: consumer {name} needs a non-empty symbols list")
        out.append(
            Consumer(name, str(c.get("source", "")), bool(c.get("required", True)), tuple(syms))
        )
    if not out:
        raise WolfError(f"{path}: no [consumer.<package>] tables")
    return out


MAX_LIBRARY = 256 << 20  # the full libwolfssl is 1.1 MB
HINT = "pass the built libwolfssl.so"


def library_bytes(library: Path) -> bytes:
    """The library's bytes, read as any file we did not write (trust/untrusted.py): a FIFO,
    /dev/zero or a 20 GB file is one line. Parsed from memory: pyelftools seeks its stream,
    and /proc/self/mem (a 'regular file' of size 0) raised OSError from that seek."""
    return untrusted.read_bytes(library, "library", MAX_LIBRARY, hint=HINT)


def exported_symbols(library: Path) -> set[str]:
    """Names a dynamic linker can bind to: defined global/weak symbols of .dynsym."""
    data = library_bytes(library)
    try:
        elf = ELFFile(io.BytesIO(data))
        dynsym = elf.get_section_by_name(".dynsym")
        if isinstance(dynsym, SymbolTableSection):
            symbols = dynsym.iter_symbols()
        else:
            # sstrip (as OpenWrt and the footprint lab install libraries) drops the
            # section headers; the loader's view, PT_DYNAMIC, still has the table
            dyn = next((sg for sg in elf.iter_segments() if isinstance(sg, DynamicSegment)), None)
            if dyn is None:
                raise WolfError(f"{library}: no dynamic symbol table (not a shared library?)")
            symbols = dyn.iter_symbols()
        names: set[str] = set()
        for sym in symbols:
            if sym["st_shndx"] == "SHN_UNDEF" or not sym.name:
                continue
            if sym["st_info"]["bind"] not in ("STB_GLOBAL", "STB_WEAK"):
                continue
            if sym["st_other"]["visibility"] not in ("STV_DEFAULT", "STV_PROTECTED"):
                continue
            names.add(sym.name)
        return names
    except ELFError as e:
        raise WolfError(f"{library} is not an ELF file ({e})") from None
    except (ValueError, IndexError, KeyError, AssertionError, struct.error) as e:
        # a damaged table: pyelftools reads offsets and counts as the file gives them
        raise WolfError(f"{library} is not an ELF library we can read ({type(e).__name__})",
                        hint=HINT) from None  # fmt: skip


def check(library: Path, consumers: list[Consumer] | None = None) -> SymbolCheck:
    consumers = load_consumers() if consumers is None else consumers
    have = exported_symbols(library)
    results = [
        ConsumerResult(c.name, c.required, len(c.symbols), sorted(set(c.symbols) - have))
        for c in consumers
    ]
    return SymbolCheck(str(library), len(have), results)


def export_patterns(path: Path = CONSUMERS_FILE) -> list[str]:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    pats = data.get("exports", {}).get("patterns", [])
    if not isinstance(pats, list) or not all(isinstance(p, str) for p in pats):
        raise WolfError(f"{path}: [exports] patterns must be a list of strings")
    return pats


def export_list(path: Path = CONSUMERS_FILE) -> list[str]:
    """What the minimal library exports: the wolfCrypt namespaces whole (glob patterns), plus
    each other symbol a required consumer imports. The patch set's map and the footprint lab's
    minimal build both come from this one list."""
    pats = export_patterns(path)
    names = sorted(
        {
            s
            for c in load_consumers(path)
            if c.required
            for s in c.symbols
            if not any(fnmatch.fnmatchcase(s, p) for p in pats)
        }
    )
    return [*pats, *names]


def version_script(path: Path = CONSUMERS_FILE) -> str:
    """The linker version script of the minimal library (export_list); everything else local,
    so LTO can drop it."""
    body = "".join(f"    {n};\n" for n in export_list(path))
    return (
        "/* libwolfssl minimal mode: what OpenWrt's default wolfSSL packages import.\n"
        " * Generated from openwrt-wolf data/wolfssl_consumers.toml. */\n"
        f"{{\n  global:\n{body}  local: *;\n}};\n"
    )

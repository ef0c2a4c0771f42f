"""Read a device's DTS (with its .dtsi includes) far enough to find the flash partition the
firmware lives in: the node labelled "firmware" and its `reg = <offset size>`.

The source is merged the way dtc merges it: later `&label { ... }` blocks and repeated node
bodies override earlier properties, `/delete-node/` removes nodes. Macros from C headers
(<dt-bindings/...>) are not expanded; partition offsets and sizes are plain numbers in
OpenWrt's trees, and a reg we cannot read is reported, not guessed.

The tree is untrusted: its files are read only inside it (an include that leads out of it is
one "not in the tree", never opened), as regular files of a bounded size (mk.read_source),
and what is wrong with one is said without quoting it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from .devices import Partition
from .mk import read_source

MAX_TOKENS = 1_000_000  # of one device's DTS with its includes (OpenWrt's: about 10,000)
MAX_NESTING = 64  # nodes inside each other (OpenWrt's: 6)
# [ \t]*, not \s*: over a run of blank lines \s* made each search take its square
_INCLUDE = re.compile(r'^[ \t]*(?:#include|/include/)[ \t]*[<"]([^>"]+)[>"]', re.M)
_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<str>"(?:[^"\\]|\\.)*")
  | (?P<cells><[^>]*>)
  | (?P<bytes>\[[^\]]*\])
  | (?P<ref>&\{[^}]*\}|&[A-Za-z_][\w]*)
  | (?P<kw>/[a-z0-9-]+/)
  | (?P<label>[A-Za-z_][\w]*:)
  | (?P<punct>[{};=,])
  | (?P<name>[\w,.+\-@#/?*]+)
  | (?P<bad>.)
    """,
    re.X,
)


class DtsError(Exception):
    pass


@dataclass
class Node:
    name: str
    labels: list[str] = field(default_factory=list)
    props: dict[str, str] = field(default_factory=dict)
    children: dict[str, Node] = field(default_factory=dict)
    parent: Node | None = None

    def child(self, name: str) -> Node:
        if name not in self.children:
            self.children[name] = Node(name, parent=self)
        return self.children[name]

    def walk(self) -> list[Node]:
        """This node and all below it, depth-first in order (a loop: &{/a/b/...} paths make
        nodes as deep as they are long)."""
        out: list[Node] = []
        todo = [self]
        while todo:
            node = todo.pop()
            out.append(node)
            todo.extend(reversed(node.children.values()))
        return out


@dataclass(frozen=True)
class Firmware:
    """What the DTS says about the firmware partition."""

    dts: str  # path of the .dts, relative to the tree
    partition: Partition | None
    flash_end: int | None  # end of the last partition beside it: a lower bound of the flash
    note: str = ""  # why partition is None, or what was unusual


def _strip_comments(text: str) -> str:
    text = re.sub(r"\\\n", " ", text)  # continued lines (multi-line #define)
    # an unclosed comment runs to the end (one pass, not one scan to the end per "/*")
    text = re.sub(r"/\*.*?(?:\*/|\Z)", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    # preprocessor lines other than includes (which are inlined before this)
    return re.sub(r"^[ \t]*#(?!include)[^\n]*", "", text, flags=re.M)


@lru_cache(maxsize=4096)
def _file_parts(path: Path, root: Path | None) -> tuple[tuple[tuple[str, str], ...] | str, ...]:
    """One file's tokens, split at its includes (the include names are the str parts).
    Cached: the SoC .dtsi files are shared by hundreds of devices."""
    text = _strip_comments(read_source(path, root, "DTS"))
    where = path.relative_to(root) if root is not None and path.is_relative_to(root) else path
    parts: list[tuple[tuple[str, str], ...] | str] = []
    pos = 0
    for m in _INCLUDE.finditer(text):
        parts.append(tuple(_tokens(text[pos : m.start()], where)))
        parts.append(m.group(1))
        pos = m.end()
    parts.append(tuple(_tokens(text[pos:], where)))
    return tuple(parts)


def _inside(path: Path, root: Path | None) -> bool:
    return root is None or Path(os.path.realpath(path)).is_relative_to(root)


def load_tokens(
    path: Path,
    search: list[Path],
    missing: list[str],
    depth: int = 0,
    root: Path | None = None,
    count: list[int] | None = None,
) -> list[tuple[str, str]]:
    """The DTS's tokens with its "..." and <...> includes inlined; C headers are skipped. With
    ``root``, an include is looked for inside it only (where it leads out, it is missing)."""
    if depth > 20:
        raise DtsError(f"{path}: includes nest too deep")
    count = [0] if count is None else count
    out: list[tuple[str, str]] = []
    for part in _file_parts(path, root):
        if not isinstance(part, str):
            count[0] += len(part)
            if count[0] > MAX_TOKENS:  # a .dtsi included twice by each of 20 levels
                raise DtsError(f"{path}: more than {MAX_TOKENS:,} tokens with its includes")
            out += part
            continue
        if part.endswith(".h"):
            continue
        for d in [path.parent, *search]:
            cand = d / part
            if os.path.lexists(cand) and _inside(cand, root):
                out += load_tokens(cand, search, missing, depth + 1, root, count)
                break
        else:
            missing.append(part)
    return out


def _tokens(text: str, where: Path | str = "the DTS") -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup or ""
        if kind == "bad":  # said without the text: it may be any file's
            line = text.count("\n", 0, m.start()) + 1
            raise DtsError(f"{where}: a character no DTS token begins with (line {line})")
        if kind != "ws":
            out.append((kind, m.group()))
    return out


def parse(text: str) -> Node:
    """Parse DTS source (includes already inlined) into one merged tree."""
    return parse_tokens(_tokens(_strip_comments(text)))


def parse_tokens(toks: list[tuple[str, str]]) -> Node:
    root = Node("/")
    labels: dict[str, Node] = {}
    i = 0

    def find_ref(ref: str) -> Node:
        if ref.startswith("&{"):
            node = root
            for part in ref[2:-1].strip("/").split("/"):
                if part:
                    node = node.child(part)
            return node
        name = ref[1:]
        if name not in labels:
            raise DtsError("a reference to a label no node has")
        return labels[name]

    def body(node: Node, depth: int = 0) -> None:
        nonlocal i
        if depth > MAX_NESTING:
            raise DtsError(f"nodes nest more than {MAX_NESTING} deep")
        while i < len(toks):
            kind, val = toks[i]
            if val == "}":
                i += 1
                if i < len(toks) and toks[i][1] == ";":
                    i += 1
                return
            if val == ";":
                i += 1
                continue
            if kind == "kw" and val == "/delete-node/":
                target = toks[i + 1][1]
                i += 3 if i + 2 < len(toks) and toks[i + 2][1] == ";" else 2
                if target.startswith("&"):
                    gone = find_ref(target)
                    if gone.parent:
                        gone.parent.children = {
                            k: v for k, v in gone.parent.children.items() if v is not gone
                        }
                else:
                    node.children.pop(target, None)
                continue
            if kind == "kw" and val == "/delete-property/":
                node.props.pop(toks[i + 1][1], None)
                i += 3
                continue
            new_labels = []
            while kind == "label":
                new_labels.append(val[:-1])
                i += 1
                kind, val = toks[i]
            name = val
            i += 1
            nxt = toks[i][1] if i < len(toks) else ";"
            if nxt == "{":
                i += 1
                child = node.child(name)
                for lab in new_labels:
                    child.labels.append(lab)
                    labels[lab] = child
                body(child, depth + 1)
            elif nxt == "=":
                i += 1
                parts = []
                while i < len(toks) and toks[i][1] != ";":
                    parts.append(toks[i][1])
                    i += 1
                i += 1
                node.props[name] = " ".join(parts)
            else:  # a boolean property: `name;`
                node.props[name] = ""
                i += 1 if nxt == ";" else 0

    while i < len(toks):
        kind, val = toks[i]
        if kind == "kw" and val in ("/dts-v1/", "/plugin/"):
            i += 2
        elif kind == "kw" and val == "/memreserve/":
            while i < len(toks) and toks[i][1] != ";":
                i += 1
            i += 1
        elif kind == "kw" and val == "/delete-node/":
            target = find_ref(toks[i + 1][1])
            if target.parent:
                target.parent.children = {
                    k: v for k, v in target.parent.children.items() if v is not target
                }
            i += 3
        elif val == "/" and toks[i + 1][1] == "{":
            i += 2
            body(root)
        elif kind == "label" or kind == "ref":
            # `label: &ref {` is unusual; a plain `&ref {` extends a labelled node
            while toks[i][0] == "label":
                i += 1
            node = find_ref(toks[i][1])
            if toks[i + 1][1] != "{":
                raise DtsError("a reference at the top level without { after it")
            i += 2
            body(node)
        elif val == ";":
            i += 1
        else:
            raise DtsError(f"an unexpected {kind or 'punctuation'} token at the top level")
    return root


def _cells(value: str) -> list[int]:
    m = re.fullmatch(r"<([^>]*)>", value.strip())
    if not m:
        raise DtsError("its reg is not a cell list")
    try:
        return [int(c.strip("()"), 0) for c in m.group(1).split()]
    except ValueError:  # a macro, an expression (or a number of more than 4,300 digits)
        raise DtsError("its reg uses macros or expressions") from None


def _reg(node: Node) -> tuple[int, int]:
    cells = _cells(node.props["reg"])
    if len(cells) == 2:
        return cells[0], cells[1]
    if len(cells) == 4:  # #address-cells = 2, #size-cells = 2
        return (cells[0] << 32) | cells[1], (cells[2] << 32) | cells[3]
    if len(cells) == 3:  # 2 address cells + 1 size cell (or the other way); take the size last
        return (cells[0] << 32) | cells[1], cells[2]
    raise DtsError(f"its reg has {len(cells)} cells")


def _label(node: Node) -> str:
    return node.props.get("label", "").strip().strip('"')


def firmware(dts: Path, search: list[Path], rel: str, tree: Path | None = None) -> Firmware:
    """Find the firmware partition of one device's DTS (its includes inside ``tree``)."""
    missing: list[str] = []
    try:
        root = parse_tokens(load_tokens(dts, search, missing, root=tree))
    except (DtsError, IndexError) as e:
        return Firmware(rel, None, None, f"cannot parse DTS: {e}")
    except OSError as e:
        return Firmware(rel, None, None, f"cannot read DTS: {e.strerror}")
    nodes = [n for n in root.walk() if "reg" in n.props and _label(n) == "firmware"]
    if not nodes:
        why = 'no partition labelled "firmware"'
        if missing:
            why += f" (includes not in the tree: {', '.join(sorted(set(missing)))})"
        return Firmware(rel, None, None, why)
    if len(nodes) > 1:
        return Firmware(rel, None, None, f'{len(nodes)} partitions labelled "firmware"')
    node = nodes[0]
    try:
        offset, size = _reg(node)
        end = None
        if node.parent is not None:
            ends = [sum(_reg(s)) for s in node.parent.children.values() if "reg" in s.props]
            end = max(ends) if ends else None
    except DtsError as e:
        return Firmware(rel, None, None, f"firmware partition: {e}")
    if size == 0:  # a sub-partition sized at run time (mtdsplit, nested fixed-partitions)
        return Firmware(rel, None, None, "firmware partition has size 0 (sized at run time)")
    return Firmware(rel, Partition("firmware", offset, size), end)

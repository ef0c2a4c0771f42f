"""The catalogue against an OpenWrt tree: compare entries with what the tree says, and update
data/devices.toml in place, keeping comments, aliases and hand-written fields.

Fields the tree owns (written from it): title, target, subtarget, arch_packages, soc,
image_size, kernel_size, blocksize, recipe, squashfs_block, firmware_partition,
device_packages, supported_devices and the tplink_* recipe parameters; flash_size only when
the entry has none (the DTS gives a lower bound, a datasheet the real size). Everything else
(profile, aliases, release, safeloader limits, initramfs names, comments) is left as it is.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import WolfError
from ..files import outputs
from ..units import kib, parse_size
from .devices import Device, device_from_dict
from .devtree import Subtarget, TreeDevice, TreeRead

# key order of a new entry; the tree owns all but profile/aliases/release
ORDER = ("profile", "aliases", "title", "release", "target", "subtarget", "arch_packages",
         "soc", "flash_size", "image_size", "kernel_size", "blocksize", "recipe",
         "squashfs_block", "sysupgrade", "firmware_partition")  # fmt: skip
TAIL = ("device_packages", "supported_devices")
SIZE_KEYS = ("flash_size", "image_size", "kernel_size", "blocksize", "squashfs_block")


class IntText(str):
    """An integer as the Makefile spells it (0x000dc88f, 3): written back unchanged."""

    def __int__(self) -> int:
        return int(self, 0)


def _hex_or_int(v: str) -> str:
    return IntText(v) if re.fullmatch(r"0x[0-9a-fA-F]+|0|[1-9]\d*", v) else v


def tree_fields(dev: TreeDevice | None, st: Subtarget) -> dict[str, Any]:
    """Catalogue values (as TOML would load them) the tree gives for one entry.
    dev is None for a subtarget without device profiles (malta): only its facts."""
    out: dict[str, Any] = {
        "target": st.target,
        "subtarget": st.subtarget,
        "arch_packages": st.arch_packages,
        "squashfs_block": kib(st.squashfs_block),
    }
    if dev is None:
        return out
    part = dev.firmware_partition
    out.update(
        title=dev.title,
        soc=dev.soc,
        image_size=dev.image_size_text or None,
        kernel_size=dev.kernel_size_text or None,
        blocksize=dev.blocksize_text or None,
        recipe=dev.recipe,
        sysupgrade=dev.sysupgrade if dev.recipe == "other" and dev.sysupgrade else None,
        firmware_partition=(
            {"name": "firmware", "offset": part.offset, "size": part.size} if part else None
        ),
        device_packages=list(dev.device_packages),
        supported_devices=list(dev.supported_devices),
    )
    out.update({k: _hex_or_int(v) for k, v in dev.tplink.items()})
    flash = dev.flash_size
    out["flash_size"] = f"{flash // 2**20}M" if flash and flash % 2**20 == 0 else None
    return out


# --- comparing ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Difference:
    profile: str
    field: str
    catalogue: str
    tree: str


@dataclass
class Comparison:
    matched: list[str] = field(default_factory=list)  # entries the tree agrees with entirely
    differences: list[Difference] = field(default_factory=list)
    absent: list[str] = field(default_factory=list)  # entries the tree has no device for


def _norm(key: str, value: Any) -> Any:
    if value is None or value == "":
        return None
    if isinstance(value, IntText):
        return int(value)
    if key in SIZE_KEYS:
        return parse_size(value, what=key)
    if key == "firmware_partition":
        v = value if isinstance(value, dict) else value.__dict__
        return (v["offset"], v["size"])
    if isinstance(value, list | tuple):
        return tuple(value)
    return value


def _show(key: str, value: Any) -> str:
    if value is None:
        return "–"
    if key in SIZE_KEYS:
        return kib(value)
    if key == "firmware_partition":
        return f"0x{value[0]:06x}+0x{value[1]:06x}"
    if isinstance(value, tuple):
        return " ".join(value) or "(none)"
    if isinstance(value, int) and key.startswith("tplink_"):
        return hex(value)
    return str(value)


def _catalogue_value(d: Device, key: str) -> Any:
    if key in d.extra:
        return d.extra[key]
    return getattr(d, key, None)


def find(read: TreeRead, d: Device) -> tuple[TreeDevice | None, Subtarget | None]:
    """The tree's device for a catalogue entry (by profile), or its subtarget when the entry
    is a board without flash profiles (malta)."""
    # a profile id is unique within a subtarget only (armsr's "generic" is in armv7 and armv8)
    same = [x for x in read.devices if x.profile == d.profile]
    dev = next((x for x in same if (x.target, x.subtarget) == (d.target, d.subtarget)),
               same[0] if same else None)  # fmt: skip
    if dev:
        return dev, read.subtarget(dev.target, dev.subtarget)
    st = read.subtarget(d.target, d.subtarget)
    if st is not None and st.profiles == 0 and d.image_size is None:
        return None, st
    return None, None


def compare(entries: list[Device], read: TreeRead) -> Comparison:
    out = Comparison()
    for d in entries:
        dev, st = find(read, d)
        if st is None:
            out.absent.append(d.profile)
            continue
        fields = tree_fields(dev, st)
        diffs = []
        for key, tree_value in fields.items():
            if key == "flash_size" and d.flash_size is None:
                continue  # hand-written field; only compared when the catalogue has it
            cat, tr = _norm(key, _catalogue_value(d, key)), _norm(key, tree_value)
            if key == "flash_size" and tr is None:
                continue
            if cat != tr:
                diffs.append(Difference(d.profile, key, _show(key, cat), _show(key, tr)))
        if diffs:
            out.differences += diffs
        else:
            out.matched.append(d.profile)
    return out


# --- writing --------------------------------------------------------------------------------


def toml_value(key: str, value: Any) -> str:
    if isinstance(value, IntText):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(key, v) for v in value) + "]"
    if isinstance(value, dict) and key == "firmware_partition":
        return (f'{{ name = {json.dumps(value["name"])}, offset = 0x{value["offset"]:06x}, '
                f'size = 0x{value["size"]:06x} }}')  # fmt: skip
    raise WolfError(f"cannot write {key} = {value!r} to devices.toml")


def _key_spans(lines: list[str]) -> dict[str, tuple[int, int]]:
    """key -> (first line, line after its value) inside one [[device]] block."""
    spans: dict[str, tuple[int, int]] = {}
    i = 0
    while i < len(lines):
        m = re.match(r"^([A-Za-z0-9_-]+)\s*=", lines[i])
        if not m:
            i += 1
            continue
        start = i
        depth = 0
        while True:
            bare = re.sub(r'"(?:[^"\\]|\\.)*"', "", lines[i]).split("#", 1)[0]
            depth += bare.count("[") + bare.count("{") - bare.count("]") - bare.count("}")
            i += 1
            if depth <= 0 or i >= len(lines):
                break
        spans[m.group(1)] = (start, i)
    return spans


def _same(key: str, old_text: str, new_value: Any) -> bool:
    try:
        old = tomllib.loads(old_text)[key]
    except (tomllib.TOMLDecodeError, KeyError):
        return False
    return bool(_norm(key, old) == _norm(key, new_value))


def update_block(lines: list[str], fields: dict[str, Any], has_flash: bool) -> list[str]:
    """Apply tree values to one [[device]] block's lines; untouched lines stay as they are."""
    out = list(lines)
    for key in (*ORDER, *sorted(k for k in fields if k.startswith("tplink_")), *TAIL):
        if key not in fields or (key == "flash_size" and has_flash):
            continue
        value = fields[key]
        spans = _key_spans(out)
        if key in spans:
            start, end = spans[key]
            if value is None:
                del out[start:end]
            elif not _same(key, "\n".join(out[start:end]), value):
                out[start:end] = [f"{key} = {toml_value(key, value)}"]
        elif value is not None:
            after = max((e for _, e in spans.values()), default=1)
            out.insert(after, f"{key} = {toml_value(key, value)}")
    return out


def new_block(profile: str, release: str, fields: dict[str, Any]) -> list[str]:
    values = {"profile": profile, "aliases": [], "release": release, **fields}
    keys = [*ORDER, *sorted(k for k in fields if k.startswith("tplink_")), *TAIL]
    return ["[[device]]"] + [
        f"{k} = {toml_value(k, values[k])}" for k in keys if values.get(k) is not None
    ]


@dataclass
class WriteReport:
    path: str
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    absent: list[str] = field(default_factory=list)


def _blocks(text: str) -> tuple[list[str], list[list[str]]]:
    head: list[str] = []
    blocks: list[list[str]] = []
    for line in text.split("\n"):
        if line.strip() == "[[device]]":
            blocks.append([line])
        elif blocks:
            blocks[-1].append(line)
        else:
            head.append(line)
    return head, blocks


def write(path: Path, read: TreeRead, release: str, add: Sequence[TreeDevice] = ()) -> WriteReport:
    """Update the release's entries in devices.toml from the tree; append `add` devices
    that have no entry yet. The file is checked by the catalogue loader before it is
    replaced (atomically)."""
    text = path.read_text(encoding="utf-8")
    head, blocks = _blocks(text)
    report = WriteReport(str(path))
    seen: set[str] = set()
    for n, block in enumerate(blocks):
        entry = tomllib.loads("\n".join(block))["device"][0]
        if str(entry.get("release")) != release:
            continue
        d = device_from_dict(entry, path.name)
        seen.add(d.profile)
        dev, st = find(read, d)
        if st is None:
            report.absent.append(d.profile)
            continue
        new = update_block(block, tree_fields(dev, st), has_flash=d.flash_size is not None)
        if new != block:
            blocks[n] = new
            report.updated.append(d.profile)
        else:
            report.unchanged.append(d.profile)
    for dev in add:
        if dev.profile in seen:
            continue
        st = read.subtarget(dev.target, dev.subtarget)
        assert st is not None
        if blocks and blocks[-1][-1].strip():
            blocks[-1].append("")
        blocks.append([*new_block(dev.profile, release, tree_fields(dev, st)), ""])
        report.added.append(dev.profile)
    new_text = "\n".join(head + [line for b in blocks for line in b])
    try:
        raw = tomllib.loads(new_text)
        for entry in raw.get("device", []):
            device_from_dict(entry, path.name)
    except tomllib.TOMLDecodeError as e:  # a bug of ours: never write a broken catalogue
        raise WolfError(f"refusing to write {path}: the updated text is not TOML ({e})") from None
    if new_text != text:
        outputs.write_text(path, new_text)
    return report

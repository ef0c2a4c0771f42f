"""What an ELF program needs to run: its interpreter (PT_INTERP) and the libraries it names
(DT_NEEDED), read with pyelftools as the dynamic loader would find them. The Wi-Fi guest
collects a program's libraries with it, the performance lab a benchmark's runtime."""

from __future__ import annotations

from pathlib import Path

from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.segments import InterpSegment


def needs(path: Path) -> tuple[str | None, list[str]]:
    """(PT_INTERP, DT_NEEDED) of an ELF file; elftools' ELFError when it is none."""
    with path.open("rb") as fh:
        elf = ELFFile(fh)
        interp = None
        for seg in elf.iter_segments():
            if isinstance(seg, InterpSegment):
                interp = seg.get_interp_name()
        needed = [
            str(t.needed)  # type: ignore[attr-defined]  # pyelftools sets it per DT_NEEDED
            for sec in elf.iter_sections()
            if isinstance(sec, DynamicSection)
            for t in sec.iter_tags()
            if t.entry.d_tag == "DT_NEEDED"
        ]
    return interp, needed

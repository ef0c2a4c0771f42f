"""What measure-memory prints: each boot's figures as it happens, the free-memory table."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from ..results.memory import BootMemory, MemoryResult


def progress(out: Console, boots: int, state: str) -> Any:
    def progress(b: BootMemory) -> None:
        t = {x["state"]: x["at"] for x in b.transitions}
        out.print(
            f"  boot {b.boot}/{boots}: MemFree {b.memfree_kb:,} kB, "
            f"MemAvailable {b.meminfo_kb.get('MemAvailable', 0):,} kB "
            f"({state} at {t.get(state, 0):.1f} s, read at {b.seconds_to_measurement:.1f} s)"
        )

    return progress


def table(out: Console, result: MemoryResult, boots: int) -> None:
    table = Table(title=f"free memory at idle after boot, kB ({boots} boots)")
    for col in ("field", "median", "min", "max"):
        table.add_column(col, justify="left" if col == "field" else "right")
    for name, s in result.summary.items():
        table.add_row(name, f"{s.median:,.0f}", f"{s.min:,}", f"{s.max:,}")
    out.print(table)

"""A victim folder outside the directory under test (issue 53, links): the oracle of every
planted-link test is its bytes and names before and after the run."""

from __future__ import annotations

from pathlib import Path

BYTES = "the victim's bytes\n"


def make(tmp_path: Path) -> Path:
    v = tmp_path / "outside"
    v.mkdir()
    (v / "secret").write_text(BYTES)
    return v


def unchanged(victim: Path) -> None:
    assert sorted(p.name for p in victim.iterdir()) == ["secret"]
    assert (victim / "secret").read_text() == BYTES

"""Text from files, images and the network made safe for each output, one function per
format (docs/threat-model.md "Reports and terminals"):

- ``printable``: terminals and log lines. Control characters (C0 but the newline where it is
  structure, DEL, C1, Unicode line separators and bidi overrides) become visible escapes
  (``\\x1b``), so a name cannot move the cursor, set the window title, open a hyperlink or
  hide text.
- ``markup``: text going into a rich string whose markup is on (``[/bold]`` in a name).
- ``markdown``: one line of Markdown inline text: HTML and Markdown syntax escaped, so a
  device name cannot start a heading, close a table cell or carry ``<script>``.
- ``csv_cell``: a spreadsheet cell: text starting with ``=``, ``+``, ``-``, ``@``, tab or CR
  gets a leading ``'`` (OWASP's CSV injection rule), so no formula runs. Numbers are written
  as numbers (a negative number stays a number); a number that arrives as text is guarded.
- ``json_text``: JSON that never holds a bare NaN or Infinity (invalid JSON).
HTML is escaped by jinja2's autoescape in the templates.
"""

from __future__ import annotations

import json
import re
from typing import Any

from rich.markup import escape as _rich_escape

from ..errors import WolfError

# C0 but tab and newline, DEL, C1, the Unicode line/paragraph separators and the bidi
# embeddings, overrides and isolates (they reorder what a terminal or an editor shows)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_CONTROL_NL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _visible(m: re.Match[str]) -> str:
    c = m.group()
    if c == "\n":
        return "\\n"
    if c == "\r":
        return "\\r"
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"


def printable(text: str, *, newlines: bool = True) -> str:
    """``text`` with control characters shown as escapes; ``newlines=False`` escapes the
    newline too (one log line, one table cell)."""
    return (_CONTROL if newlines else _CONTROL_NL).sub(_visible, text)


def markup(text: str) -> str:
    """Text for a rich string with markup on: printable, its ``[`` escaped."""
    return _rich_escape(printable(text, newlines=False))


# CommonMark: every ASCII punctuation character may be backslash-escaped. These ones start
# or end inline syntax (emphasis, code, links, HTML, autolinks, entities, tables); "_"
# between two letters or digits cannot (mips_24kc stays as it is).
_MD_INLINE = re.compile(r"([\\`*\[\]<>|&#~!]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")
# and these start a block when they open the line (list items, quotes, headings, breaks)
_MD_BLOCK = re.compile(r"^(\s*)(\d*)([-+=>:.)])")


def markdown_cell(text: str) -> str:
    """Markdown inline text (a table cell, the rest of a line we started): renders as the
    literal ``text``, on one line, with no HTML, link, emphasis or cell boundary in it."""
    return _MD_INLINE.sub(r"\\\1", printable(text, newlines=False))


def markdown(text: str) -> str:
    """A line of Markdown that renders as the literal ``text``: also no list item, quote,
    heading or break where the line begins."""
    return _MD_BLOCK.sub(r"\1\2\\\3", markdown_cell(text))


_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(v: object) -> object:
    """A CSV cell: None is empty, numbers stay numbers, text is printable and cannot start a
    formula (a leading ' is added, as OWASP's rule says)."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int | float):
        return v
    text = str(v)
    if text.startswith(_FORMULA):
        text = "'" + text
    return printable(text, newlines=False)


def json_text(doc: Any, what: str = "report") -> str:
    """Indented JSON; a NaN or Infinity (which JSON cannot hold) is an error, not output."""
    try:
        return json.dumps(doc, indent=2, allow_nan=False) + "\n"
    except ValueError:
        raise WolfError(
            f"the {what} holds a number JSON cannot carry (NaN or infinity); not written",
            hint="re-run the measurement that produced it",
        ) from None

"""Read the HTML report back with the standard library's parser: per table id, per row id,
the data-value of each figure cell (what a reader's browser shows is checked in
test_html_chromium.py)."""

from __future__ import annotations

from html.parser import HTMLParser


class Tables(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, dict[str, list[str]]] = {}
        self.matrix: list[str] = []  # device profiles in row order
        self._table: str | None = None
        self._row: str | None = None
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table":
            self._table = a.get("id")
        elif tag == "tr" and self._table:
            self._row = a.get("data-row")
        elif tag == "td" and self._table and self._row and "num" in (a.get("class") or ""):
            self.tables.setdefault(self._table, {}).setdefault(self._row, []).append(
                a.get("data-value") or ""
            )
        elif (
            tag == "td"
            and self._table == "fits-matrix"
            and a.get("data-value")
            and not (a.get("class"))
        ):
            self.matrix.append(a["data-value"] or "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._table = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(html: str) -> Tables:
    t = Tables()
    t.feed(html)
    return t

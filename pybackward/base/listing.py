"""Small pieces of the text both IRs' summaries print: byte counts and name rows."""
from __future__ import annotations

from typing import Iterable, Protocol


class Row(Protocol):
    name: str

    def text(self) -> str: ...


def human_bytes(n: float) -> str:
    """`196 B`, `1.5 KiB`, `3.2 MiB`, ... (GiB at most)."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{int(n)} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # pragma: no cover


def name_rows(items: list[Row], max_rows: int) -> Iterable[str]:
    """One line per item, names aligned (`  x  float32[-1, 4]`), at most `max_rows` and a line for the rest."""
    width = max((len(v.name) for v in items[:max_rows]), default=0)
    for v in items[:max_rows]:
        yield f"  {v.name:<{width}}  {v.text()}"
    if len(items) > max_rows:
        yield f"  ... and {len(items) - max_rows} more"

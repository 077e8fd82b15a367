"""Markdown tables for the reports: one formatting of numbers, one layout.

>>> print(md_table(["unit", "LUT", "MHz"], [["mpu", 22561, "96.66"], ["pe", None, 120.4]]))
| unit | LUT | MHz |
|---|---:|---:|
| mpu | 22,561 | 96.66 |
| pe | – | 120 |

Floats are rounded to ``digits`` (default 0) decimals; a figure that needs its own precision
is passed formatted, as a string.
"""

from __future__ import annotations

__all__ = ["cell", "md_table", "tool_seconds"]


def cell(v, digits: int | None = 0) -> str:
    """A table cell: thousands separators, floats to ``digits`` decimals (``None``: as Python
    writes them), ``None`` as ``–``, strings as given."""
    if v is None:
        return "–"
    if isinstance(v, bool) or isinstance(v, str):
        return str(v)
    if isinstance(v, float):
        return str(v) if digits is None else f"{v:,.{digits}f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def md_table(head, rows, left: int = 1, digits: int | None = 0, align: str | None = None) -> str:
    """A Markdown table; the first ``left`` columns are left-aligned, the rest right-aligned
    (numbers), or each column as ``align`` says (``l`` left, ``r`` right, one letter a column);
    every cell through :func:`cell`."""
    if align is None:
        align = "l" * left + "r" * (len(head) - left)
    if len(align) != len(head) or set(align) - {"l", "r"}:
        raise ValueError(f"align must be one l or r per column ({len(head)}), not {align!r}")
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join("---" if a == "l" else "---:" for a in align) + "|"]
    lines += ["| " + " | ".join(cell(c, digits) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def tool_seconds(run: dict) -> str:
    """A tool run's wall seconds as a cell; ``*`` marks a result reused from an earlier
    identical run (``run["reused"]``)."""
    s = run.get("seconds")
    return "–" if s is None else f"{s:,.0f}" + ("*" if run.get("reused") else "")

"""The report page's HTML pieces: tables of figures, folded rows and the page's style.

Kept apart from :mod:`.report` (which decides what the page says) so that the
page's content and its markup change separately.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

TABLE_ROWS = 50


def _pd() -> Any:
    import pandas as pd  # type: ignore[import-untyped,import-not-found,unused-ignore]

    return pd


def money(v: float) -> str:
    """USD as people write it: ``$1,234``, ``-$679`` (whole dollars; cents only under a dollar).

    Rounded first, then written: ``$0.996`` is ``$1`` (not ``$1.00``), an amount under half a cent
    ``$0`` (not ``$0.00``, and never ``-$0``)."""
    a = abs(float(v))
    cents = round(a, 2)
    text = f"${a:,.0f}" if cents >= 1 else f"${cents:.2f}" if cents else "$0"
    return f"-{text}" if v < 0 and text != "$0" else text


def plural(n: int, one: str, many: str = "") -> str:
    """``1 cluster``, ``2 clusters`` (``many``: the plural when it is not ``one`` + s)."""
    return f"{n:,} {one if n == 1 else many or one + 's'}"


def image(name: str | None, alt: str) -> str:
    """A plot, or a note where there was nothing to plot (no unit it would show was evaluated)."""
    if name is None:
        return f'<p class="note">No plot of the {html.escape(alt)}: nothing evaluated to show.</p>'
    return f'<img src="{html.escape(name)}" alt="{html.escape(alt)}">'


def number(v: float) -> str:
    """A count as an integer (``12``, not ``12.00``); other figures with at most two decimals."""
    f = float(v)
    if f.is_integer():
        return f"{int(f):,}"
    return f"{f:,.2f}".rstrip("0").rstrip(".")


def folded(summary: str, body: str) -> str:
    """Rows most readers skip (not applicable), one click away."""
    return f"<details><summary>{html.escape(summary)}</summary>{body}</details>"


def _cell(v: Any, is_money: bool = False) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return "\u2014"  # no figure: not applicable or unknown
    if isinstance(v, bool):
        return "yes" if v else ""
    if is_money and isinstance(v, int | float):
        return money(v)
    if isinstance(v, int | float):
        return number(v)
    return html.escape(str(v))


def table(frame: Any, columns: Sequence[str], limit: int = TABLE_ROWS, cls: str = "") -> str:
    """An HTML table of the first ``limit`` rows (numbers right-aligned); nothing for no rows."""
    if not len(frame):
        return ""
    head = "".join(f"<th>{html.escape(c.replace('_', ' '))}</th>" for c in columns)  # spaces: headers wrap
    body = []
    for rec in frame[list(columns)].head(limit).to_dict("records"):
        cells = []
        for c in columns:
            v = rec[c]
            v = v.item() if hasattr(v, "item") else v  # numpy scalars to Python
            v = None if v is _pd().NA else v
            num = isinstance(v, int | float) and not isinstance(v, bool)
            if num:
                cells.append(f'<td class="num">{_cell(v, "cost" in c or "saved" in c)}</td>')
            else:  # names stay on one line; long texts (a reason) wrap
                cells.append(
                    f'<td class="wrap">{_cell(v)}</td>' if len(str(v)) > 40 else f"<td>{_cell(v)}</td>"
                )
        body.append("<tr>" + "".join(cells) + "</tr>")
    more = len(frame) - limit
    note = f'<p class="note">{more:,} more rows in the Parquet table.</p>' if more > 0 else ""
    table = f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
    return f'<div class="scroll">{table}</div>{note}'


_CSS = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1150px;color:#222}
h1{font-size:1.6em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0}th,td{padding:.2em .6em;border-bottom:1px solid #eee}
th{text-align:left;background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}
img{max-width:100%;border:1px solid #eee}p.big{font-size:1.25em;line-height:1.5}
details{margin:.5em 0}summary{cursor:pointer;color:#444}.note{color:#666;font-size:.85em}.scroll{overflow-x:auto}
th{vertical-align:bottom;min-width:4em}td{white-space:nowrap}td.wrap{white-space:normal;min-width:20em;overflow-wrap:anywhere}
"""

"""The report page's markdown, as HTML: pipe tables become tables, `#` lines headings, other lines paragraphs.

Eval reports (`results.md`, `compare.md`) are written by `memora_rl.evaluation.report` as a title,
pipe tables and short notes, nothing else; this renders exactly that much, so the page needs no
markdown dependency. Every piece of text is HTML-escaped; the result is `Markup` for Jinja.
"""

from __future__ import annotations

import re

from markupsafe import Markup, escape

CELL_SPLIT = re.compile(r"(?<!\\)\|")
"""A cell border: a pipe not escaped by a backslash."""
RULE_CELL = re.compile(r"^\s*(:?)-+(:?)\s*$")
"""One cell of a table's header rule (`---`, `:---`, `---:`, `:---:`), capturing the alignment colons."""
NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)(e[+-]?\d+)?%?$", re.IGNORECASE)
"""A cell that holds one number (right-aligned, so digits line up)."""
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
"""An ATX heading line: its level and its text."""
HEADING_BASE = 3
"""Level of a report's top heading on the page (h1 and h2 are the page's and the run's titles)."""


def split_row(line: str) -> list[str]:
    r"""The cells of one pipe-table line, stripped (leading and trailing pipes optional, `\|` is a pipe).

    >>> split_row("| a | b \\| c |  |")
    ['a', 'b | c', '']
    """
    text = line.strip()
    if text.startswith("|"):
        text = text[1:]
    if text.endswith("|") and not text.endswith("\\|"):
        text = text[:-1]
    return [cell.strip().replace("\\|", "|") for cell in CELL_SPLIT.split(text)]


def rule_alignments(line: str) -> list[str] | None:
    """The column alignments a header rule line sets ('' = default), or None when the line is not a rule.

    >>> rule_alignments("|---|:--:|---:|")
    ['', 'center', 'right']
    >>> rule_alignments("| a | b |") is None
    True
    """
    cells = split_row(line)
    matches = [RULE_CELL.match(cell) for cell in cells]
    if not cells or not all(matches):
        return None
    names = {(":", ":"): "center", (":", ""): "left", ("", ":"): "right", ("", ""): ""}
    return [names[(match.group(1), match.group(2))] for match in matches if match]


PLACEHOLDERS = ("-", "")
"""Cells that stand for no value (the report writes `-`); they do not stop a column from being numeric."""


def numeric_columns(rows: list[list[str]], width: int) -> list[bool]:
    """Which columns hold only numbers (or placeholders) in every body row, and at least one number.

    >>> numeric_columns([["a", "1", "-"], ["b", "-", "-"]], 3)
    [False, True, False]
    """
    columns = [[row[i] if i < len(row) else "" for row in rows] for i in range(width)]
    return [
        any(NUMBER.match(cell) for cell in column)
        and all(cell in PLACEHOLDERS or NUMBER.match(cell) for cell in column)
        for column in columns
    ]


def _cell(tag: str, text: str, align: str, numeric: bool) -> str:
    """One escaped table cell: the rule's alignment, else right-aligned in a numeric column (digits line up)."""
    if align:
        return f'<{tag} style="text-align: {align}">{escape(text)}</{tag}>'
    return f'<{tag} class="num">{escape(text)}</{tag}>' if numeric else f"<{tag}>{escape(text)}</{tag}>"


def table_html(lines: list[str]) -> str:
    r"""An HTML table of pipe-table lines: the first is the header, the second the rule, the rest the body.

    A body row with fewer cells than the header is padded with empty cells; extra cells are kept.

    >>> print(table_html(["| run | F1 |", "|---|---|", "| a<b | 0.5 |", "| c | - |"]).replace("<tr>", "\n<tr>"))
    <table class="report-table"><thead>
    <tr><th>run</th><th class="num">F1</th></tr></thead><tbody>
    <tr><td>a&lt;b</td><td class="num">0.5</td></tr>
    <tr><td>c</td><td class="num">-</td></tr></tbody></table>
    """
    header = split_row(lines[0])
    body = [split_row(line) for line in lines[2:]]
    width = max([len(header), *(len(cells) for cells in body)])
    alignments = (rule_alignments(lines[1]) or []) + [""] * width
    numeric = numeric_columns(body, width)

    def row(cells: list[str], tag: str) -> str:
        cells = cells + [""] * (len(header) - len(cells))
        return "<tr>" + "".join(_cell(tag, text, alignments[i], numeric[i]) for i, text in enumerate(cells)) + "</tr>"

    rows = "".join(row(cells, "td") for cells in body)
    return f'<table class="report-table"><thead>{row(header, "th")}</thead><tbody>{rows}</tbody></table>'


def _blocks(lines: list[str]) -> list[tuple[str, list[str]]]:
    """The text cut into blocks: ("table", rows), ("heading", [line]) or ("paragraph", lines); blank lines end one."""
    blocks: list[tuple[str, list[str]]] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        if not line.strip():
            index += 1
        elif line.lstrip().startswith("|") and index + 1 < len(lines) and rule_alignments(lines[index + 1]):
            end = index + 2
            while end < len(lines) and lines[end].lstrip().startswith("|"):
                end += 1
            blocks.append(("table", lines[index:end]))
            index = end
        elif HEADING.match(line.strip()):
            blocks.append(("heading", [line.strip()]))
            index += 1
        else:
            if not blocks or blocks[-1][0] != "paragraph" or not lines[index - 1].strip():
                blocks.append(("paragraph", []))
            blocks[-1][1].append(line.strip())
            index += 1
    return blocks


def report_html(text: str) -> Markup:
    r"""A report's markdown as HTML: pipe tables as tables, headings as h3-h6, other text as paragraphs.

    The report's top heading level (`###` in `results.md`) becomes h3, deeper ones follow it.

    >>> print(report_html("### heuristic\n\n| a |\n|---|\n| 1 |\n\nPer category:\nrun A").replace("<tbody>", "\n"))
    <h3>heuristic</h3>
    <table class="report-table"><thead><tr><th class="num">a</th></tr></thead>
    <tr><td class="num">1</td></tr></tbody></table>
    <p>Per category: run A</p>
    """
    blocks = _blocks(text.splitlines())
    levels = [len(match.group(1)) for kind, lines in blocks if kind == "heading" and (match := HEADING.match(lines[0]))]
    top = min(levels, default=1)
    parts = []
    for kind, lines in blocks:
        if kind == "table":
            parts.append(table_html(lines))
        elif kind == "heading":
            match = HEADING.match(lines[0])
            level = min(6, HEADING_BASE + len(match.group(1)) - top) if match else HEADING_BASE
            parts.append(f"<h{level}>{escape(match.group(2) if match else lines[0])}</h{level}>")
        else:
            parts.append(f"<p>{escape(' '.join(lines))}</p>")
    return Markup("\n".join(parts))

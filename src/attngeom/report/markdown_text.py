"""Text in REPORT.md: any value quoted literally (text, a code span), and paragraphs wrapped for a terminal.

CommonMark and GitHub's tables give most ASCII punctuation a meaning; everything the report shows passes
through these so that a hostile input reads as what it is, on the lines it was given.
"""

from __future__ import annotations

import re

_BREAKS = "\n\r\t\v\f\x1c\x1d\x1e\x85\u2028\u2029"  # what ends a line (str.splitlines), and tabs
_ONE_LINE = str.maketrans(dict.fromkeys(_BREAKS, " "))
# CommonMark 2.4: a backslash before any ASCII punctuation makes it the literal character. These can
# open inline structure or HTML mid-line (code, emphasis, links, raw HTML, entities, GFM cells,
# strikethrough, GitHub math); block structure starts only a line, and values never do.
_TEXT = str.maketrans({c: "\\" + c for c in "\\`*_[]<>|~&$"} | dict.fromkeys(_BREAKS, " "))


def md_text(value: object) -> str:
    """`value` as literal Markdown text on one line, safe in a paragraph, a list item or a table cell."""
    return str(value).translate(_TEXT)


def md_code(value: object, cell: bool = False) -> str:
    """`value` as a code span on one line (in a table `cell`, with `|` as `\\|`).

    CommonMark 6.1: a span's fence is a backtick run that the content does not hold, so one longer than
    its longest; one space is stripped from each end when both ends are spaces, hence the padding.
    GFM tables split cells on `|` even inside code spans, and unescape `\\|` before the span is parsed.
    """
    text = str(value).translate(_ONE_LINE) or " "
    text = text.replace("|", "\\|") if cell else text
    fence = "`" * (1 + max(map(len, re.findall("`+", text)), default=0))
    pad = " " if text.strip(" ") and (text[0] in "` " or text[-1] in "` ") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


WIDTH = 110  # a paragraph's lines, wrapped: read in a terminal and in a diff (tables stay within LONGEST)
LONGEST = 160  # no line of REPORT.md is longer (a test checks it)


class Code(str):
    """A piece of a paragraph shown as a code span (`md_code`), never broken across lines."""


_OPENS_BLOCK = tuple(
    (re.compile(pattern), escaped)
    for pattern, escaped in (
        (r"^([-+])(?= |$)", r"\\\1"),  # a bullet list item
        (r"^([-=])(?=[-= ]*$)", r"\\\1"),  # a setext underline or a thematic break
        (r"^(#)(?=#{0,5}( |$))", r"\\\1"),  # an ATX heading
        (r"^(\d{1,9})([.)])(?= |$)", r"\1\\\2"),  # an ordered list item
    )
)
"""What would open a block at a line's start (CommonMark 4 and 5; md_text escapes the other openers), and its escape."""


def md_wrap(pieces: list[str], lead: str = "", rest: str = "", width: int = WIDTH) -> list[str]:
    """A paragraph of literal text and `Code` pieces in lines of about `width` characters, the first opened
    by `lead`, the others by `rest`: rendered, it reads as the pieces joined, whatever they hold.

    Text is escaped (`md_text`) and broken only at a single space between two words outside a code span,
    so no line starts or ends with a space (two at an end would be a hard break) and no code span is
    broken; a line that would open a block has that character escaped (CommonMark 2.4).
    """
    text, zones = "", []
    for piece in pieces:
        if isinstance(piece, Code):
            part = md_code(piece)
            zones.append((len(text), len(text) + len(part)))
        else:
            part = md_text(piece)
            part = part.lstrip(" ") if not text else part  # a paragraph starts and ends with no space
        text += part
    text = text.rstrip(" ")  # a code span ends with its fence: only text is stripped
    coded = set().union(*(range(a, b) for a, b in zones)) if zones else set()
    breaks = [
        i for i in range(1, len(text) - 1) if text[i] == " " and text[i - 1] != " " != text[i + 1] and i not in coded
    ]
    lines, start = [], 0
    while len(text) - start > width:
        fits = [i for i in breaks if start < i <= start + width]
        cut = fits[-1] if fits else next((i for i in breaks if i > start), None)
        if cut is None:
            break
        lines.append(text[start:cut])
        start = cut + 1
    lines.append(text[start:])
    for pattern, escaped in _OPENS_BLOCK:
        lines = [pattern.sub(escaped, line) for line in lines]
    return [(rest if i else lead) + line for i, line in enumerate(lines) if line]

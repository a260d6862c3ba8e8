"""Text on the report page: escaped, wrapping only where a reader expects, the posts' LaTeX made readable.

Every value on the page passes through one of these (html.escape underneath), so a hostile input reads as
literal text.
"""

from __future__ import annotations

import re
from html import escape

# The posts' inline LaTeX, as text a reader can read without a math font or script.
_LATEX = {
    r"\,": "\u2009",
    r"\;": " ",
    r"\!": "",
    r"\cdot": "·",
    r"\times": "×",
    r"\epsilon": "ε",
    r"\varepsilon": "ε",
    r"\kappa": "κ",
    r"\theta": "θ",
    r"\pi": "π",
    r"\infty": "∞",
    r"\le": "≤",
    r"\ge": "≥",
    r"\approx": "≈",
    r"\to": "→",
    r"\sum": "Σ",
    r"\sqrt": "√",
    r"\|": "‖",
}
_LATEX_RE = re.compile("|".join(re.escape(k) + (r"(?![a-zA-Z])" if k[1:].isalpha() else "") for k in _LATEX))


def esc(value: object) -> str:
    """`value` as escaped text (None as nothing)."""
    return escape("" if value is None else str(value))


def breakable(value: object) -> str:
    """Escaped text that may wrap only after a dot or an underscore (claim ids, function names)."""
    return re.sub(r"([._])", r"\1<wbr>", esc(value))


def number_text(value: object) -> str:
    """An escaped value that never wraps between a sign (±, =, ≤, <) and its number."""
    return re.sub(r"(±|=|≤|≥|&lt;|&gt;) ", r"\1&nbsp;", esc(value))


def claim_link(cid: object) -> str:
    """A claim's id as code, linked to its row of the claims table."""
    return f'<a href="#claim-{esc(cid)}"><code>{breakable(cid)}</code></a>'


def math_text(value) -> str:
    """Escaped text with inline LaTeX ($1/t$, u \\cdot k, x^2) rendered as readable HTML."""
    text = re.sub(r"\$([^$]+)\$", r"\1", "" if value is None else str(value))
    text = re.sub(r"\\(?:mathrm|text|operatorname)\{([^}]*)\}", r"\1", text)
    text = re.sub(r"\\frac\{([^}]*)\}\{([^}]*)\}", r"(\1)/(\2)", text)
    text = escape(_LATEX_RE.sub(lambda m: _LATEX[m.group(0)], text))
    text = re.sub(r"\^\{([^}]*)\}|\^([\w.]+)", lambda m: f"<sup>{m.group(1) or m.group(2)}</sup>", text)
    return re.sub(r"_\{([^}]*)\}", r"<sub>\1</sub>", text)

"""REPORT.md's text: every value renders as itself, and a wrapped paragraph as its pieces."""

from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from attngeom.report import markdown_text as report

RENDER = MarkdownIt("commonmark").enable("table")  # raw HTML passes, as on GitHub before its sanitiser


def _rendered(markdown: str) -> tuple[str, list[str]]:
    """The one paragraph's (or one table cell's) plain text and code spans."""
    tokens = RENDER.parse(markdown)
    inline = [t for t in tokens if t.type == "inline"][-1].children
    assert {t.type for t in inline} <= {"text", "code_inline"}, [t.type for t in inline]
    return "".join(t.content for t in inline if t.type == "text"), [
        t.content for t in inline if t.type == "code_inline"
    ]


def _as_rendered(value: str) -> str:
    """`value` with line breaks and tabs as spaces, and NUL as U+FFFD (CommonMark 2.3)."""
    return value.translate(str.maketrans(dict.fromkeys("\n\r\t\v\f\x1c\x1d\x1e\x85\u2028\u2029", " "))).replace(
        "\0", "\ufffd"
    )


@given(st.text())
@settings(max_examples=300, deadline=None)
def test_md_text_renders_as_the_literal_value(value: str):
    assert "\n" not in report.md_text(value) and "\r" not in report.md_text(value)
    assert _rendered(f"A{report.md_text(value)}Z") == (f"A{_as_rendered(value)}Z", [])
    assert _rendered(f"| h |\n| --- |\n| A{report.md_text(value)}Z |") == (f"A{_as_rendered(value)}Z", [])


@given(st.text(min_size=1))
@settings(max_examples=300, deadline=None)
def test_md_code_round_trips(value: str):
    assert _rendered(f"A {report.md_code(value)} Z") == ("A  Z", [_as_rendered(value)])
    assert _rendered(f"| h |\n| --- |\n| A {report.md_code(value, cell=True)} Z |") == ("A  Z", [_as_rendered(value)])


_WORDS = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60)


@given(st.lists(st.tuples(st.booleans(), _WORDS), min_size=1, max_size=6))
@settings(max_examples=400, deadline=None)
def test_a_wrapped_paragraph_renders_as_its_pieces_whatever_they_hold(drawn):
    """md_wrap's lines, however they break, render as one paragraph whose text is the pieces' text (each line
    break read as the space it replaced) with every code span whole: no line opens a block, starts or ends
    with a space, or ends in a hard break."""
    pieces = []
    for code, text in drawn:  # two code spans side by side would read as one: the report parts them with text
        last = next((q for q in reversed(pieces) if q), "")
        code = code and text.strip() and not isinstance(last, report.Code)
        pieces.append(report.Code(text) if code else text)
    lines = report.md_wrap(pieces, width=12)
    assert all(line == line.strip(" ") for line in lines)
    said = "".join(f"\0{_as_rendered(p)}\0" if isinstance(p, report.Code) else _as_rendered(p) for p in pieces)
    if not said.strip():  # nothing but (Unicode) white space: no paragraph to read
        return
    tokens = RENDER.parse("\n".join(lines))
    assert [t.type for t in tokens] == ["paragraph_open", "inline", "paragraph_close"], lines
    rendered = "".join(
        f"\0{t.content}\0" if t.type == "code_inline" else " " if t.type == "softbreak" else t.content
        for t in tokens[1].children
    )
    assert rendered.strip() == said.strip(), lines  # a renderer may trim Unicode white space at a paragraph's ends

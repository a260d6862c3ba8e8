"""Text on the report page: escaped, wrapping where a reader expects, the posts' LaTeX readable."""

from attngeom.report import html_text


def test_inline_latex_reads_as_text():
    assert html_text.math_text("the $1/t$ correction") == "the 1/t correction"
    rendered = html_text.math_text(r"2\,(u \cdot k)\,((u \cdot k)^2 + b)/t")
    assert rendered == "2\u2009(u · k)\u2009((u · k)<sup>2</sup> + b)/t"
    assert html_text.math_text(r"$\epsilon < 1$ & $x^{n+1}$") == "ε &lt; 1 &amp; x<sup>n+1</sup>"


def test_ids_wrap_only_at_dots_and_underscores_and_a_sign_stays_with_its_number():
    assert html_text.breakable("scale.yat_b.0.5x") == "scale.<wbr>yat_<wbr>b.<wbr>0.<wbr>5x"
    assert html_text.breakable("<b>") == "&lt;b&gt;"
    assert html_text.number_text("0.121 ± 0.0005") == "0.121 ±&nbsp;0.0005"
    assert html_text.number_text("≤ 1e-09") == "≤&nbsp;1e-09" and html_text.number_text("< 4") == "&lt;&nbsp;4"
    assert html_text.claim_link("a.b") == '<a href="#claim-a.b"><code>a.<wbr>b</code></a>'
    assert html_text.esc(None) == "" and html_text.esc("<&>") == "&lt;&amp;&gt;"

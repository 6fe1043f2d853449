"""The site's page-weight rewrites (tools/sphinx_local/page_weight.py), on made-up pages;
tests/browser/test_site.py weighs the built pages (each chapter and the median)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools" / "sphinx_local"))
import page_weight  # noqa: E402

SHAPES = {("fas", "sun"): (512, 512, "M1 2"), ("fab", "github"): (496, 512, "M3 4")}


def test_icons_become_inline_svg_with_their_classes_and_attributes():
    page = (
        '<i class="theme-switch fa-solid fa-sun fa-lg" data-mode="light"></i>'
        '<span class="fab fa-github"></span><i class="fa-solid fa-unknown"></i>'
    )
    out = page_weight.inline_icons(page, SHAPES)
    assert '<svg class="svg-inline--fa theme-switch fa-sun fa-lg" data-mode="light"' in out
    assert 'viewBox="0 0 512 512"><path fill="currentColor" d="M1 2">' in out
    assert 'data-prefix="fab" data-icon="github"' in out and 'viewBox="0 0 496 512"' in out
    assert '<i class="fa-solid fa-unknown"></i>' in out  # not found: left as it was


def test_the_theme_script_has_the_icons_the_theme_uses():
    import pydata_sphinx_theme

    script = (
        Path(pydata_sphinx_theme.__file__).parent
        / "theme/pydata_sphinx_theme/static/scripts/fontawesome.js"
    )
    shapes = page_weight.icon_shapes(script)
    for icon in ("bars", "magnifying-glass", "sun", "moon", "circle-half-stroke", "list"):
        assert ("fas", icon) in shapes, icon
    assert ("fab", "github") in shapes
    assert shapes["fas", "sun"] != shapes.get(("far", "sun")), "solid and regular told apart"


def test_mathjax_only_where_there_is_maths():
    assert page_weight.has_maths('<span class="math notranslate nohighlight">\\(x\\)</span>')
    assert page_weight.has_maths('<div class="output">$$x^2$$</div>')
    assert not page_weight.has_maths("<p>no maths, 5 $ and a price</p>")


def test_one_current_explorer_script_after_the_last_explorer():
    old = f"<script>{page_weight.EXPLORER_MARK} old copy */</script>"
    body = f'<div class="norms-explorer"></div>{old}<p>x</p><div class="norms-explorer"></div>{old}'
    out = page_weight.one_explorer_script(body)
    assert "old copy" not in out
    assert out.count(page_weight.EXPLORER_MARK) == 1
    assert out.endswith(f"<script>{page_weight.explorer_script()}</script>")
    assert page_weight.one_explorer_script("<p>no explorer</p>") == "<p>no explorer</p>"


def test_large_explorer_data_moves_to_a_file():
    big = '{"x": "' + "a" * (page_weight.INLINE_DATA_BYTES + 1) + '"}'
    body = (
        f'<div class="norms-explorer" id="a" data-kind="k"><script type="application/json">{big}'
        '</script></div><div class="norms-explorer" id="b" data-kind="k">'
        '<script type="application/json">{"small": 1}</script></div>'
    )
    written = {}
    out = page_weight.external_explorer_data(body, written.__setitem__, lambda n: f"../_x/{n}")
    ((name, text),) = written.items()
    assert text == big
    assert f'<script type="application/json" data-src="../_x/{name}"></script>' in out
    assert '{"small": 1}' in out


def test_the_quiz_library_comes_once():
    def quiz(n):
        return (
            f'<script type="application/javascript">{page_weight.QUIZ_MARK} score.js */'
            f"\nvar questions{n}=[];\n{page_weight.QUIZ_LIBRARY}\nfunction lib() {{}}\n"
            f"{page_weight.QUIZ_SHOW} */\nfunction try_show() {{ show{n}(); }}\n}}\n</script>"
        )

    out = page_weight.one_quiz_library(quiz(1) + "<p>text</p>" + quiz(2))
    assert out.count("function lib()") == 1 and out.count("score.js") == 1
    second = out.split("<p>text</p>")[1]
    assert "var questions2=[];" in second and "show2();" in second
    assert second.count("{") == second.count("}"), "the second script's blocks are balanced"


def test_the_icon_fonts_keep_what_the_stylesheets_draw():
    css = (
        '.fa-bell:before{content:"\\f0f3"}.fa-a:before,.fa-b:before{content:"\\f111"}'
        ':root{--pst-icon-bell:"\uf0f3";--x:"\uf107"}.dropdown:after{content:"\\f303"}'
    )
    assert page_weight.stylesheet_icons(css) == {0xF0F3, 0xF107, 0xF303}


def test_the_icon_fonts_are_cut_down(tmp_path):
    import shutil

    import pydata_sphinx_theme

    theme = Path(pydata_sphinx_theme.__file__).parent / "theme/pydata_sphinx_theme/static"
    fonts = tmp_path / page_weight.FONTS
    fonts.mkdir(parents=True)
    for name, _, _ in page_weight.FONT_FILES:
        shutil.copy(theme / "vendor/fontawesome/webfonts" / f"{name}.ttf", fonts)
    rules = page_weight.icon_fonts_css({0xF0F3, 0xF107}, tmp_path)
    assert rules.count("@font-face") == 3 and '"Font Awesome 6 Free"' in rules
    solid = tmp_path / "_static" / page_weight.ICONS / "fa-solid-900.woff"
    assert solid.stat().st_size < 10_000 < (fonts / "fa-solid-900.ttf").stat().st_size


def test_the_search_index_is_left_to_the_search_page():
    tools = '<script src="../_static/searchtools.js"></script>'
    head = tools + '\n<script src="../searchindex.js"></script>'
    assert (
        page_weight._SEARCH_INDEX.sub("", head)
        == '<script src="../_static/searchtools.js"></script>'
    )

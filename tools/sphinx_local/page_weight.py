"""Sphinx extension: keep every page light.

* The ipywidgets HTML manager (require.js + embed-amd.js, 3.5 MB) and the widget
  state only go into pages that show a widget view. myst-nb adds them with
  ``app.add_js_file`` while writing a widget page, which also puts them into every
  page written after it; this takes them out again wherever the page body has no
  widget view. The book's explorers show their ``text/html`` version on the site
  (``nb_mime_priority_overrides`` in ``_config.yml``), so they need none of it.
* Images load when they are about to be shown (``loading="lazy"``) and are decoded
  off the main thread.
* Font Awesome: the theme's ``fontawesome.js`` (1.5 MB, every icon there is) turns each
  ``<i class="fa-solid fa-sun">`` into an SVG in the browser. Here each icon a page uses
  becomes that same inline SVG when the page is written (the icons' shapes are read from
  the theme's own copy of the script), and the script is no longer loaded.
* The theme's own stylesheets still draw a few icons with Font Awesome's fonts (an
  admonition's bell, a dropdown's arrow): 156 kB for the solid font alone. Those fonts
  are cut down to the icons the stylesheets use (``_static/icons/``, WOFF) and declared
  after the theme's, so the full fonts are no longer loaded.
* The search index (``searchindex.js``, 35 kB compressed) only on the search page: the
  theme loads it on every page for a search-as-you-type that the book switches off
  (the search box sends the reader to the search page).
* MathJax (its script and its configuration) only on a page with maths: myst-nb asks
  Sphinx to put it on every page.
* An explorer's script (``norms/explore/web/explorer.js``, inlined in every explorer's
  stored output) is on a page once, after the last explorer, and is the current one;
  an explorer's data larger than ``INLINE_DATA_BYTES`` moves to ``_explorers/<hash>.json``,
  which the explorer fetches when it comes near the screen.
* A quiz's script is jupyterquiz's library with the quiz's questions (norms.quiz.rendering):
  on a page with several quizzes the library comes once, with the first; the others keep
  their questions and the call that shows them (the library's functions are global once
  the first has run).
* PNG figures are stored with a 256-colour palette (no dithering) when that is
  smaller: matplotlib's figures have few colours, the difference cannot be seen, and
  they shrink to about 40 %. Results are kept by content hash in
  ``_build/.png_cache`` so a warm build does not redo them, and the four builds of
  ``make book`` and ``make student`` (English, Chinese, the student editions: the same
  figures) share that one cache: each figure is converted once. Two builds running at the
  same time split the figures between them (a lock per figure; one that the other build is
  converting is taken up again at the end, by then done).
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import html
import os
import re
import shutil
from pathlib import Path

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_SCRIPTS = ("require.js", "embed-amd.js")
_IMG = re.compile(r"<img(?![^>]*\bloading=)")
ROOT = Path(__file__).resolve().parents[2]
EXPLORER_JS = ROOT / "norms" / "explore" / "web" / "explorer.js"
EXPLORER_MARK = "/* The book's explorers on the static website"
INLINE_DATA_BYTES = 50_000
EXPLORER_DATA = "_explorers"
_SCRIPT = re.compile(r"<script>(.*?)</script>", re.S)
_EXPLORER_DATA = re.compile(
    r'(<div class="norms-explorer" id="(?P<id>[^"]+)"[^>]*>)'
    r'<script type="application/json">(?P<data>.*?)</script>',
    re.S,
)
#: what makes MathJax typeset something on a page (sphinx.ext.mathjax's output, TeX
#: delimiters in a cell output or a quiz)
MATHS = ('class="math', "\\(", "\\[", "$$", "\\begin{")
FONTAWESOME_JS = "_static/scripts/fontawesome.js"
_ICON_ELEMENT = re.compile(
    r'<(?P<tag>i|span)\b(?P<before>[^>]*?)\bclass="(?P<cls>[^"]*)"(?P<after>[^>]*)>\s*</(?P=tag)>'
)
_PACKS = {"fa-solid": "fas", "fas": "fas", "fa-brands": "fab", "fab": "fab"}
_PACKS.update({"fa-regular": "far", "far": "far"})
_NOT_AN_ICON = {"fa-lg", "fa-fw", "fa-xs", "fa-sm", "fa-xl", "fa-2x", "fa-spin"} | set(_PACKS)


def _is_widget_script(js) -> bool:
    filename = getattr(js, "filename", js) or ""
    attributes = getattr(js, "attributes", {}) or {}
    return str(filename).endswith(WIDGET_SCRIPTS) or attributes.get("type") == WIDGET_STATE


def _is_mathjax(js) -> bool:
    filename = str(getattr(js, "filename", js) or "")
    body = (getattr(js, "attributes", {}) or {}).get("body", "")
    return "mathjax" in filename.lower() or body.lstrip().startswith("window.MathJax")


def has_maths(body: str) -> bool:
    """Whether MathJax has anything to typeset on a page with this body."""
    return any(mark in body for mark in MATHS)


@functools.lru_cache(maxsize=1)
def explorer_script() -> str:
    """The current explorer script, ASCII only as ``norms.explore.web.page.script`` makes it."""
    text = EXPLORER_JS.read_text(encoding="utf-8")
    return "".join(c if ord(c) < 128 else f"\\u{ord(c):04x}" for c in text)


def one_explorer_script(body: str) -> str:
    """The body with every inlined explorer script removed and the current one once at its end
    (after the last explorer, so that it finds them all)."""
    kept = _SCRIPT.sub(lambda m: "" if m[1].lstrip().startswith(EXPLORER_MARK) else m[0], body)
    if kept == body:
        return body
    return kept + f"<script>{explorer_script()}</script>"


def external_explorer_data(body: str, write, url) -> str:
    """Move each explorer payload larger than INLINE_DATA_BYTES out of the page:
    ``write(name, text)`` stores it, ``url(name)`` is its address from the page."""

    def move(m: re.Match) -> str:
        data = m["data"]
        if len(data) <= INLINE_DATA_BYTES:
            return m[0]
        name = hashlib.sha256(data.encode()).hexdigest()[:16] + ".json"
        write(name, data)
        return (
            f'{m[1]}<script type="application/json" data-src="{html.escape(url(name))}"></script>'
        )

    return _EXPLORER_DATA.sub(move, body)


QUIZ_MARK = "/* Scores for the book's quizzes"
QUIZ_DATA = "\nvar questions"
QUIZ_LIBRARY = "if (typeof Question === 'undefined') {"
QUIZ_SHOW = "/*\n * Handle asynchrony issues"
_QUIZ_SCRIPT = re.compile(r'(<script type="application/javascript">)(.*?)</script>', re.S)


def one_quiz_library(body: str) -> str:
    """The body with the score script and jupyterquiz's library only in its first quiz."""
    first = True

    def trim(m: re.Match) -> str:
        nonlocal first
        js = m[2]
        if not js.lstrip().startswith(QUIZ_MARK):
            return m[0]
        if first:
            first = False
            return m[0]
        data, library, show = (js.find(QUIZ_DATA), js.find(QUIZ_LIBRARY), js.find(QUIZ_SHOW))
        if not 0 <= data < library < show:
            return m[0]  # not the layout norms.quiz.rendering makes: left whole
        # the library's block is kept open for the questions' own show function
        return f"{m[1]}{js[data:library]}{{\n{js[show:]}</script>"

    return _QUIZ_SCRIPT.sub(trim, body)


def _page(app, pagename, templatename, context, doctree) -> None:
    body = context.get("body", "")
    if "script_files" in context:
        scripts = context["script_files"]
        if WIDGET_VIEW not in body:
            scripts = [js for js in scripts if not _is_widget_script(js)]
        if not has_maths(body):
            scripts = [js for js in scripts if not _is_mathjax(js)]
        context["script_files"] = scripts
    if body:
        body = _IMG.sub('<img loading="lazy" decoding="async"', body)
        body = one_quiz_library(one_explorer_script(body))
        folder = Path(app.outdir) / EXPLORER_DATA

        def write(name: str, text: str) -> None:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(text, encoding="utf-8")

        def url(name: str) -> str:
            return context["pathto"](f"{EXPLORER_DATA}/{name}", 1)

        context["body"] = external_explorer_data(body, write, url)


# ----------------------------------------------------------------------- Font Awesome


@functools.lru_cache(maxsize=4)
def icon_shapes(script: Path) -> dict[tuple[str, str], tuple[int, int, str]]:
    """``{(pack, name): (width, height, path)}`` of every icon in the theme's fontawesome.js
    (pack ``fas``, ``far`` or ``fab``: each pack's icons come before its ``("fas", ...)`` call)."""
    text = script.read_text(encoding="utf-8")
    packs = [(m.start(), m[1]) for m in re.finditer(r'\("(fas|far|fab)",', text)]
    icon = re.compile(
        r'(?:"([a-z0-9-]+)"|\b([a-z][a-z0-9]*)):\[(\d+),(\d+),\[[^\]]*\],"[0-9a-f]+","(M[^"]*)"\]'
    )
    shapes = {}
    for m in icon.finditer(text):
        pack = next((p for at, p in packs if at > m.end()), None)
        if pack is not None:
            shapes.setdefault((pack, m[1] or m[2]), (int(m[3]), int(m[4]), m[5]))
    return shapes


def inline_icons(page: str, shapes: dict) -> str:
    """Every Font Awesome ``<i>``/``<span>`` of ``page`` as the inline SVG fontawesome.js would
    make of it (same classes and attributes). An icon not found is left as it is."""

    def svg(m: re.Match) -> str:
        classes = m["cls"].split()
        pack = next((_PACKS[c] for c in classes if c in _PACKS), None)
        names = [c[3:] for c in classes if c.startswith("fa-") and c not in _NOT_AN_ICON]
        if pack is None or len(names) != 1 or (pack, names[0]) not in shapes:
            return m[0]
        width, height, path = shapes[pack, names[0]]
        kept = " ".join(c for c in classes if c not in _PACKS)
        attributes = f"{m['before']}{m['after']}".strip()
        return (
            f'<svg class="svg-inline--fa {kept}" {attributes} aria-hidden="true" '
            f'focusable="false" data-prefix="{pack}" data-icon="{names[0]}" role="img" '
            f'xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}">'
            f'<path fill="currentColor" d="{path}"></path></svg>'
        ).replace("  ", " ")

    return _ICON_ELEMENT.sub(svg, page)


_FONTAWESOME_TAGS = re.compile(
    r'\s*<(?:script defer|link rel="preload" as="script" href)[^>]*scripts/fontawesome\.js[^>]*>'
    r"(?:</script>)?"
)


#: the theme's Font Awesome fonts: (file, family, weight)
FONT_FILES = (
    ("fa-solid-900", "Font Awesome 6 Free", 900),
    ("fa-regular-400", "Font Awesome 6 Free", 400),
    ("fa-brands-400", "Font Awesome 6 Brands", 400),
)
FONTS = "_static/vendor/fontawesome/webfonts"
ICONS = "icons"  # under _static
_ICON_RULE = re.compile(
    r"(?:\.fa-[a-z0-9-]+(?:::?(?:before|after))?,?)+\{[^}]*\}"
)  # .fa-name:before{content:"\f..."}: for elements with that class, which the pages no longer have


def stylesheet_icons(css: str) -> set[int]:
    """The Font Awesome code points a stylesheet draws with, leaving out the rules of the
    icon classes (``.fa-bell:before``)."""
    css = _ICON_RULE.sub("", css)
    points = {ord(c) for c in css if 0xE000 <= ord(c) <= 0xF8FF}
    points |= {int(h, 16) for h in re.findall(r"\\((?:f|e)[0-9a-fA-F]{3})\b", css)}
    return points


def icon_fonts_css(points: set[int], out: Path) -> str | None:
    """Write each Font Awesome font cut down to ``points`` (WOFF) under ``_static/icons`` and
    return the @font-face rules that declare them; None when the fonts are not there."""
    from fontTools import subset

    fonts, folder = out / FONTS, out / "_static" / ICONS
    rules = []
    for name, family, weight in FONT_FILES:
        source = fonts / f"{name}.ttf"
        if not source.exists():
            return None
        font = subset.load_font(str(source), subset.Options())
        options = subset.Options()
        options.flavor = "woff"
        subsetter = subset.Subsetter(options)
        subsetter.populate(unicodes=sorted(points))
        subsetter.subset(font)
        folder.mkdir(parents=True, exist_ok=True)
        subset.save_font(font, str(folder / f"{name}.woff"), options)
        rules.append(
            f'@font-face{{font-family:"{family}";font-style:normal;font-weight:{weight};'
            f'font-display:block;src:url("{name}.woff") format("woff")}}'
        )
    return "\n".join(rules) + "\n"


def _icon_fonts(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    css = "".join(
        f.read_text(encoding="utf-8", errors="ignore")
        for f in (out / "_static").rglob("*.css")
        if "vendor" not in f.parts and ICONS not in f.parts
    )
    rules = icon_fonts_css(stylesheet_icons(css), out)
    if rules is not None:
        (out / "_static" / ICONS / "icons.css").write_text(rules, encoding="utf-8")


_SEARCH_INDEX = re.compile(r'\s*<script src="[^"]*searchindex\.js"></script>')


def _inline_icons_everywhere(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    script = out / FONTAWESOME_JS
    if not script.exists():
        return
    shapes = icon_shapes(script)
    for page in out.rglob("*.html"):
        if {"_static", "_sources", "slides"} & set(page.relative_to(out).parts):
            continue
        text = page.read_text(encoding="utf-8")
        new = _FONTAWESOME_TAGS.sub("", inline_icons(text, shapes))
        if page.name != "search.html":
            new = _SEARCH_INDEX.sub("", new)
        if new != text:
            page.write_text(new, encoding="utf-8")


def _palette_png(source: Path, cache: Path, wait: bool = True) -> bool:
    """Replace ``source`` by its palette version (converted once, then from ``cache``).
    Returns False, leaving ``source`` as it is, when another build holds that figure's lock
    and ``wait`` is false."""
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    cached = cache / f"{digest}.png"
    if not cached.exists():
        with open(cache / f"{digest}.lock", "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                return False
            if not cached.exists():  # not made by the build that held the lock
                _convert(source, cached)
    shutil.copy2(cached, source)
    return True


def _convert(source: Path, cached: Path) -> None:
    from PIL import Image

    tmp = cached.with_suffix(f".{os.getpid()}.tmp")
    with Image.open(source) as image:
        if image.mode == "RGBA" and image.getextrema()[3][0] < 255:
            shutil.copy2(source, tmp)  # transparency: keep as is
        elif image.mode == "P":
            shutil.copy2(source, tmp)
        else:
            small = image.convert("RGB").quantize(
                256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE
            )
            small.save(tmp, format="PNG", optimize=True)
            if tmp.stat().st_size >= source.stat().st_size:
                shutil.copy2(source, tmp)
    tmp.replace(cached)


#: the figures' cache, shared by every build of the book (the site, the Chinese site, the
#: student editions: tools/i18n.py and tools/student.py build beside, in _build/*-build)
PNG_CACHE = ROOT / "_build" / ".png_cache"


def _compress_images(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    PNG_CACHE.mkdir(parents=True, exist_ok=True)
    pngs = sorted((Path(app.outdir) / "_images").glob("*.png"))
    taken = [png for png in pngs if not _palette_png(png, PNG_CACHE, wait=False)]
    for png in taken:  # another build was converting these: by now done, or soon
        _palette_png(png, PNG_CACHE)


def setup(app):
    app.connect("html-page-context", _page, priority=900)  # after myst-nb adds its scripts
    app.connect("build-finished", _compress_images)
    app.connect("build-finished", _inline_icons_everywhere)
    app.connect("build-finished", _icon_fonts)
    app.add_css_file(f"{ICONS}/icons.css", priority=900)  # after the theme's
    return {"parallel_read_safe": True, "parallel_write_safe": True}

"""Sphinx extension: keep every page light.

* The ipywidgets HTML manager (require.js + embed-amd.js, 3.5 MB) and the widget
  state only go into pages that show a widget view. myst-nb adds them with
  ``app.add_js_file`` while writing a widget page, which also puts them into every
  page written after it; this takes them out again wherever the page body has no
  widget view. The book's explorers show their ``text/html`` version on the site
  (``nb_mime_priority_overrides`` in ``_config.yml``), so they need none of it.
* Images load when they are about to be shown (``loading="lazy"``) and are decoded
  off the main thread.
* PNG figures are stored with a 256-colour palette (no dithering) when that is
  smaller: matplotlib's figures have few colours, the difference cannot be seen, and
  they shrink to about 40 %. Results are kept by content hash in
  ``_build/.png_cache`` so a warm build does not redo them.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_SCRIPTS = ("require.js", "embed-amd.js")
_IMG = re.compile(r"<img(?![^>]*\bloading=)")


def _is_widget_script(js) -> bool:
    filename = getattr(js, "filename", js) or ""
    attributes = getattr(js, "attributes", {}) or {}
    return str(filename).endswith(WIDGET_SCRIPTS) or attributes.get("type") == WIDGET_STATE


def _page(app, pagename, templatename, context, doctree) -> None:
    body = context.get("body", "")
    if "script_files" in context and WIDGET_VIEW not in body:
        context["script_files"] = [
            js for js in context["script_files"] if not _is_widget_script(js)
        ]
    if body:
        context["body"] = _IMG.sub('<img loading="lazy" decoding="async"', body)


def _palette_png(source: Path, cache: Path) -> None:
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    cached = cache / f"{digest}.png"
    if not cached.exists():
        from PIL import Image

        with Image.open(source) as image:
            if image.mode == "RGBA" and image.getextrema()[3][0] < 255:
                shutil.copy2(source, cached)  # transparency: keep as is
            elif image.mode == "P":
                shutil.copy2(source, cached)
            else:
                small = image.convert("RGB").quantize(
                    256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE
                )
                tmp = cached.with_suffix(".tmp")
                small.save(tmp, format="PNG", optimize=True)
                if tmp.stat().st_size >= source.stat().st_size:
                    shutil.copy2(source, tmp)
                tmp.replace(cached)
    shutil.copy2(cached, source)


def _compress_images(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    cache = Path(app.outdir).parent / ".png_cache"
    cache.mkdir(parents=True, exist_ok=True)
    for png in sorted((Path(app.outdir) / "_images").glob("*.png")):
        _palette_png(png, cache)


def setup(app):
    app.connect("html-page-context", _page, priority=900)  # after myst-nb adds its scripts
    app.connect("build-finished", _compress_images)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

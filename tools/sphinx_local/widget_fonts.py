"""Sphinx extension: serve the fonts of the ipywidgets HTML manager where it asks for them.

``embed-amd.js`` is loaded with require.js, and webpack takes the directory of its
AMD module id, ``@jupyter-widgets/html-manager/dist/``, resolved against the page,
as the place of its Font Awesome files. Every folder with a page that loads the
manager therefore gets a copy of the fonts (from ``_static/vendor/html-manager``,
where the Makefile puts the npm package's files) under that path.
"""

from __future__ import annotations

import shutil
from pathlib import Path

MANAGER = "embed-amd.js"
FONT_SUFFIXES = (".woff", ".woff2", ".ttf", ".eot", ".svg")
REQUESTED_AT = Path("@jupyter-widgets") / "html-manager" / "dist"


def _copy_fonts(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    source = out / "_static" / "vendor" / "html-manager"
    fonts = [f for f in source.glob("*") if f.suffix in FONT_SUFFIXES]
    folders = {
        page.parent
        for page in out.rglob("*.html")
        if "_static" not in page.parts and MANAGER in page.read_text(errors="ignore")
    }
    for folder in sorted(folders):
        target = folder / REQUESTED_AT
        target.mkdir(parents=True, exist_ok=True)
        for font in fonts:
            shutil.copy2(font, target / font.name)


def setup(app):
    app.connect("build-finished", _copy_fonts)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

"""Sphinx extension: on the Chinese site, the sentences a chapter printed, in Chinese.

A stored output's printed lines are English (the chapters are executed once). Their
translations are in ``locales/zh_CN/outputs/PAGE.po`` (``make translations`` extracts the
lines that hold a sentence, numbers as fields: ``tools/i18n.py``). When the site is built
in Chinese, each printed output's lines that the catalog has are replaced, numbers put back.
"""

from __future__ import annotations

import sys
from pathlib import Path

from docutils import nodes

TOOLS = Path(__file__).resolve().parent.parent


def _i18n():
    if str(TOOLS) not in sys.path:
        sys.path.insert(0, str(TOOLS))
    import i18n

    return i18n


def _translate(app, doctree, docname) -> None:
    if not (app.config.language or "").startswith("zh"):
        return
    i18n = _i18n()
    table = i18n.output_translations(docname)
    if not table:
        return
    for block in doctree.findall(nodes.literal_block):
        if "output" not in block["classes"] or "stream" not in block["classes"]:
            continue
        text = block.astext()
        translated = i18n.translate_printed(text, table)
        if translated != text:
            block.children = [nodes.Text(translated)]
            block.rawsource = translated


def setup(app):
    app.connect("doctree-resolved", _translate)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

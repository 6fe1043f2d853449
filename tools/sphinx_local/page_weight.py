"""Sphinx extension: keep every page light.

* The ipywidgets HTML manager (require.js + embed-amd.js, 3.5 MB) and the widget
  state only go into pages that show a widget view. myst-nb adds them with
  ``app.add_js_file`` while writing a widget page, which also puts them into every
  page written after it; this takes them out again wherever the page body has no
  widget view. The book's explorers show their ``text/html`` version on the site
  (``nb_mime_priority_overrides`` in ``_config.yml``), so they need none of it.
* Images load when they are about to be shown (``loading="lazy"``) and are decoded
  off the main thread.
"""

from __future__ import annotations

import re

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
        context["script_files"] = [js for js in context["script_files"] if not _is_widget_script(js)]
    if body:
        context["body"] = _IMG.sub('<img loading="lazy" decoding="async"', body)


def setup(app):
    app.connect("html-page-context", _page, priority=900)  # after myst-nb adds its scripts
    return {"parallel_read_safe": True, "parallel_write_safe": True}

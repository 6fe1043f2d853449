"""Sphinx extension: switch off sphinx-thebe, which jupyter-book 1.x always loads.

The book runs code in Colab or Jupyter, never through Thebe. sphinx-thebe's
configuration script declares ``const THEBE_JS_URL`` and is added once per read pass,
so a page that is read twice (sphinxcontrib-bibtex re-reads cited pages) raises
"Identifier 'THEBE_JS_URL' has already been declared", and the script points at a
CDN the site must not load from. This removes all of sphinx-thebe's event handlers.
"""

from __future__ import annotations


def _drop_thebe_listeners(app, config):
    for listeners in app.events.listeners.values():
        listeners[:] = [
            listener
            for listener in listeners
            if getattr(listener.handler, "__module__", "") != "sphinx_thebe"
        ]
    # Its stylesheet is registered in setup() but copied by a handler removed above.
    app.registry.css_files[:] = [c for c in app.registry.css_files if c[0] != "sphinx-thebe.css"]


def setup(app):
    # config-inited fires after every extension's setup(), so sphinx_thebe's handlers exist.
    app.connect("config-inited", _drop_thebe_listeners, priority=1000)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

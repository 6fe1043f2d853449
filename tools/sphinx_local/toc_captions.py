"""Sphinx extension: the table of contents' captions in the page's language.

sphinx-external-toc inserts the toctrees of ``_toc.yml`` (with their captions, "Getting
started", "The norms", ...) in a transform of priority 100, after Sphinx's ``Locale``
transform (priority 20) has translated the page: the captions were extracted into the root
page's catalog but shown in English in the Chinese site's sidebar. This transform runs
after the insertion and before the toctrees are recorded (``doctree-read``, priority 880),
and translates each caption from the page's catalog.
"""

from __future__ import annotations

import os

from sphinx import addnodes, locale
from sphinx.transforms import SphinxTransform
from sphinx.util.i18n import docname_to_domain


class TranslateTocCaptions(SphinxTransform):
    default_priority = 150  # after sphinx_external_toc's InsertToctrees (100)

    def apply(self, **kwargs) -> None:
        config = self.config
        if not config.language or config.language == "en":
            return
        toctrees = [t for t in self.document.findall(addnodes.toctree) if t.get("caption")]
        if not toctrees:
            return
        dirs = [os.path.join(self.env.srcdir, d) for d in config.locale_dirs]
        domain = docname_to_domain(self.env.docname, config.gettext_compact)
        catalog, found = locale.init(dirs, config.language, domain)
        if not found:
            return
        for toctree in toctrees:
            caption = toctree["caption"]
            translated = catalog.gettext(caption)
            if translated and translated != caption:
                toctree["caption"] = toctree["rawcaption"] = translated


def setup(app):
    app.add_transform(TranslateTocCaptions)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

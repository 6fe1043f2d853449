"""Sphinx extension: exercise titles are translatable.

sphinx-exercise builds an exercise's title, e.g. "(the variance shift, by formula and by
measurement)", as a ``subtitle`` node without a source file. Sphinx's gettext extraction and
its translation both skip text nodes without a source ("a built-in message"), so the title
stayed English on the Chinese site. This transform gives those nodes their document's
source, line and raw text before Sphinx's ``Locale`` transform (priority 20) runs: gettext extracts
the titles into the page's catalog, and the Chinese build translates them.
"""

from __future__ import annotations

from docutils import nodes
from sphinx.transforms import SphinxTransform

TITLE = "norms_title_message"


class ExerciseTitleSource(SphinxTransform):
    default_priority = 15  # before sphinx.transforms.i18n.Locale (20)

    def apply(self, **kwargs) -> None:
        source = self.document["source"]
        for node in self.document.findall(nodes.subtitle):
            if not node.source and type(node).__module__.startswith("sphinx_exercise"):
                node.source = source
                node.line = node.line or getattr(node.parent, "line", None) or 1
                node.rawsource = node.rawsource or markup(node)
                exercise = node.parent.parent if node.parent is not None else None
                if exercise is not None:  # for the gettext builder (see _extract)
                    exercise[TITLE] = (node.rawsource, node.source, node.line)


def markup(node: nodes.Element) -> str:
    """The MyST text of a parsed title (gettext's message is a node's raw source)."""
    out = []
    for child in node.children:
        if isinstance(child, nodes.literal):
            out.append(f"`{child.astext()}`")
        elif isinstance(child, nodes.math):
            out.append(f"${child.astext()}$")
        else:
            out.append(child.astext())
    return "".join(out)


def _extract(app, doctree, docname) -> None:
    """sphinx-exercise's post-transform folds the subtitle into the exercise's title before
    the gettext builder reads the page: hand the builder the title's message here."""
    if app.builder.name != "gettext":
        return
    from sphinx.builders.gettext import MsgOrigin
    from sphinx.util.i18n import docname_to_domain

    catalog = app.builder.catalogs[docname_to_domain(docname, app.config.gettext_compact)]
    for node in doctree.findall(nodes.Element):
        if TITLE in node.attributes:
            message, source, line = node[TITLE]
            catalog.add(message, MsgOrigin(source, line))


def _translate_solution_titles(app, doctree, docname) -> None:
    """A solution's title repeats its exercise's ("Solution to Exercise 5 (title)"), taken
    from the exercise as it was before the page was translated: give it the translation."""
    if not app.config.language or app.config.language == "en":
        return
    import os

    from sphinx import locale
    from sphinx.util.i18n import docname_to_domain

    titles = [n[TITLE][0] for n in doctree.findall(nodes.Element) if TITLE in n.attributes]
    if not titles:
        return
    dirs = [os.path.join(app.srcdir, d) for d in app.config.locale_dirs]
    domain = docname_to_domain(docname, app.config.gettext_compact)
    catalog, found = locale.init(dirs, app.config.language, domain)
    if not found:
        return
    pairs = [(t, catalog.gettext(t)) for t in titles if catalog.gettext(t) != t]
    for node in doctree.findall(nodes.Element):
        if not type(node).__module__.startswith("sphinx_exercise") or "solution" not in (
            type(node).__name__
        ):
            continue
        title = node.children[0] if node.children else None
        if not isinstance(title, nodes.title):
            continue
        for text in list(title.findall(nodes.Text)):
            new = str(text)
            for english, chinese in pairs:
                new = new.replace(english, chinese)
            if new != str(text):
                text.parent.replace(text, nodes.Text(new))


def setup(app):
    app.add_transform(ExerciseTitleSource)
    app.connect("doctree-resolved", _extract)
    app.connect("doctree-resolved", _translate_solution_titles)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

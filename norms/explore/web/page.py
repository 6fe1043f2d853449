"""An explorer's payload as self-contained HTML: the data, the script, a container.

Every text the explorer shows is in the payload in both languages (``{"en": ..., "zh": ...}``,
:func:`bilingual`), or in the reader's language only when one was set
(:func:`norms.i18n.set_language`); the script shows the one of
:func:`norms.i18n.js_language` (the page's ``<html lang>``)."""

from __future__ import annotations

import functools
import hashlib
import html as _html
import json
from importlib.resources import files

from norms.i18n import Text, explicit_language, forms, js_language, tr

__all__ = ["html", "script", "bilingual", "colab", "status"]


def colab() -> Text:
    """What an explorer says where its page cannot show a choice."""
    return tr(
        "Open the notebook in Colab (the rocket icon at the top of the page) to try any value."
    )


def bilingual(text):
    """A text for the payload: ``{"en": ..., "zh": ...}`` for a :class:`norms.i18n.Text`, only
    the chosen language's when the reader set one; a plain ``str`` as it is (the same in
    every language)."""
    if not isinstance(text, Text):
        return text
    chosen = explicit_language()
    return text.in_language(chosen) if chosen else forms(text)


def status() -> dict:
    """What the explorer says before its data is there (the page fetches a large payload
    when it comes near the screen)."""
    return {
        "loading": bilingual(tr("Loading the explorer…")),
        "failed": bilingual(tr("The explorer could not load its data ({error}).", error="{error}")),
    }


_STYLE = """<style>
.norms-explorer{border:1px solid #d0d7de;border-radius:6px;padding:.6em .8em;margin:1em 0;font-size:.9em}
.norms-explorer .ne-controls{display:flex;flex-wrap:wrap;gap:.4em 1.2em;margin-bottom:.4em}
.norms-explorer .ne-control{display:inline-flex;align-items:center;gap:.35em;margin:0}
.norms-explorer .ne-name{color:#333}
.norms-explorer select,.norms-explorer input[type=text]{font:inherit;padding:1px 3px;max-width:12em}
.norms-explorer input[type=range]{width:8em}
.norms-explorer output{min-width:2.5em;font-variant-numeric:tabular-nums}
.norms-explorer .ne-info,.norms-explorer .ne-error{margin:.3em 0;min-height:1.2em}
.norms-explorer .ne-outside{color:#8a4b00}
.norms-explorer .ne-figure svg{max-width:100%;height:auto;display:block}
.norms-explorer .ne-figure img{max-width:100%;height:auto}
.norms-explorer .ne-title{font:600 14px sans-serif;fill:#222}
.norms-explorer .ne-label{font:12.5px sans-serif;fill:#333}
.norms-explorer .ne-tick{font:11.5px sans-serif;fill:#444}
.norms-explorer .ne-note{color:#555;font-size:.9em;margin-top:.3em}
</style>"""  # noqa: E501 - CSS; a line break would change the string


@functools.lru_cache(maxsize=1)
def script() -> str:
    """The explorer script (project code, :file:`norms/explore/web/explorer.js`)."""
    text = files("norms.explore.web").joinpath("explorer.js").read_text(encoding="utf-8")
    # ASCII only (\uXXXX escapes), so the script reads the same whatever the page's encoding.
    if "</script" in text.lower():
        raise ValueError("explorer.js must not contain '</script' (it would end the inline script)")
    return "".join(c if ord(c) < 128 else f"\\u{ord(c):04x}" for c in text)


def _safe_json(payload: dict) -> str:
    # Inside <script>: "</script", "<!--" and "<script" change how the HTML parser reads it.
    # JSON has "<", ">" and "&" only inside strings, where \u003c etc. mean the same.
    text = json.dumps(payload, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def html(payload: dict) -> str:
    """The ``text/html`` output that shows ``payload`` as a working explorer.

    Deterministic (the container id is a hash of the payload), so a notebook's
    stored output does not change between runs. The script is included in every
    output and runs once per page.
    """
    data = _safe_json(payload)
    uid = "norms-explorer-" + hashlib.sha256(data.encode()).hexdigest()[:12]
    words = _html.escape(json.dumps(status(), ensure_ascii=True, separators=(",", ":")))
    return (
        f'{_STYLE}<div class="norms-explorer" id="{uid}" data-kind="{payload["kind"]}" '
        f'data-status="{words}"><script type="application/json">{data}</script></div>'
        f'<script>document.getElementById("{uid}").dataset.lang={js_language()};</script>'
        f"<script>{script()}</script>"
    )

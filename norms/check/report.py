"""The report a reader sees: plain text and HTML."""

from __future__ import annotations

import html
from dataclasses import dataclass, field


@dataclass
class Report:
    """Result of :func:`grade`.  ``ok`` is True when no problem was found."""

    candidate: str
    reference: str
    problems: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    checks: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def codes(self) -> list:
        return [p.code for p in self.problems]

    def __contains__(self, code):
        return code in self.codes

    def _headline(self):
        if self.ok:
            return (
                f"✓ {self.candidate} behaves like {self.reference} ({len(self.checks)} checks "
                "passed)."
            )
        n = len(self.problems)
        return (
            f"✗ {self.candidate} differs from {self.reference}: {n} problem{'s' if n > 1 else ''}."
        )

    def __str__(self):
        lines = [self._headline()]
        for i, p in enumerate(self.problems, 1):
            lines.append(f"  {i}. [{p.code}] {p}")
        for note in self.notes:
            lines.append(f"  note: {note}")
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self):
        e = html.escape
        color = "#1a7f37" if self.ok else "#b42318"
        parts = [
            f'<div class="norms-grade" style="border-left:4px solid {color};padding:0.4em 0.8em;">',
            f'<p style="margin:0.2em 0;font-weight:bold;color:{color}">{e(self._headline())}</p>',
        ]
        if self.problems:
            parts.append('<ol style="margin:0.2em 0 0.2em 1.2em;padding:0">')
            for p in self.problems:
                where = ""
                if p.where:
                    where = (
                        " <small>(seen at: "
                        + e(", ".join(p.where[:3]))
                        + (", …" if len(p.where) > 3 else "")
                        + ")</small>"
                    )
                parts.append(
                    f"<li><b>{e(p.title)}</b>{where}<br>{e(p.detail)}<br>"
                    f"<i>Fix:</i> {e(p.fix)} <code style='opacity:0.6'>{e(p.code)}</code></li>"
                )
            parts.append("</ol>")
        if self.notes:
            parts.append('<ul style="margin:0.2em 0 0.2em 1.2em;padding:0;opacity:0.8">')
            parts.extend(f"<li>note: {e(n)}</li>" for n in self.notes)
            parts.append("</ul>")
        if self.ok and self.checks:
            parts.append("<details><summary>checks</summary><ul>")
            parts.extend(f"<li>{e(c)}</li>" for c in self.checks)
            parts.append("</ul></details>")
        parts.append("</div>")
        return "".join(parts)

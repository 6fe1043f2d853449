"""Self-check quizzes whose answer keys are computed by ``norms`` itself.

A notebook cell only needs::

    import norms.quiz
    norms.quiz.show("batchnorm")          # a few questions on one chapter's topic
    norms.quiz.self_quiz()                # a big generated bank, a random few per visit
    norms.quiz.self_quiz(topics=norms.quiz.topics_for_chapters(["batchnorm", "layernorm"]))
                                          # the same, on what a lecture covered only

Questions are dicts in jupyterquiz's format (``"question"``, ``"type"`` one of
``"multiple_choice"``/``"many_choice"``/``"numeric"``, ``"answers"`` with
``"answer"``/``"correct"``/``"feedback"``, numeric answers with ``"value"`` or
``"range"``), and every option carries feedback. Select-all questions are always ``"many_choice"``
and
end with the same "Select all that apply.", however many options are right (even one), and the
rendered
script is patched so that jupyterquiz styles them by that type. Numbers in the answer keys
are never typed in: they come from :func:`norms.axes.describe`, from the
modules' parameters and state_dict, or from running a module (a BatchNorm
step, a batch of size one, an input with a small variance, ...).

Every generator takes a ``random.Random`` and returns one question, so
``questions_for(topic, n, seed)`` and ``bank(seed, size)`` are deterministic.
Each question also carries ``"_meta"`` (what was asked: layer, arguments, input
shape, ...) for tests; :func:`show` strips it before display.

Rendering (:func:`show`, :func:`self_quiz`, :func:`render`) goes through
``jupyterquiz.display_quiz`` with the questions passed inline (nothing is
fetched), a container id derived from the content instead of a random one (so
the output is identical on every run), and jupyterquiz's fallback that loads
MathJax from cdn.jsdelivr.net removed: the page loads nothing from other hosts.

Languages: the texts of a question are :func:`norms.i18n.tr` templates (translated in
``norms/locale/zh_CN/LC_MESSAGES/norms.quiz.<module>.po``), so a question dict holds every
language at once; a rendered quiz carries the questions in English and in Chinese and shows the
language of the page (``<html lang="zh-CN">``), and so do jupyterquiz's own feedback
("Correct!", "Incorrect -- try again.") and the score. A reader who set a language
(``norms.set_language("zh")`` or ``NORMS_LANG=zh``) gets that language only.

The package's parts: :mod:`~norms.quiz.builders` (question dicts), :mod:`~norms.quiz.cases`
(random layers and inputs), the generators by subject (:mod:`~norms.quiz.computed`,
:mod:`~norms.quiz.why`, :mod:`~norms.quiz.chapters`, :mod:`~norms.quiz.concepts`),
:mod:`~norms.quiz.topics` (which generators each chapter draws from) and
:mod:`~norms.quiz.rendering` (jupyterquiz output). A new chapter adds a module of generators
and one entry in ``topics.TOPICS``.
"""

from __future__ import annotations

from .builders import SELECT_ALL
from .rendering import display_questions, render, self_quiz, show
from .topics import CHAPTER_OF, TOPICS, bank, questions_for, topics, topics_for_chapters

__all__ = [
    "TOPICS",
    "CHAPTER_OF",
    "SELECT_ALL",
    "topics",
    "topics_for_chapters",
    "questions_for",
    "bank",
    "show",
    "self_quiz",
    "render",
    "display_questions",
]

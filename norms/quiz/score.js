/* Scores for the book's quizzes (project code, appended by norms.quiz.rendering to
 * jupyterquiz's script). Every quiz shows the reader's score; a quiz rendered with
 * persist=True (the self-quiz) also keeps a tally across visits in this browser's
 * localStorage (nothing is sent anywhere), with a reset and a retry of the questions
 * answered wrongly. A question counts once, by its first answer: a single-answer or
 * numeric question is right if the first answer is; a select-all question is right
 * if every right option is picked before a wrong one.
 *
 * Its texts, and jupyterquiz's own ("Correct!", "Incorrect -- try again.", ...), are in
 * NormsQuiz.strings (set by norms.quiz.rendering from its translated templates) and shown
 * in the language the rendering passes to NormsQuiz.show (the page's <html lang>).
 */
(function () {
  "use strict";
  if (window.NormsQuiz) return;
  var PREFIX = "norms-quiz:";

  function say(name, fields) {  // a text of NormsQuiz.strings in the quiz's language
    var table = window.NormsQuiz.strings || {}, lang = window.NormsQuiz.lang || "en";
    var text = (table[lang] || {})[name];
    if (text === undefined) text = (table.en || {})[name];
    if (text === undefined) text = name;
    return text.replace(/\{(\w+)\}/g, function (all, f) { return fields && f in fields ? String(fields[f]) : all; });
  }

  function id(qa) {  // a question is its text and its code: two may share the text
    return hash(qa.question + "\u0000" + (qa.code || ""));
  }
  function hash(text) {  // a short, stable id for a question
    var h = 2166136261;
    for (var i = 0; i < text.length; i++) { h ^= text.charCodeAt(i); h = Math.imul(h, 16777619); }
    return (h >>> 0).toString(36);
  }
  function load(key) {
    try { return JSON.parse(window.localStorage.getItem(PREFIX + key)) || { last: {} }; }
    catch (e) { return { last: {} }; }
  }
  function save(key, tally) {
    try { window.localStorage.setItem(PREFIX + key, JSON.stringify(tally)); } catch (e) { /* storage off */ }
  }
  function pick(list, n) {  // n random questions (as jupyterquiz picks them)
    var a = list.slice();
    for (var i = a.length - 1; i > 0; i--) {
      var j = Math.floor(Math.random() * (i + 1)), t = a[i]; a[i] = a[j]; a[j] = t;
    }
    return a.slice(0, n);
  }
  function el(tag, cls, parent, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }

  function Quiz(container, bank, showQuestions, key, persist) {
    this.container = container; this.bank = bank; this.showQuestions = showQuestions;
    this.key = key; this.persist = persist;
    this.num = parseInt(container.dataset.numquestions, 10) || bank.length;
    this.shuffle = container.dataset.shufflequestions === "True" || this.num < bank.length;
    this.panel = el("div", "nq-score");
    container.parentNode.insertBefore(this.panel, container.nextSibling);
    this.line = el("div", "nq-line", this.panel);
    this.line.setAttribute("aria-live", "polite");
    if (persist) {
      this.tallyLine = el("div", "nq-tally", this.panel);
      var buttons = el("div", "nq-buttons", this.panel), self = this;
      this.retryButton = el("button", "nq-retry", buttons, say("retry"));
      this.retryButton.type = "button";
      this.retryButton.addEventListener("click", function () { self.retry(); });
      this.resetButton = el("button", "nq-reset", buttons, say("reset"));
      this.resetButton.type = "button";
      this.resetButton.addEventListener("click", function () { self.reset(); });
      this.newButton = el("button", "nq-new", buttons, say("new"));
      this.newButton.type = "button";
      this.newButton.addEventListener("click", function () { self.show(self.shuffle ? pick(self.bank, self.num) : self.bank); });
    }
    this.show(this.shuffle ? pick(bank, this.num) : bank);
  }

  Quiz.prototype.show = function (questions) {
    var c = this.container, self = this;
    Array.prototype.slice.call(c.querySelectorAll(".Quiz, .JCResponses")).forEach(function (q) { q.remove(); });
    this.shown = questions;
    this.results = {};
    c.dataset.numquestions = String(questions.length);
    c.dataset.shufflequestions = "False";
    this.showQuestions(questions, c);
    if (this.observer) this.observer.disconnect();
    this.observer = new MutationObserver(function () { self.update(); });
    this.observer.observe(c, { subtree: true, attributes: true, attributeFilter: ["class", "data-answeredcorrect"] });
    this.render();
  };

  Quiz.prototype.update = function () {
    var self = this, changed = false;
    Array.prototype.slice.call(this.container.querySelectorAll(".Quiz")).forEach(function (wrap) {
      var i = +wrap.dataset.qnum, qa = self.shown[i];
      if (!qa || i in self.results) return;
      var fb = wrap.querySelector(".Feedback");
      if (!fb) return;
      var many = !!wrap.querySelector(".ManyChoiceQn"), result = null;
      if (fb.classList.contains("incorrect")) result = false;
      else if (fb.classList.contains("correct")) {
        result = many ? (+fb.dataset.answeredcorrect >= +fb.dataset.numcorrect ? true : null) : true;
      }
      if (result === null) return;
      self.results[i] = result;
      changed = true;
      if (self.persist) {
        var tally = load(self.key);
        tally.last[id(qa)] = result ? 1 : 0;
        save(self.key, tally);
      }
    });
    if (changed) this.render();
  };

  Quiz.prototype.wrong = function () {
    var last = load(this.key).last;
    return this.bank.filter(function (qa) { return last[id(qa)] === 0; });
  };

  Quiz.prototype.render = function () {
    var answered = 0, right = 0;
    for (var i in this.results) { answered++; if (this.results[i]) right++; }
    this.line.textContent = say(this.shown.length === 1 ? "score_one" : "score_many",
      { right: right, answered: answered, shown: this.shown.length });
    this.panel.dataset.right = right; this.panel.dataset.answered = answered;
    if (!this.persist) return;
    var last = load(this.key).last, seen = 0, good = 0;
    for (var h in last) { seen++; if (last[h]) good++; }
    var wrong = this.wrong().length;
    this.tallyLine.textContent = say(seen === 0 ? "tally_none" : seen === 1 ? "tally_one" : "tally_many",
      { good: good, seen: seen, percent: seen ? Math.round(100 * good / seen) : 0, wrong: wrong });
    this.panel.dataset.seen = seen; this.panel.dataset.good = good; this.panel.dataset.wrong = wrong;
    this.retryButton.disabled = wrong === 0;
    this.resetButton.disabled = seen === 0;
  };

  Quiz.prototype.retry = function () { var w = this.wrong(); if (w.length) this.show(w); };
  Quiz.prototype.reset = function () {
    try { window.localStorage.removeItem(PREFIX + this.key); } catch (e) { /* storage off */ }
    this.render();
  };

  window.NormsQuiz = {
    // Replaces jupyterquiz's call show_questions(bank, container): picks the questions
    // itself, so it knows which one each rendered question is.
    // bank: the questions, or {en: [...], zh: [...]} (one list per language); language: "en"
    // or "zh", the language to show (questions, feedback, score).
    show: function (bank, containerId, showQuestions, key, persist, language) {
      var c = document.getElementById(containerId);
      if (!c || c.dataset.normsQuiz) return;
      window.NormsQuiz.lang = language || "en";
      if (!Array.isArray(bank)) bank = bank[window.NormsQuiz.lang] || bank.en;
      c.dataset.normsQuiz = persist ? "persist" : "1";
      c.normsQuiz = new Quiz(c, bank, showQuestions, key, persist);
    },
    t: say,
    strings: {},
    lang: "en",
    _hash: hash
  };
})();

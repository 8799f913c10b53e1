"""GNU Makefiles (and included .mk files): assignments, rules and recipe lines, then which variables
reach the compiler, and with which scope (the built-in rules, compile recipes, target-specific values).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fixpoint_server.parse.build_files.collect import Collector, Word, classify, word_removal
from fixpoint_server.parse.build_files.facts import ALL, IncludedFile, Scope
from fixpoint_server.parse.build_files.make_text import (
    closing_paren,
    expand_make,
    find_top_level,
    make_clean,
    make_words,
)
from fixpoint_server.parse.build_files.paths import OBJECT_SUFFIXES, is_source, norm_path

_MAKE_ROOTS = ("CFLAGS", "CPPFLAGS", "CXXFLAGS")
"""Read by GNU make's built-in compile rules."""
_FLAG_NAME = re.compile(r"(?!(?:LD|AR|AS)FLAGS$)\w*FLAGS|OPT\w*|OPTIMI[SZ]\w*")
"""Variables that hold compile flags by their name, when this file does not say where they go
(a config.mk: its consumers are in the Makefile that includes it)."""
_COMPILER = re.compile(
    r"(?:^|[-/)}])(?:gcc|g\+\+|cc|c\+\+|clang|clang\+\+|armclang|tiarmclang|icx|icc)(?:-[\d.]+)?(?:\.exe)?$"
)
_COMPILER_VARS = ("$(CC)", "${CC}", "$(CXX)", "${CXX}", "$(GCC)", "$(COMPILER)")
_VAR_REF = re.compile(r"\$[({]([A-Za-z0-9_.\-]+)(?::[^)}]*)?[)}]")
_MAKE_OP = re.compile(r":{1,3}=")
_MODIFIERS = ("override", "export", "private")
_CONDITIONALS = ("ifeq", "ifneq", "ifdef", "ifndef", "else", "endif")


def _glob(text: str) -> str:
    return norm_path(text.replace("%", "**"))


@dataclass
class _Assign:
    name: str
    start: int
    end: int
    """The value's offsets."""
    scope: Scope | None
    """A target-specific assignment's scope; None for a global one."""
    refs: set[str]


@dataclass
class _Rule:
    targets: list[str]
    sources: list[str]
    """Source prerequisites (patterns too): what `$<` in the recipe compiles."""


class Make:
    """One Makefile: assignments, rules and recipe lines, then which variables reach the compiler."""

    def __init__(self, out: Collector) -> None:
        self.out = out
        self.text = out.text
        self.clean = make_clean(out.text)
        self.vars: dict[str, str] = {}
        self.assigns: list[_Assign] = []
        self.recipe_refs: list[tuple[set[str], Scope]] = []
        self.rule: _Rule | None = None
        self.in_define = False

    def run(self) -> None:
        start = 0
        for line in self.clean.split("\n"):
            self.line(start, start + len(line))
            start += len(line) + 1
        self.finish()

    def word(self, start: int, end: int) -> Word:
        text = self.clean[start:end]
        return Word(text, start, end, expand_make(text, self.vars), word_removal(self.text, start, end))

    def words(self, start: int, end: int) -> list[Word]:
        return [self.word(a, b) for a, b in make_words(self.clean, start, end)]

    def line(self, start: int, end: int) -> None:
        body = self.clean[start:end]
        if body.startswith("\t") and self.rule is not None and not self.in_define:
            self.recipe(start + 1, end)
            return
        words = body.split()
        if not words:
            return
        first = words[1] if words[0] in _MODIFIERS and len(words) > 1 else words[0]
        if self.in_define or first in ("define", "endef"):
            self.in_define = (self.in_define or first == "define") and first != "endef"
            return
        if first in _CONDITIONALS:
            return
        lead = start + len(body) - len(body.lstrip())
        if first in ("include", "-include", "sinclude"):
            for w in self.words(lead + len(first), end):
                self.out.includes.append(IncludedFile(w.text, self.out.span(w.start, w.end), w.expanded))
            return
        self.rule = None
        self.statement(lead, end)

    def find_op(self, start: int, end: int) -> tuple[str, int, int]:
        """("assign", op start, op end), ("rule", colon, colon + 1) or ("", -1, -1)."""
        pos = find_top_level(self.clean, start, end, ":=")
        if pos < 0:
            return "", -1, -1
        if self.clean[pos] == "=":
            op_start = pos - 1 if pos > start and self.clean[pos - 1] in "+?!" else pos
            return "assign", op_start, pos + 1
        match = _MAKE_OP.match(self.clean, pos)
        if match:
            return "assign", pos, match.end()
        return "rule", pos, pos + 1

    def statement(self, start: int, end: int) -> None:
        kind, op_start, op_end = self.find_op(start, end)
        if kind == "assign":
            self.assignment(start, op_start, op_end, end, None, None)
        elif kind == "rule":
            self.rule_line(start, op_start, end)

    def assignment(
        self, start: int, op_start: int, op_end: int, end: int, scope: Scope | None, targets: str | None
    ) -> None:
        names = self.clean[start:op_start].split()
        while len(names) > 1 and names[0] in _MODIFIERS:
            names = names[1:]
        if len(names) != 1:
            return
        name = names[0]
        name_start = self.clean.index(name, start, op_start)
        value_end = op_end + len(self.clean[op_end:end].rstrip())
        op = self.clean[op_start:op_end]
        if scope is None:
            self.set_var(name, op, self.clean[op_end:value_end].strip())
        refs = set(_VAR_REF.findall(self.clean, op_end, value_end))
        self.assigns.append(_Assign(name, op_end, value_end, scope, refs))
        self.out.statement(name, targets, (start, value_end), (name_start, name_start + len(name)), value_end)

    def set_var(self, name: str, op: str, value: str) -> None:
        if op == "+=":
            self.vars[name] = (self.vars.get(name, "") + " " + value).strip()
        elif op == "?=":
            self.vars.setdefault(name, value)
        elif op == "!=":
            self.vars[name] = ""
        else:
            self.vars[name] = expand_make(value, self.vars) if op != "=" else value

    def rule_line(self, start: int, colon: int, end: int) -> None:
        after = colon + 2 if self.clean.startswith("::", colon) else colon + 1
        semi = find_top_level(self.clean, after, end, ";")
        prereq_end = semi if semi >= 0 else end
        targets = self.words(start, colon)
        kind, op_start, op_end = self.find_op(after, prereq_end)
        if kind == "assign":
            text = self.clean[start:colon].strip()
            self.assignment(after, op_start, op_end, end, self.target_scope(targets), text)
            return
        if kind == "rule":  # a static pattern rule: targets: target-pattern: prereq-patterns
            targets, after = self.words(after, op_start), op_end
        prereqs = self.words(after, prereq_end)
        for word in prereqs:
            if "%" not in word.expanded:  # a pattern rule says how to build, not what is built
                self.out.source(word)
        sources = [_glob(p) for w in prereqs for p in w.expanded.split() if is_source(p)]
        self.rule = _Rule([_glob(w.expanded) for w in targets], sources)
        if semi >= 0:
            self.recipe(semi + 1, end)

    def target_scope(self, targets: list[Word]) -> Scope:
        patterns = [_glob(p) for w in targets for p in w.expanded.split()]
        if patterns and all(p.endswith(OBJECT_SUFFIXES) or is_source(p) for p in patterns):
            return Scope.files(*patterns)
        return Scope.of_target(" ".join(w.text for w in targets))

    def recipe(self, start: int, end: int) -> None:
        words = self.words(start, end)
        at = next((i for i, w in enumerate(words) if _is_compiler(w)), None)
        if at is None:
            classify(words, self.out, ALL, "recipe", compile=False, sources=False)
            return
        args = words[at + 1 :]
        explicit = [_glob(w.expanded) for w in args if is_source(w.expanded)]
        rule = self.rule or _Rule([], [])
        automatic = any(v in w.text for w in args for v in ("$<", "$^", "$+", "$(<", "$(^"))
        compiles = bool(explicit) or any(w.text == "-c" for w in args) or (automatic and bool(rule.sources))
        scope = self.recipe_scope(explicit, rule)
        if compiles:
            refs = {r for w in args for r in _VAR_REF.findall(w.text)}
            self.recipe_refs.append((refs, scope))
        classify(args, self.out, scope, "recipe", compile=compiles, sources=True)

    def recipe_scope(self, explicit: list[str], rule: _Rule) -> Scope:
        if explicit:
            return Scope.files(*explicit)
        if rule.sources:
            return Scope.files(*rule.sources)
        if rule.targets and all(t.endswith(OBJECT_SUFFIXES) for t in rule.targets):
            return Scope.files(*rule.targets)
        return ALL

    def var_scopes(self) -> dict[str, set[Scope]]:
        """Which scopes each variable reaches the compiler with: the built-in rules read CFLAGS and
        friends, compile recipes read what they reference, and a variable reaches what refers to it."""
        scopes: dict[str, set[Scope]] = {name: {ALL} for name in _MAKE_ROOTS}
        referenced = {r for a in self.assigns for r in a.refs} | {
            r for refs, _ in self.recipe_refs for r in refs
        }
        for refs, scope in self.recipe_refs:
            for ref in refs:
                scopes.setdefault(ref, set()).add(scope)
        for a in self.assigns:
            if a.name not in referenced and _FLAG_NAME.fullmatch(a.name):
                scopes.setdefault(a.name, set()).add(ALL)
        for _ in range(64):
            changed = False
            for a in self.assigns:
                if a.name not in scopes:
                    continue
                reach = {a.scope} if a.scope else scopes[a.name]
                for ref in a.refs:
                    known = scopes.setdefault(ref, set())
                    changed |= not reach <= known
                    known |= reach
            if not changed:
                break
        return scopes

    def finish(self) -> None:
        scopes = self.var_scopes()
        for a in self.assigns:
            words = self.words(a.start, a.end)
            reach = sorted({a.scope} if a.scope else scopes.get(a.name, set()), key=_scope_key)
            for scope in reach or [ALL]:
                classify(words, self.out, scope, a.name, compile=bool(reach), sources=False)
            self.sources_in(words)

    def sources_in(self, words: list[Word]) -> None:
        """Sources named in a variable: files with a source suffix, $(wildcard ...) and $(shell find ...)."""
        for word in words:
            calls = list(re.finditer(r"\$[({](?:wildcard|shell find)\s+", word.text))
            if not calls:
                self.out.source(word)
                continue
            for call in calls:
                inner_start = word.start + call.end()
                inner_end = closing_paren(self.clean, word.start + call.start(), word.end)
                inner_end = word.end if inner_end < 0 else inner_end
                for inner in self.words(inner_start, inner_end):
                    if "find" in call[0] and inner.text.startswith(("-", "'", '"')):
                        break
                    suffix = "/**" if "find" in call[0] else ""
                    self.out.source(
                        Word(inner.text, inner.start, inner.end, inner.expanded + suffix, inner.cut)
                    )
                    if "find" in call[0]:
                        break


def _scope_key(scope: Scope) -> tuple[str, tuple[str, ...], str]:
    return scope.kind.value, scope.patterns, scope.target


def _is_compiler(word: Word) -> bool:
    text = word.text.lstrip("@-+")
    if text in _COMPILER_VARS:
        return True
    expanded = word.expanded.lstrip("@-+")
    return bool(expanded) and _COMPILER.search(expanded) is not None and "=" not in expanded

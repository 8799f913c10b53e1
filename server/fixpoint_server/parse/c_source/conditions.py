"""Conditional compilation, read without a preprocessor: which branches of `#if`/`#ifdef`/`#ifndef`/
`#elif`/`#else`/`#endif` are dead (a constant-0 condition, or after a constant-true branch: never
compiled, so they yield no facts), and where the live conditionals open, switch branch and close - the
statement walker counts braces along one branch only (walker.Walker.condition).
"""

from __future__ import annotations

from dataclasses import dataclass

from fixpoint_server.parse.c_source.expr import evaluate

OPEN, BRANCH, CLOSE = 0, 1, 2
"""What a conditional directive does to the statement walker (see Walker.condition)."""


@dataclass
class _Group:
    """One `#if` ... `#endif` whose directives are read (it is not inside a dead branch)."""

    taken: bool = False
    """A branch known to be compiled (`#if 1`) was seen: every later branch is dead."""
    live: int = 0
    """Branches seen so far that some configuration compiles."""
    dead: bool = False
    """The current branch is never compiled (`#if 0`, `#elif 0`, the `#else` of `#if 1`)."""


class Conditions:
    """Follows `#if`/`#ifdef`/`#ifndef`/`#elif`/`#else`/`#endif`: a branch whose condition is the
    constant 0 (or that follows a constant-true one) is dead and yields no facts; every other branch is
    live. For the walker it records where each conditional opens, where a second live branch starts and
    where the conditional closes (`events`), so braces are counted along one branch only."""

    def __init__(self) -> None:
        self.groups: list[_Group] = []
        self.skip = 0
        """Nesting of conditionals inside a dead branch (their directives are not read)."""
        self.dead_from = 0
        self.events: list[tuple[int, int]] = []
        """(offset of the directive, OPEN / BRANCH / CLOSE), in file order."""

    @property
    def dead(self) -> bool:
        return self.skip > 0 or (bool(self.groups) and self.groups[-1].dead)

    def step(self, name: str, rest: str, start: int, end: int) -> tuple[int, int] | None:
        """Advance over one directive; the dead range it closes, if any."""
        if name in ("if", "ifdef", "ifndef"):
            if self.dead:
                self.skip += 1
                return None
            self.groups.append(_Group())
            self.events.append((start, OPEN))
            self._branch(evaluate(rest) if name == "if" else None, start, end)
            return None
        if name not in ("elif", "else", "endif") or not self.groups:
            return None
        if self.skip:
            self.skip -= name == "endif"
            return None
        was_dead = self.groups[-1].dead
        if name == "endif":
            self.groups.pop()
            self.events.append((start, CLOSE))
        else:
            self._branch(evaluate(rest) if name == "elif" else 1, start, end)
        return (self.dead_from, start) if was_dead and not self.dead else None

    def _branch(self, value: int | None, start: int, end: int) -> None:
        """A branch starts after the directive at start..end; `value` is its condition (None: unknown)."""
        group = self.groups[-1]
        was_dead = group.dead
        group.dead = group.taken or value == 0
        group.taken = group.taken or bool(value)
        if group.dead:
            if not was_dead:
                self.dead_from = end
            return
        if group.live:
            self.events.append((start, BRANCH))
        group.live += 1

    def unterminated(self, n: int) -> list[tuple[int, int]]:
        return [(self.dead_from, n)] if self.dead else []

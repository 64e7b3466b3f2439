"""What an expected failure must look like, and what a failing test actually did.

A matrix ``expected_failures`` entry names the failure it expects (``expect``): a
conformance check that fails (by name, with * and ? wildcards) or an exception (by class
name, a base class's name matches too), optionally with a message pattern. A test that
fails in another way is a failure ("expected-fail for the wrong reason"), so a known wrong
value is never confused with a crash that happens to sit on the same test.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from conformance.harness.errors import ConfigError


class CheckFailure(AssertionError):
    """A conformance check out of its bound (raised by ``Record.require``)."""

    def __init__(self, message: str, check: str) -> None:
        super().__init__(message)
        self.check = check


@dataclass(frozen=True)
class Observed:
    """One failure: the check that failed, or the exception raised."""

    check: str | None
    exc_types: tuple[str, ...]  # the exception's class and base class names
    message: str

    def describe(self) -> str:
        if self.check is not None:
            return f"check {self.check!r} failed"
        first = self.message.strip().splitlines()[0] if self.message.strip() else ""
        return f"raised {self.exc_types[0]}" + (f": {first[:200]}" if first else "")


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside an exception group (Hypothesis: several bugs), or [exc]."""
    group = getattr(exc, "exceptions", None)  # an ExceptionGroup (Hypothesis: several bugs)
    if isinstance(exc, BaseException) and isinstance(group, tuple) and group:
        return [leaf for e in group for leaf in leaves(e)]
    return [exc]


def observe(exc: BaseException) -> list[Observed]:
    """What failed: one Observed per failure (an exception group gives several)."""
    out = []
    for leaf in leaves(exc):
        names = tuple(c.__name__ for c in type(leaf).__mro__ if c is not object)
        check = leaf.check if isinstance(leaf, CheckFailure) else None
        out.append(Observed(check, names, str(leaf)))
    return out


def _patterns(value: Any) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value or ())


@dataclass(frozen=True)
class Expectation:
    checks: tuple[str, ...] = ()  # wildcard patterns on the failing check's name
    raises: str | None = None  # exception class name
    message: str | None = None  # regular expression searched in the failure message

    @classmethod
    def parse(cls, where: str, data: Mapping[str, Any]) -> Expectation:
        message = data.get("message")
        if message is not None:
            try:
                re.compile(message)
            except re.error as exc:
                raise ConfigError(f"{where}.message: {message!r} is not a regular "
                                  f"expression ({exc})") from None
        return cls(_patterns(data.get("check")), data.get("raises"), message)

    def describe(self) -> str:
        if self.checks:
            what = "a failing check " + " or ".join(repr(p) for p in self.checks)
        else:
            what = f"an exception {self.raises}"
        return what + (f" with a message matching {self.message!r}" if self.message else "")

    def matches(self, seen: Observed) -> bool:
        if self.checks:
            if seen.check is None or not any(fnmatch.fnmatchcase(seen.check, p)
                                             for p in self.checks):
                return False
        elif seen.check is not None or self.raises not in seen.exc_types:
            return False
        return self.message is None or re.search(self.message, seen.message) is not None


def wrong_reason(expected: list[tuple[str, Expectation]], seen: list[Observed]) -> str | None:
    """None if every observed failure is one some entry expects; else the one-line verdict."""
    for s in seen:
        if not any(e.matches(s) for _, e in expected):
            wanted = "; ".join(f"matrix {label} expects {e.describe()}" for label, e in expected)
            return f"expected-fail for the wrong reason: {wanted}, but it {s.describe()}"
    return None

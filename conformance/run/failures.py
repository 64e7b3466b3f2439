"""Exceptions during a conformance test, told apart and reported like failed checks.

An exception that propagated through the implementation under test (its call, or its own
code run by autograd in a backward) is a failure of the implementation: "implementation
raised TypeError: ...". Any other exception (outside a conformance check) is an error of
the suite itself: a bug in a check, an oracle or a case builder, and the message says so.
Both get the uniform block (area, implementation, device, dtype, case, reproduce) with the
traceback's tail below it.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from conformance.harness.expectations import CheckFailure, leaves
from conformance.harness.registry import Impl

TRACEBACK_TAIL = 40  # lines of pytest's report kept below the block


def _impl_files(impl: Impl) -> set[str]:
    try:
        path = inspect.getsourcefile(inspect.unwrap(impl.fn))
    except TypeError:
        return set()
    return {str(Path(path).resolve())} if path else set()


def raised_inside(exc: BaseException, impl: Impl | None) -> bool:
    """True if the exception passed through ``Impl.__call__`` or the implementation's
    own source file (an autograd backward runs there without Impl.__call__)."""
    if impl is None:
        return False
    files = _impl_files(impl)
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code is Impl.__call__.__code__:
            return True
        if files and str(Path(code.co_filename).resolve()) in files:
            return True
        tb = tb.tb_next
    return False


SUITE_ERROR = ("error in the suite itself (a bug in a check, an oracle or a case builder, "
               "not in the implementation)")


def classify_exception(exc: BaseException, impl: Impl | None,
                       wrong_reason: str | None = None) -> str | None:
    """The one-line verdict for an exception, or None for a failed conformance check.
    With ``wrong_reason`` (an expected failure that raised instead), that verdict says
    where the exception came from."""
    leaf = leaves(exc)[0]
    if isinstance(leaf, CheckFailure):
        return None
    inside = raised_inside(leaf, impl)
    if wrong_reason:
        return wrong_reason + (" (inside the implementation)" if inside else f"; {SUITE_ERROR}")
    text = " ".join(str(leaf).split())
    what = f"{type(leaf).__name__}" + (f": {text[:300]}" if text else "")
    return f"implementation raised {what}" if inside else f"{SUITE_ERROR}: raised {what}"


def context_block(head: str, record: Any, meta: dict[str, Any]) -> str:
    """The uniform block, from the test's Record when it has one, else from its meta."""
    if record is not None:
        return record.context(head)
    dtype = f" dtype={meta['dtype']}" if meta.get("dtype") else ""
    return "\n".join([f"[{meta['area']}] {head}",
                      f"  impl={meta.get('impl') or '-'} device={meta['device']}{dtype}",
                      "  case: (none)", f"  reproduce: {meta['reproduce']}"])


def tail(text: str, lines: int = TRACEBACK_TAIL) -> str:
    rows = text.rstrip().splitlines()
    cut = rows[-lines:]
    return ("...\n" if len(rows) > lines else "") + "\n".join(cut)

"""Each area's vocabulary: the feature names, limit keys and dtypes its tests understand.

Declared in the matrix entry of the area (``features:``, ``limits:``, ``dtypes:``). A name
an implementation declares (``conformance_features`` / ``_limits`` / ``_dtypes`` /
``_devices``), or a matrix capability entry selects, outside the vocabulary is a usage
error naming the closest valid one: a typo would otherwise turn every case into
"unsupported" and the run into a vacuous pass.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass

DEVICE_KEYS = ("cpu", "cuda", "rocm", "mps", "xpu")


ALIASES = {"fp16": "float16", "half": "float16", "bf16": "bfloat16", "fp32": "float32",
           "float": "float32", "fp64": "float64", "double": "float64", "gpu": "cuda"}


def _hint(name: str, valid: Iterable[str]) -> str:
    valid = set(valid)
    for guess in (name.removeprefix("torch."), ALIASES.get(name.lower())):
        if guess in valid and guess != name:
            return f" (did you mean {guess!r}?)"
    close = difflib.get_close_matches(name, sorted(valid), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


@dataclass(frozen=True)
class Vocabulary:
    area: str
    features: frozenset[str]  # full dotted names ("mask.causal_tl")
    limits: frozenset[str]
    dtypes: tuple[str, ...]

    @property
    def feature_names(self) -> frozenset[str]:
        """Every declared name and each of its dotted prefixes ("mask" for "mask.x")."""
        out = set()
        for f in self.features:
            parts = f.split(".")
            out.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
        return frozenset(out)

    def unknown(self, kind: str, names: Iterable[str]) -> str | None:
        """'unknown feature 'x' for area a (did you mean 'y'?)' for the first bad name."""
        valid = {"feature": self.feature_names, "limit": self.limits,
                 "dtype": frozenset(self.dtypes), "device": frozenset(DEVICE_KEYS)}[kind]
        for name in names:
            if name not in valid:
                hint = _hint(name, valid)
                if hint:
                    return f"unknown {kind} {name!r} for area {self.area}{hint}"
                listed = ", ".join(sorted(valid)) or "none"
                return f"unknown {kind} {name!r} for area {self.area} (valid: {listed})"
        return None

"""Hypothesis settings per ``--profile``.

- ci: bounded and reproducible (seed 0 unless ``--seed``), for pull requests and CPU CI.
- dev: a fresh seed each run (printed), moderate example counts.
- thorough: a fresh seed, many examples; for nightly runs on GPU runners.

Every profile seeds Hypothesis from ``--seed`` (printed in the header and in every failure's
reproduce line) and uses no example database, so a run is reproduced by its command line.

Hypothesis (6.13x and later) also draws about 5 % of its integers and floats from a pool of
constants found in the *local modules loaded so far* (sys.modules outside site-packages).
That pool differs between a whole run and a one-test reproduce, and within a run it grows
as tests import modules (Inductor writes its generated code as local modules) in an order
set by xdist's scheduling: the same seed then draws other cases, and a failure's reproduce
line does not reproduce it. ``apply_profile`` therefore keeps the pool empty (Hypothesis's
built-in constants stay): the draws depend on the seed and the test alone.
"""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, core, settings

EXAMPLES = {"ci": 25, "dev": 60, "thorough": 500}
_SUPPRESSED = [HealthCheck.too_slow, HealthCheck.data_too_large,
               HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much]


def apply_profile(profile: str, seed: int) -> None:
    for name, examples in EXAMPLES.items():
        settings.register_profile(
            f"conformance-{name}",
            max_examples=examples,
            deadline=None,
            database=None,
            derandomize=False,
            print_blob=True,
            suppress_health_check=_SUPPRESSED,
            phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
        )
    settings.load_profile(f"conformance-{profile}")
    core.global_force_seed = seed
    _no_local_constants()


def _no_local_constants() -> None:
    """Empty Hypothesis's pool of constants from loaded local modules (see the module
    docstring); a Hypothesis without the pool needs nothing."""
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:  # pragma: no cover - a Hypothesis without this module
        return
    if not hasattr(providers, "_get_local_constants") or not hasattr(providers, "Constants"):
        return
    empty = providers.Constants()
    providers._get_local_constants = lambda: empty
    cache = getattr(providers, "CONSTANTS_CACHE", None)
    if cache is not None and hasattr(cache, "cache"):
        cache.cache.clear()


def scale(profile: str, ci: int, dev: int, thorough: int) -> int:
    """Pick a size by profile (for sweeps that are not Hypothesis-driven)."""
    return {"ci": ci, "dev": dev, "thorough": thorough}[profile]


def examples(fraction: float) -> settings:
    """Settings for a heavier Hypothesis test: a fraction of the profile's example count
    (read when the test module is imported, after the plugin loaded the profile)."""
    return settings(max_examples=max(5, round(settings.default.max_examples * fraction)))

"""Hypothesis settings per ``--profile``.

- ci: bounded and reproducible (seed 0 unless ``--seed``), for pull requests and CPU CI.
- dev: a fresh seed each run (printed), moderate example counts.
- thorough: a fresh seed, many examples; for nightly runs on GPU runners.

Every profile seeds Hypothesis from ``--seed`` (printed in the header and in every failure's
reproduce line) and uses no example database, so a run is reproduced by its command line.
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


def scale(profile: str, ci: int, dev: int, thorough: int) -> int:
    """Pick a size by profile (for sweeps that are not Hypothesis-driven)."""
    return {"ci": ci, "dev": dev, "thorough": thorough}[profile]


def examples(fraction: float) -> settings:
    """Settings for a heavier Hypothesis test: a fraction of the profile's example count
    (read when the test module is imported, after the plugin loaded the profile)."""
    return settings(max_examples=max(5, round(settings.default.max_examples * fraction)))

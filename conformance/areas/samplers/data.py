"""What each sampler area checks: parameters, sample sizes, invalid calls, extremes.

Sample sizes ``n`` are chosen so that the targeted test detects a 1 % parameter error
(location shifted by 1 % of the scale, scale times 1.01, p times 1.01) with probability
>= 0.99 at the per-check level ``conformance.stats.gof.ALPHA``; ``tests/test_sampler_power.py``
recomputes the required sizes from the oracles and checks these are at least as large.
"""

from __future__ import annotations

from dataclasses import dataclass

FLOATS = ("float16", "bfloat16", "float32", "float64")


@dataclass(frozen=True)
class Extreme:
    params: tuple[float, ...]
    dtypes: tuple[str, ...] | None = None  # None: every dtype of the area
    statistical: bool = True  # also a goodness-of-fit check (else support only)
    n: int = 100_000


@dataclass(frozen=True)
class Precision:
    """A parameter where rounding it to a narrower compute type moves the law most, and the
    n at which the targeted test sees that move with probability >= 0.99 at ALPHA
    (tests/test_sampler_power.py recomputes it)."""

    params: tuple[float, ...]
    n: int
    dtypes: tuple[str, ...]
    rounding: str  # the rounding it detects and the move it makes
    shifted: tuple[float, ...]  # the parameters that rounding gives


@dataclass(frozen=True)
class SamplerSpec:
    area: str
    method: str  # the torch.Tensor method
    main: tuple[float, ...]  # parameters of the powered goodness-of-fit check
    n: int
    others: tuple[tuple[float, ...], ...]  # further parameters, checked at OTHER_N
    invalid: tuple[tuple[tuple[float, ...], str], ...]  # (params, message regex)
    extremes: tuple[Extreme, ...] = ()
    precision: tuple[Precision, ...] = ()

    @property
    def name(self) -> str:
        return self.area.removeprefix("sampler.")


REMAINDER = 13  # every statistical draw has n = 13 (mod 16): vector-loop tails run


def sized(n: int) -> int:
    """``n`` moved to 13 (mod 16): not a multiple of 2, 4, 8 or 16 (never smaller)."""
    return n - n % 16 + REMAINDER + (16 if n % 16 > REMAINDER else 0)


OTHER_N = sized(100_000)
TWO_SAMPLE_N = sized(200_000)
SERIAL_N = sized(1 << 18)
TAIL_N = sized(4_000_000)  # expected counts 400 and 40 beyond the 1e-4 and 1e-5 quantiles
STREAM_N = 4099
RESOLUTION_N = sized(800_000)
# test_large_calls: values per call (past 2^16 and 2^22; dev and thorough past 2^24) and calls
LARGE = {"ci": ((1 << 22) + REMAINDER, 2), "dev": ((1 << 24) + REMAINDER, 2),
         "thorough": ((1 << 24) + REMAINDER, 8)}


def layout_shape(n: int) -> tuple[int, int]:
    """A view of at least ``n`` elements (the powered check's size) with odd extents: no
    dimension a multiple of a vector width."""
    cols = -(-n // 257)
    return 257, cols + (cols % 2 == 0)


SMALL_SIZES = tuple(range(1, 48))  # every remainder mod 16, three times
SMALL_REPEATS = 58  # sum(SMALL_SIZES) * 58 = 65,424 values

SPECS = {s.name: s for s in [
    SamplerSpec(
        "sampler.normal", "normal_", (0.5, 2.0), 800_000,
        others=((0.0, 1.0), (-3.0, 0.25)),
        invalid=(((0.0, -1.0), r"std"),),
        extremes=(Extreme((5.0, 1e-4)), Extreme((0.0, 1e38))),
        precision=(Precision((0.5, 2.0078), 2_600_000, ("float16", "bfloat16"),
                             "std rounded to bfloat16 (2.0078 -> 2.0, -0.39 %)", (0.5, 2.0)),),
    ),
    SamplerSpec(
        "sampler.log_normal", "log_normal_", (1.0, 2.0), 800_000,
        others=((0.0, 0.25), (-2.0, 1.0)),
        invalid=(((1.0, 0.0), r"std"), ((1.0, -1.0), r"std")),
        extremes=(Extreme((0.0, 1e-3)), Extreme((0.0, 30.0))),
    ),
    SamplerSpec(
        "sampler.cauchy", "cauchy_", (0.0, 1.0), 1_600_000,
        others=((2.0, 0.5), (-1.0, 3.0)),
        invalid=(((0.0, 0.0), r"sigma"), ((0.0, -1.0), r"sigma")),
        extremes=(Extreme((0.0, 1000.0)), Extreme((0.0, 1e-6))),
    ),
    SamplerSpec(
        "sampler.exponential", "exponential_", (2.0,), 800_000,
        others=((1.0,), (0.1,)),
        invalid=(((0.0,), r"lambda"), ((-1.0,), r"lambda")),
        extremes=(Extreme((1e-6,)), Extreme((1e6,))),
        precision=(Precision((2.4 * 2.0**-24,), 100_000, ("float32", "float64"),
                             "lambd rounded to float16 (2.4 subnormal steps -> 2, -17 %)",
                             (2.0 * 2.0**-24,)),),
    ),
    SamplerSpec(
        "sampler.uniform", "uniform_", (-1.0, 3.0), 400_000,
        others=((0.0, 1.0), (2.0, 2.5)),
        invalid=(((1.0, 0.0), r"from.*to"),),
        extremes=(Extreme((-1e-3, 1e-3)), Extreme((-3e4, 3e4))),
    ),
    SamplerSpec(
        "sampler.geometric", "geometric_", (0.3,), 600_000,
        others=((0.05,), (0.8,)),
        invalid=(((0.0,), r"p.*\(0, 1\)"), ((1.0,), r"p.*\(0, 1\)"),
                 ((1.5,), r"p.*\(0, 1\)"), ((-0.1,), r"p.*\(0, 1\)")),
        extremes=(Extreme((1 - 1e-6,)), Extreme((0.999,)),
                  Extreme((1e-6,), ("float32", "float64", "int32", "int64")),
                  Extreme((1e-6,), ("float16", "bfloat16"), statistical=False)),
        precision=(Precision((1.3 * 2.0**-24,), 100_000, ("float32", "float64", "int32",
                                                           "int64"),
                             "1 - p rounded to float32 in log(1 - p) (p -> 2^-24, -23 %)",
                             (2.0**-24,)),),
    ),
    SamplerSpec(
        "sampler.bernoulli", "bernoulli_", (0.5,), 800_000,
        others=((0.2,), (0.9,)),
        invalid=(((1.5,), r"p.*\[0, 1\]"), ((-0.1,), r"p.*\[0, 1\]")),
        extremes=(Extreme((0.0,)), Extreme((1.0,)), Extreme((1e-6,)), Extreme((1 - 1e-6,))),
        precision=(Precision((0.99963,), 2_100_000, (*FLOATS, "uint8", "int64"),
                             "p rounded to float16 (1 - p: 3.7e-4 -> 4.88e-4, +32 %) or to "
                             "bfloat16 (p -> 1)", (0.99951171875,)),),
    ),
    SamplerSpec(
        "sampler.random", "random_", (3.0, 103.0), 400_000,
        others=((0.0, 2.0), (0.0, 50.0), (-20.0, 7.0)),
        invalid=(((5.0, 5.0), r"from.*to"), ((5.0, 2.0), r"from.*to")),
    ),
]}

"""Special-function areas (``special.<name>``) against mpmath-backed float64 oracles."""

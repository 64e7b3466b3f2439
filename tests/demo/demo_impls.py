"""Implementations for the demo area."""


def good(x):
    return x


good.conformance_name = "demo.good"
good.conformance_features = ["basic"]


def float64_only(x):
    return x


float64_only.conformance_dtypes = ["float64"]
float64_only.conformance_name = "demo.float64_only"

not_callable = 42


def broken_import():  # referenced as a module that fails to import
    raise AssertionError

"""Errors the harness turns into a one-line message and exit status 4."""


class ConfigError(ValueError):
    """A bad option, matrix or implementation spec; its message is one line."""

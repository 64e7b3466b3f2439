"""torch-conformance: a cross-backend conformance suite for PyTorch.

The harness (this package's modules) is a pytest plugin; the suite's tests live in one
sub-package per feature area (``conformance/areas/<area>/test_*.py``).
"""

try:  # written by setuptools-scm when the package is installed (pyproject.toml)
    from conformance._version import __commit_id__ as COMMIT_AT_INSTALL
    from conformance._version import __version__
except ImportError:  # a source tree on PYTHONPATH, never installed
    __version__, COMMIT_AT_INSTALL = "0+unknown", None
REPORT_SCHEMA_VERSION = 2  # 2: collected, verdict, exit_status; crashed, timed-out, not-run

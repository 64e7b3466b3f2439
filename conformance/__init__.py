"""torch-conformance: a cross-backend conformance suite for PyTorch.

The harness (this package's modules) is a pytest plugin; the suite's tests live in one
sub-package per feature area (``conformance/<area>/test_*.py``).
"""

__version__ = "0.1.0"
REPORT_SCHEMA_VERSION = 2  # 2: collected, verdict, exit_status; crashed, timed-out, not-run

"""Start-up probes for known-bad dependency pairs (``conformance.harness.deps``)."""

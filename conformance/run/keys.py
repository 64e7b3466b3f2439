"""What the plugin stashes on the session and on each item (pytest StashKeys)."""

from __future__ import annotations

import pytest

from conformance.harness.record import Record
from conformance.report.collect import Collector

COLLECTOR = pytest.StashKey[Collector]()
ITEM_META = pytest.StashKey[dict]()
ITEM_TOLERANCE = pytest.StashKey[tuple]()
ITEM_RECORD = pytest.StashKey[Record]()
ITEM_EXPECT = pytest.StashKey[list]()
ITEM_PASS_NOTES = pytest.StashKey[list]()  # a pass under xfails: "fixed in X?" / not strict
NO_IMPL_MARK = pytest.mark.conformance_no_impl

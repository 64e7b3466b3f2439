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
ITEM_BEYOND = pytest.StashKey[list]()  # "fixed in X?" notes of entries past their measurements
NO_IMPL_MARK = pytest.mark.conformance_no_impl

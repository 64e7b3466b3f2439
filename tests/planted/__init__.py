"""Deliberately wrong implementations: the suite must flag every one of them."""

"""Implementations under test that the project ships: adapters over torch APIs, own kernels."""

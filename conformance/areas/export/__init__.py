"""The export area: round trips of models out of eager PyTorch (docs/areas/export.md)."""

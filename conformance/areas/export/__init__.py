"""The export area: round trips of models out of eager PyTorch (README, "Export round trips")."""

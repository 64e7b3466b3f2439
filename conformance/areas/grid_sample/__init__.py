"""The grid_sample area: 2-D torch.nn.functional.grid_sample against a float64 oracle."""

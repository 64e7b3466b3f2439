"""Float64 (or exact integer) numpy/scipy references, one module per area. Torch-free."""

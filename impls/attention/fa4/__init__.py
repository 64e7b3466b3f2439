"""Our FA4-style attention: the algorithm's numerics model (CPU) and CuTe DSL kernels."""

"""The toolchain area: build facts (CUDA / ROCm / BLAS / TorchScript) and the matrix's
requirements on them."""

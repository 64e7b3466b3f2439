"""Implementations for the demo area."""


def good(x):
    return x


good.conformance_name = "demo.good"
good.conformance_features = ["basic"]


def float64_only(x):
    return x


float64_only.conformance_dtypes = ["float64"]
float64_only.conformance_name = "demo.float64_only"

not_callable = 42


def broken_import():  # referenced as a module that fails to import
    raise AssertionError


class _BrokenBackward:  # a torch.autograd.Function, built lazily (torch imported on use)
    fn = None

    @classmethod
    def get(cls):
        if cls.fn is None:
            import torch

            class Identity(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x.clone()

                @staticmethod
                def backward(ctx, grad):
                    raise ValueError("planted: backward not implemented for strided grads")

            cls.fn = Identity
        return cls.fn


def raising(x, mode="forward"):
    """Forward raises for mode='forward'; for mode='backward' the backward raises."""
    if mode == "forward":
        raise TypeError("planted: unsupported operand layout")
    return _BrokenBackward.get().apply(x)


raising.conformance_name = "demo.raising"

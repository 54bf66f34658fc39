"""The error the engine raises on numerical trouble during a run."""


class InferenceError(RuntimeError):
    """Numerical trouble during inference (an improper posterior, a NaN), naming the variable."""


__all__ = ["InferenceError"]

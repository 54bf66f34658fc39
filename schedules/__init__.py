"""The inference engine: algorithms, schedules, the iteration loop and evidence assembly."""

from .algorithms import VMP
from .engine import InferenceError
from .infer import infer

__all__ = ["VMP", "InferenceError", "infer"]

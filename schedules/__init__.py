"""The inference engine: algorithms, schedules, the iteration loop and evidence assembly."""

from .algorithms import NCVMP, VMP
from .engine import InferenceError
from .infer import infer

__all__ = ["NCVMP", "VMP", "InferenceError", "infer"]

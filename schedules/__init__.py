"""The inference engine: algorithms, schedules, the iteration loop and evidence assembly."""

from .algorithms import NCVMP, VMP
from .ep import EP
from .errors import InferenceError
from .gibbs import Gibbs
from .handlers import AIKL, BVI, MVI, Laplace, VIDiag, approximate, projection_log_expectation, site
from .infer import infer
from .scale_quadrature import ScaleQuadrature
from .svi import SVI

__all__ = ["AIKL", "BVI", "EP", "MVI", "NCVMP", "SVI", "VMP", "Laplace",
           "ScaleQuadrature", "VIDiag", "approximate", "InferenceError", "infer",
           "projection_log_expectation", "site"]

__all__ += ["Gibbs"]

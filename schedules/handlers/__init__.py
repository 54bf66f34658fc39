"""Global handlers: optimisers that take over a block of the graph (or a plain log density)."""

from .aikl import AIKL, projection_log_expectation
from .approximate import Approximation, approximate, site
from .bvi import BVI
from .laplace import BlockFit, HandlerError, Laplace
from .mvi import MVI, VIDiag
from .target import BlockTarget, DensityTarget, Site

__all__ = ["AIKL", "BVI", "MVI", "Approximation", "BlockFit", "BlockTarget", "DensityTarget", "HandlerError", "Laplace",
           "Site", "VIDiag", "approximate", "projection_log_expectation", "site"]

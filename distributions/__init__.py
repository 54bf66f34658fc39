"""Exponential-family distributions: natural parameters, expected statistics, entropy, KL, message
algebra (product, ratio, power, damping), sampling, logpdf and moments.

This package imports nothing from ``factors``, ``factorgraph`` or ``schedules``.
"""

from .affine_independent import AffineIndependent
from .base import Distribution, ExponentialFamily
from .bernoulli import Bernoulli
from .beta import Beta
from .binomial import Binomial
from .categorical import Categorical
from .dirichlet import Dirichlet
from .gamma import Gamma
from .gaussian import Gaussian
from .gaussian_gamma import GaussianGamma
from .gaussian_mixture import GaussianMixture
from .gaussian_wishart import GaussianWishart
from .grid_density import GridDensity
from .inverse_sqrt_gamma import InverseSqrtGamma
from .lognormal import LogNormal
from .multinomial import Multinomial
from .mv_gaussian import MvGaussian
from .point_mass import PointMass
from .poisson import Poisson
from .quadrature_mixture import QuadratureMixture
from .tilted_scale import TiltedScale
from .truncated_gamma import TruncatedGamma
from .wishart import Wishart

__all__ = [
    "AffineIndependent",
    "Bernoulli",
    "Beta",
    "Binomial",
    "Categorical",
    "Dirichlet",
    "Distribution",
    "ExponentialFamily",
    "Gamma",
    "Gaussian",
    "GaussianGamma",
    "GaussianMixture",
    "GridDensity",
    "LogNormal",
    "Multinomial",
    "InverseSqrtGamma",
    "MvGaussian",
    "PointMass",
    "Poisson",
    "QuadratureMixture",
    "TiltedScale",
    "TruncatedGamma",
    "GaussianWishart",
    "Wishart",
]

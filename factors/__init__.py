"""Factor families: their edges, message rules per (edge, algorithm, method) and evidence terms.

Adding a factor = one module here + one line in ``FACTOR_TYPES`` + its test fixture.
"""

from .base import FactorType, RuleNotFound
from .binomial import BINOMIAL, BINOMIAL_LOGIT
from .discrete import BERNOULLI, BETA, CATEGORICAL, DIRICHLET
from .factor_analysis import FACTOR_ANALYSIS
from .gamma import GAMMA
from .gaussian import GAUSSIAN
from .gaussian_markov_chain import GAUSSIAN_MARKOV_CHAIN, GAUSSIAN_MARKOV_CHAIN_DIAG
from .grouped_gaussian import GROUPED_GAUSSIAN
from .grouped_linear_gaussian import GROUPED_LINEAR_GAUSSIAN
from .is_positive import IS_POSITIVE
from .linear_gaussian import LINEAR_GAUSSIAN
from .logistic import BERNOULLI_LOGIT
from .markov_chain import MARKOV_CHAIN
from .multinomial import MULTINOMIAL, MULTINOMIAL_SOFTMAX
from .mv_gaussian import MV_GAUSSIAN, MV_GAUSSIAN_FIXED
from .mv_gaussian_wishart import MV_GAUSSIAN_WISHART
from .mv_gaussian_wishart_missing import MV_GAUSSIAN_NORMAL_WISHART_MISSING, MV_GAUSSIAN_WISHART_MISSING
from .normal_gamma import NORMAL_GAMMA, NORMAL_GAMMA_REGRESSION
from .normal_wishart import MV_GAUSSIAN_NORMAL_WISHART, NORMAL_WISHART
from .poisson import POISSON, POISSON_LOG
from .polya_gamma import logit_polya_gamma
from .scale_priors import SCALE_PRIOR
from .scale_sigma import SCALE_SIGMA
from .sites import CAUCHY_SITE, LAPLACE_SITE, PROBIT, STUDENT_T_SITE
from .slice_likelihoods import SCALE_PRIORS, SLICED
from .softmax import CATEGORICAL_SOFTMAX
from .student_t import STUDENT_T
from .uniform_scale import UNIFORM_SCALE
from .wishart import WISHART

FACTOR_TYPES: tuple[FactorType, ...] = (
    GAUSSIAN, GAMMA, BETA, BERNOULLI, DIRICHLET, CATEGORICAL, MV_GAUSSIAN, MV_GAUSSIAN_FIXED,
    NORMAL_GAMMA, NORMAL_GAMMA_REGRESSION, LINEAR_GAUSSIAN, BERNOULLI_LOGIT, CATEGORICAL_SOFTMAX,
    LAPLACE_SITE, CAUCHY_SITE, STUDENT_T_SITE, PROBIT,
    GROUPED_GAUSSIAN,
    POISSON, POISSON_LOG, BINOMIAL, BINOMIAL_LOGIT, MULTINOMIAL, MULTINOMIAL_SOFTMAX,
    WISHART, MV_GAUSSIAN_WISHART, NORMAL_WISHART, MV_GAUSSIAN_NORMAL_WISHART,
)
FACTOR_TYPES += (SCALE_PRIOR,)
FACTOR_TYPES += (MARKOV_CHAIN,)
FACTOR_TYPES += (GAUSSIAN_MARKOV_CHAIN, GAUSSIAN_MARKOV_CHAIN_DIAG)
FACTOR_TYPES += (STUDENT_T,)
FACTOR_TYPES += (UNIFORM_SCALE,)
FACTOR_TYPES += (SCALE_SIGMA,)
FACTOR_TYPES += (GROUPED_LINEAR_GAUSSIAN,)
FACTOR_TYPES += (MV_GAUSSIAN_WISHART_MISSING, MV_GAUSSIAN_NORMAL_WISHART_MISSING)
FACTOR_TYPES += (FACTOR_ANALYSIS,)
FACTOR_TYPES += (IS_POSITIVE,)

__all__ = ["FACTOR_TYPES", "FactorType", "RuleNotFound"]
__all__ += ["logit_polya_gamma"]
__all__ += ["SLICED"]
__all__ += ["SCALE_PRIORS"]

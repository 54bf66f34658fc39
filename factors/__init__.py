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
from .heteroscedastic import GAUSSIAN_LOG_SD, GAUSSIAN_LOGNORMAL_SD
from .is_positive import IS_POSITIVE
from .linear_gaussian import LINEAR_GAUSSIAN
from .logistic import BERNOULLI_LOGIT
from .lognormal import LOGNORMAL
from .markov_chain import MARKOV_CHAIN
from .multinomial import MULTINOMIAL, MULTINOMIAL_SOFTMAX
from .mv_gaussian import MV_GAUSSIAN, MV_GAUSSIAN_FIXED
from .mv_gaussian_wishart import MV_GAUSSIAN_WISHART
from .mv_gaussian_wishart_missing import MV_GAUSSIAN_NORMAL_WISHART_MISSING, MV_GAUSSIAN_WISHART_MISSING
from .negative_binomial import NEGATIVE_BINOMIAL_LOG
from .negative_binomial_gamma import NEGATIVE_BINOMIAL_LOG_GAMMA
from .normal_gamma import NORMAL_GAMMA, NORMAL_GAMMA_REGRESSION
from .normal_wishart import MV_GAUSSIAN_NORMAL_WISHART, NORMAL_WISHART
from .ordinal import ORDERED_LOGISTIC, ORDERED_PROBIT
from .poisson import POISSON, POISSON_LOG
from .polya_gamma import logit_polya_gamma
from .scale_priors import SCALE_PRIOR
from .scale_sigma import SCALE_SIGMA
from .sites import CAUCHY_SITE, LAPLACE_SITE, PROBIT, STUDENT_T_SITE
from .slice_likelihoods import SCALE_PRIORS, SLICED
from .softmax import CATEGORICAL_SOFTMAX
from .student_t import STUDENT_T
from .uniform_scale import UNIFORM_SCALE
from .user_likelihood import USER_LIKELIHOOD, USER_LIKELIHOOD_POSITIVE
from .user_shared import USER_LIKELIHOOD_SHARED
from .wishart import WISHART
from .zero_inflated import ZERO_INFLATED_POISSON_LOG, ZERO_INFLATED_POISSON_LOG_BETA
from .zero_inflated_gamma import ZERO_INFLATED_POISSON, ZERO_INFLATED_POISSON_BETA

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
FACTOR_TYPES += USER_LIKELIHOOD
FACTOR_TYPES += tuple(USER_LIKELIHOOD_POSITIVE.values())
FACTOR_TYPES += tuple(USER_LIKELIHOOD_SHARED.values())
FACTOR_TYPES += (NEGATIVE_BINOMIAL_LOG, ZERO_INFLATED_POISSON_LOG)
FACTOR_TYPES += (ORDERED_LOGISTIC, ORDERED_PROBIT)
FACTOR_TYPES += (GAUSSIAN_LOG_SD,)
FACTOR_TYPES += (LOGNORMAL, GAUSSIAN_LOGNORMAL_SD)
FACTOR_TYPES += (ZERO_INFLATED_POISSON_LOG_BETA,)
FACTOR_TYPES += (NEGATIVE_BINOMIAL_LOG_GAMMA,)
FACTOR_TYPES += (ZERO_INFLATED_POISSON, ZERO_INFLATED_POISSON_BETA)

__all__ = ["FACTOR_TYPES", "FactorType", "RuleNotFound"]
__all__ += ["logit_polya_gamma"]
__all__ += ["SLICED"]
__all__ += ["SCALE_PRIORS"]

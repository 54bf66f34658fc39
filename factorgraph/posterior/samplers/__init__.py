"""Forward samplers, one module per family, beside the pass that walks the model (``forward``).

Each family module registers the draw functions of its factor types in ``forward.SAMPLERS`` with
``@sampler("<factor type>")``; importing this package imports them all, so every registered type can be
drawn by ``Forward.variable``:

* ``gaussian``: Gaussian, Student-t, Laplace/Cauchy/Student-t sites, normal–gamma blocks;
* ``scales``: Gamma precisions and the scales σ of ``fg.half_cauchy`` and kin;
* ``discrete``: Beta, Dirichlet, Bernoulli, Categorical, probit and softmax/logit links;
* ``counts``: Poisson, binomial, multinomial;
* ``mv_gaussian``: multivariate Gaussians with a known or Gamma precision;
* ``wishart``: Wishart and normal–Wishart precisions and the Gaussians given them;
* ``chains``: hidden Markov label chains and Gaussian state chains.
"""

from factorgraph.posterior.samplers import chains, counts, discrete, gaussian, mv_gaussian, scales, wishart
from factorgraph.posterior.samplers.forward import SAMPLERS, Forward, check_draws, check_seed, expand, sampler

__all__ = ["SAMPLERS", "Forward", "chains", "check_draws", "check_seed", "counts", "discrete", "expand", "gaussian",
           "mv_gaussian", "sampler", "scales", "wishart"]

from factorgraph.posterior.samplers import families  # noqa: E402  (the count families' samplers)

__all__ += ["families"]

"""Posteriors made of Markov chain draws: ``EmpiricalPosterior`` and ``GibbsResult`` (what ``fg.Gibbs`` returns).

A Gibbs fit keeps every retained draw of every latent variable, per chain: arrays of shape
``(chains, draws, *plates, *event)``.  Its posterior of a variable is the empirical distribution of the pooled
draws; its diagnostics are ArviZ's rank-normalised split R-hat and bulk effective sample size (Vehtari et al.
2021), which compare the chains.  There is no evidence figure: ``fg.compare`` refuses a Gibbs result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from factorgraph.graph.nodes import ModelError
from factorgraph.posterior.arviz_io import _import_arviz
from factorgraph.posterior.results import Result
from factorgraph.posterior.samplers import check_draws, check_seed

# a variable is flagged when any of its scalars has R-hat above this or a bulk ESS below ESS_MIN
RHAT_MAX = 1.01
ESS_MIN = 400


class EmpiricalPosterior:
    r"""The empirical distribution of Markov chain draws of one variable.

    Parameters
    ----------
    name
        The variable's name.
    draws
        Array of shape ``(chains, draws, *shape)``; ``shape`` is the variable's plates then event axes.
    event_ndims
        How many trailing axes of ``shape`` are event axes (1 for a vector variable).

    Notes
    -----
    With S pooled draws x⁽ˢ⁾: ``mean`` = (1/S) Σ_s x⁽ˢ⁾, ``var`` = (1/(S−1)) Σ_s (x⁽ˢ⁾ − x̄)², ``cov`` the sample
    covariance over the last (event) axis, ``quantile(p)`` the sample quantile (linear interpolation).
    """

    def __init__(self, name: str, draws: np.ndarray, event_ndims: int = 0) -> None:
        self.name = name
        self.draws = np.asarray(draws)
        self.event_ndims = int(event_ndims)

    @property
    def chains(self) -> int:
        return self.draws.shape[0]

    @property
    def shape(self) -> tuple[int, ...]:
        """The variable's shape (plates then event axes)."""
        return self.draws.shape[2:]

    def pooled(self) -> np.ndarray:
        """All draws, chain after chain: shape ``(chains·draws, *shape)``."""
        return self.draws.reshape((-1,) + self.shape).astype(float)

    def mean(self) -> np.ndarray:
        """The sample mean (1/S) Σ_s x⁽ˢ⁾."""
        return self.pooled().mean(0)

    def var(self) -> np.ndarray:
        """The sample variance with divisor S − 1."""
        return self.pooled().var(0, ddof=1)

    def std(self) -> np.ndarray:
        """The sample standard deviation."""
        return np.sqrt(self.var())

    def cov(self) -> np.ndarray:
        """The sample covariance of the last axis, Σ = (1/(S−1)) Σ_s (x⁽ˢ⁾ − x̄)(x⁽ˢ⁾ − x̄)ᵀ, shape
        ``(*shape[:-1], D, D)``."""
        if not self.shape:
            raise ModelError(f"posterior of {self.name!r}: cov needs a vector variable; use var() for a scalar")
        x = self.pooled()
        d = x - x.mean(0)
        return np.einsum("s...i,s...j->...ij", d, d) / (x.shape[0] - 1)

    def quantile(self, q: Any) -> np.ndarray:
        """Sample quantiles at probabilities ``q`` (a number or an array in [0, 1]), leading axes ``q``'s."""
        q = np.asarray(q, dtype=float)
        if not np.all((q >= 0) & (q <= 1)):
            raise ModelError(f"posterior of {self.name!r}: quantile probabilities must lie in [0, 1], got {q!r}")
        return np.quantile(self.pooled(), q, axis=0)

    def interval(self, prob: float = 0.94) -> tuple[np.ndarray, np.ndarray]:
        """The central interval of probability ``prob`` from the sample quantiles."""
        lo, hi = self.quantile([(1 - prob) / 2, (1 + prob) / 2])
        return lo, hi

    def sample(self, shape: int = 1, rng: Any = None) -> np.ndarray:
        """``shape`` draws picked at random (with replacement) among the pooled draws."""
        x = self.pooled()
        idx = np.random.default_rng(rng).integers(0, x.shape[0], size=shape)
        return x[idx]

    def __repr__(self) -> str:
        c, s = self.draws.shape[:2]
        return f"EmpiricalPosterior({self.name!r}: {c} chains × {s} draws, shape {self.shape})"


def _flat(name: str, x: np.ndarray) -> dict[str, np.ndarray]:
    """A variable's draws (chains, draws, *shape) as one (chains, draws) array per scalar, named ``name[i, j]``."""
    shape = x.shape[2:]
    if not shape:
        return {name: x}
    return {f"{name}[{', '.join(map(str, ix))}]": x[(slice(None), slice(None)) + ix] for ix in np.ndindex(*shape)}


def diagnostics(draws: dict[str, np.ndarray]) -> Any:
    """R-hat (rank-normalised split R-hat) and bulk ESS per scalar, as a pandas DataFrame indexed ``name[i]``,
    with the variable's name in column ``variable`` (ArviZ, vectorised over each variable's scalars).  A scalar
    that never moves (an entry fixed by data) has R-hat 1 and ESS the number of draws; a single chain is split in
    two halves."""
    import pandas as pd
    az = _import_arviz()
    frames = []
    for name, x in draws.items():
        x = np.asarray(x, float)
        y = x.reshape(x.shape[:2] + (-1,))
        if y.shape[0] == 1 and y.shape[1] >= 4:  # one chain: its two halves are compared (split R-hat)
            y = y[:, : y.shape[1] // 2 * 2].reshape(2, y.shape[1] // 2, -1)
        ds = az.from_dict(posterior={"x": y}).posterior
        with np.errstate(invalid="ignore", divide="ignore"):
            rhat = np.asarray(az.rhat(ds)["x"].values, float).reshape(-1)
            ess = np.asarray(az.ess(ds, method="bulk")["x"].values, float).reshape(-1)
        still = np.ptp(y, axis=(0, 1)) == 0
        rhat, ess = np.where(still, 1.0, rhat), np.where(still, float(y.shape[0] * y.shape[1]), ess)
        rhat = np.where(np.isnan(rhat), np.inf, rhat)  # too few draws to tell: not mixed
        labels = list(_flat(name, x))
        frames.append(pd.DataFrame({"variable": name, "r_hat": rhat, "ess_bulk": ess}, index=labels))
    return pd.concat(frames)


def flagged(table: Any) -> list[str]:
    """The variables with a scalar whose R-hat exceeds ``RHAT_MAX`` or whose bulk ESS is below ``ESS_MIN``, each
    with its worst R-hat and lowest ESS."""
    out = []
    for name, sub in table.groupby("variable", sort=False):
        r, e = float(sub["r_hat"].max()), float(sub["ess_bulk"].min())
        if not (r <= RHAT_MAX and e >= ESS_MIN):
            out.append(f"{name} (R-hat {r:.3f}, bulk ESS {e:.0f})")
    return out


@dataclass(repr=False)
class GibbsResult(Result):
    """The outcome of ``fg.infer(model, algorithm=fg.Gibbs(...))``: draws per chain, no evidence figure.

    Attributes
    ----------
    draws
        Latent variable name -> array ``(chains, draws, *plates, *event)`` of the retained draws (labels of a
        Categorical or of a hidden Markov chain as integers, −1 past a sequence's length).
    seeds
        The seed sequence of each chain (``numpy.random.SeedSequence(seed).spawn(chains)``).
    """

    draws: dict[str, np.ndarray] = field(default_factory=dict)
    seeds: list[Any] = field(default_factory=list)

    def posterior(self, name: str) -> EmpiricalPosterior:
        """The empirical posterior of latent variable ``name`` (mean, var, std, cov, quantile, interval)."""
        try:
            return self.posteriors[name]
        except KeyError:
            raise KeyError(f"no draws of {name!r}; latent variables are {sorted(self.draws)}") from None

    def sample(self, draws: int | None = None, seed: int | None = 0) -> dict[str, np.ndarray]:
        """Pooled draws by variable name, shape ``(S, *shape)``: all of them (chain after chain) when ``draws`` is
        None or the total number kept, else ``draws`` of them picked at random without replacement (with
        replacement when more are asked than were kept)."""
        total = self.n_chains * self.n_draws
        if draws is None or draws == total:
            return {n: x.reshape((total,) + x.shape[2:]) for n, x in self.draws.items()}
        draws = check_draws(draws, "sample")
        rng = np.random.default_rng(check_seed(seed, "sample"))
        idx = rng.choice(total, size=draws, replace=draws > total)
        return {n: x.reshape((total,) + x.shape[2:])[idx] for n, x in self.draws.items()}

    @property
    def n_chains(self) -> int:
        return next(iter(self.draws.values())).shape[0] if self.draws else 0

    @property
    def n_draws(self) -> int:
        return next(iter(self.draws.values())).shape[1] if self.draws else 0

    def diagnostics(self) -> Any:
        """R-hat and bulk ESS of every scalar (a pandas DataFrame; needs ArviZ)."""
        return diagnostics(self.draws)

    def summary(self, prob: float = 0.94, draws: int = 0, seed: int | None = 0, var_names: Any = None) -> Any:
        """A pandas DataFrame per scalar: mean, sd, the central ``prob`` interval from the sample quantiles, the
        Monte Carlo standard error of the mean, bulk and tail ESS and R-hat (ArviZ's ``az.summary`` of the
        chains).  ``draws`` and ``seed`` are not used (the chains are the draws)."""
        az = _import_arviz()
        names = list(self.draws) if var_names is None else [var_names] if isinstance(var_names, str) else var_names
        unknown = [n for n in names if n not in self.draws]
        if unknown:
            raise ModelError(f"summary: no draws of {unknown}; latent variables are {sorted(self.draws)}")
        idata = az.from_dict(posterior={n: np.asarray(self.draws[n], float) for n in names})
        return az.summary(idata, hdi_prob=prob, kind="all", round_to="none")

    def to_arviz(self, draws: int = 0, seed: int | None = 0, prior: bool = False,
                 posterior_predictive: bool = False, chains: int = 0) -> Any:
        """The chains as an ``arviz.InferenceData``: ``posterior`` with dims ``(chain, draw, *plates, *event)``
        holding the Gibbs draws as they were run (one ArviZ chain per Gibbs chain), plus ``observed_data`` and
        ``log_likelihood`` as for any fit (``Result.to_arviz``); ``draws`` and ``chains`` are those of the run
        (other values are refused)."""
        total = self.n_chains * self.n_draws
        if (draws and draws != total) or (chains and chains != self.n_chains):
            raise ModelError(f"to_arviz of a Gibbs fit gives its own {self.n_chains} chains of {self.n_draws} draws; "
                             f"got draws={draws}, chains={chains}")
        idata = super().to_arviz(total, seed, prior, posterior_predictive, self.n_chains)
        idata.posterior.attrs["draws_from"] = (f"Gibbs sampling: {self.n_chains} chains of {self.n_draws} retained "
                                               "draws")
        return idata

    def __repr__(self) -> str:
        return (f"GibbsResult({self.model_name!r}: {self.n_chains} chains × {self.n_draws} draws of "
                f"{sorted(self.draws)}, {self.time:.3g} s)")


__all__ = ["ESS_MIN", "RHAT_MAX", "EmpiricalPosterior", "GibbsResult", "diagnostics", "flagged"]

"""Several starts of a model with label symmetry, the best bound kept: ``best_of_starts``, for the canned
mixtures and hidden Markov models.

VB for a mixture or an HMM has local optima: the components are exchangeable, and the fit depends on where
the labels start (``fg.infer``'s ``seed``: k-means++ on the data).  The canned models therefore fit from
``n_init`` starts, seeds ``seed``, ``seed + 1``, …, and return the fit with the highest ELBO, saying so in
``Result.notes``; comparing K by the bound needs each K's best.  Where no start depends on the seed
(every selector starts from its components' distinct priors, or there is none) one start is run.
"""

from __future__ import annotations

from typing import Any

from factorgraph.graph import checks
from factorgraph.graph.model import Model
from factorgraph.posterior.results import Result
from schedules import infer


def best_of_starts(model: Model, n_init: int, seed: int | None, what: str, **options: Any) -> Result:
    """``fg.infer(model, seed=s, **options)`` for s = seed, seed + 1, …, seed + n_init − 1 (each start drawn
    afresh when ``seed`` is None); the fit with the highest ELBO, with a note on the starts.

    Fits whose ELBO is within the stopping tolerance (``tol``·|ELBO|) of the highest count as the same optimum
    (a relabelling of it reaches the same bound up to round-off): the first of them is kept, so the result
    does not flip between mirror images.  Stops after the first fit when its start did not depend on the seed
    (``Result.starts``: no selector drawn), as every other start would repeat it.  ``what`` names the caller
    in error messages.
    """
    n_init = checks.positive_int(n_init, f"{what}: n_init")
    seed = checks.seed(seed, f"{what}: seed")
    seeds = [None] * n_init if seed is None else [seed + i for i in range(n_init)]
    fits = []
    for s in seeds:
        fits.append(infer(model, seed=s, **options))
        if all(how == "priors" for how in fits[-1].starts.values()):
            break
    top = max(f.elbo for f in fits)
    tie = float(options.get("tol") or 0.0) * abs(top)  # fits this close ended at the same optimum, or its mirror
    best = next(i for i, f in enumerate(fits) if f.elbo >= top - tie)
    result = fits[best]
    if n_init > 1 and len(fits) == 1:
        result.notes.append(f"1 start of n_init={n_init}: no label's start depends on the seed (the components' "
                            "priors tell them apart, or there are no labels), so every start would be this one")
    elif n_init > 1:
        elbos = ", ".join(f"{f.elbo:.6g}" for f in fits)
        named = f"seeds {seeds[0]}…{seeds[-1]}" if seed is not None else "random seeds"
        result.notes.append(f"best of {len(fits)} starts ({named}; ELBOs {elbos}): kept start {best + 1}"
                            + (f" (seed {seeds[best]})" if seed is not None else ""))
    return result


__all__ = ["best_of_starts"]

"""``fg.infer``: check the options, pick the runner (the algorithm, or a handler wrapping it) and run it.

Each algorithm runs itself (``schedules.runners``): ``fg.VMP()`` and ``fg.NCVMP()`` in memory or over Dask
chunks, ``fg.SVI(...)`` on minibatches, ``fg.ScaleQuadrature()`` around whole fits of the rest of the model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from distributions import MvGaussian
from factorgraph.graph import checks
from factorgraph.graph.model import Model
from factorgraph.graph.nodes import ModelError
from factorgraph.posterior.fitted_data import observed_digest
from factorgraph.posterior.results import Result

from .algorithms import default_algorithm
from .runners import AUTO, RunOptions, is_runner, pick_runner


def infer(model, algorithm: Any = None, *, max_iter: int = 200, tol: Any = AUTO,
          param_tol: Any = AUTO, init: dict[str, Any] | None = None,
          schedule: Sequence[str] | None = None, warmup: Sequence[str] = (),
          damping: dict[str, float] | None = None, handlers: dict[str, Any] | None = None,
          callbacks: Sequence[Callable] = (), progress: bool | None = None, seed: int | None = 0,
          data: Any = None) -> Result:
    """Run inference on a model.

    Parameters
    ----------
    model
        An ``fg.Model``.
    algorithm
        ``fg.VMP()``, ``fg.NCVMP()``, ``fg.EP()`` (expectation propagation; see ``fg.EP``) or
        ``fg.SVI(batch_size=..., learning_rate=...)`` (stochastic variational inference: ``max_iter`` minibatch
        steps; see ``fg.SVI``).  By default (None) VMP when every factor
        has a VMP message rule (conjugate factors, and the quadratic bounds of the logistic and softmax factors), NCVMP
        otherwise (non-conjugate factors that no global handler claims); ``Result.algorithm`` and a
        note say which ran and why.
    max_iter
        Maximum number of sweeps over the schedule.  A run that stops before its stopping rule is met
        (``max_iter`` reached, backtracking given up, a handler's optimiser not converged, a callback)
        has ``converged=False`` and emits a ``fg.ConvergenceWarning`` naming the variables that had not
        settled; the same text is in ``Result.warnings``.  With ``tol`` and ``param_tol`` both None the
        run is ``max_iter`` sweeps, and converged if the last one changed no natural parameter by more
        than 1e-8 (relative).
    tol
        Stop when the ELBO changes by at most ``tol·|ELBO|`` between sweeps (None: never); with damped
        factors, by at most ``tol·|ELBO|·(1 − α)``.
        Default ``"auto"``: 1e-9 under VMP (1e-6 with handlers), None under NCVMP (whose ELBO need not be
        monotone).
    param_tol
        Stop when no natural parameter η changed by more than this, relative to 1 + |η|, in a sweep
        (None: never); with damped factors the change is divided by 1 − α (the full step, not the damped
        one), so heavy damping does not pass for convergence.
        Default ``"auto"``: None under VMP, 1e-8 under NCVMP.
    init
        Starting posteriors by variable name (a distribution object, or for a Categorical an
        array of probabilities, for a Dirichlet an array of concentrations); variables given here are
        updated last in each sweep, after a mixture's selectors.
    schedule
        Explicit update order (names of all latent variables); by default variables next to the
        data come first.
    warmup
        Variables updated once, in this order, after initialisation and before the first sweep;
        the ELBO after the warm-up starts the trace.
    damping
        Per-factor damping by factor name (overrides the algorithm's global damping).
    handlers
        Global handlers by variable name, e.g. ``{"w": fg.MVI("lr")}``: the handler takes over the
        weight vector w and the factors on ``fg.inner(X, w)``; the rest of the graph keeps passing
        messages around it (its messages form the block's prior; q(w)'s moments flow back).  A handler
        built with ``learn=`` also learns the block's hyperparameters: ``Result.hyperparameters(name)``.
    callbacks
        Functions ``cb(iteration, elbo, engine)`` called after each sweep; a true return stops the run
        (unconverged, with a ``ConvergenceWarning``), except the string ``"converged"``, which stops it
        as converged (your own stopping rule).
        ``engine.trace`` holds the ELBO history, ending with the current value.
    progress
        Progress bars on standard error (tqdm when installed, else a plain line): the sweeps with the
        ELBO, and the stages of global handlers (MVI iterations, BVI components, AI-KL lattice rounds,
        Laplace hyperparameter search).  ``None`` (default): shown when standard error is a terminal;
        ``True``: always; ``False``: never.
    seed
        Seeds the random responsibilities that break the symmetry of a mixture's selector when no
        ``init`` is given for it (the only randomness in VMP), and SVI's minibatches.  A selector whose
        components have distinct priors starts from its update given them instead, whatever the seed
        (``Result.starts`` says how each selector started).
    data
        SVI only: an iterable of batches streamed in place of the model's own rows, each a dict of row
        arrays for the data plate keyed by observed variable name (and, for ``fg.inner`` inputs, by the
        expression's name, or ``"X"`` when there is one; for the labels of an indexed view ``x[labels]``, by
        the labels' data node or ``"x[<plate>]"``; for a row constant of a sum or product, by its data node);
        the model built on any rows fixes the shapes and ``fg.SVI(n_data=N)`` the rescaling (a batch has at
        most N rows).  The run stops at ``max_iter`` steps or when the stream ends.  The Result of a streamed
        run keeps no data (``to_arviz``, LOO and the data check of ``fg.compare`` need them).
    """
    if not isinstance(model, Model):
        raise ModelError(f"infer needs an fg.Model, got {type(model).__name__}")
    if algorithm is not None and callable(getattr(algorithm, "fit", None)):
        raise _handler_as_algorithm(model, algorithm)
    if algorithm is not None and not isinstance(getattr(algorithm, "name", None), str):
        raise ModelError(f"algorithm must be an algorithm such as fg.VMP(), fg.NCVMP() or fg.SVI(...), got "
                         f"{checks._short(algorithm)}")
    note = ""
    if algorithm is None:
        algorithm, note = default_algorithm(model, handlers)
    if not is_runner(algorithm):
        raise ModelError(f"algorithm must be an algorithm such as fg.VMP(), fg.NCVMP() or fg.SVI(...), got "
                         f"{algorithm!r}")
    options = RunOptions(max_iter=max_iter, tol=tol, param_tol=param_tol, init=init, schedule=schedule,
                         warmup=warmup, damping=damping, handlers=handlers, callbacks=callbacks, progress=progress,
                         seed=seed, data=data, note=note)
    options = algorithm.admit(model, options).validated()
    result = pick_runner(algorithm, options).run(model, options)
    if options.data is None:  # the data fitted are the model's own (not a stream of batches): fg.compare checks them
        result.data_digest = observed_digest(model)
    return result


def _handler_as_algorithm(model: Model, handler: Any) -> ModelError:
    """The error for a global handler given as the algorithm: it takes over one variable, named in ``handlers=``
    (a scale for ``fg.ScaleQuadrature``, else a Gaussian weight vector), around the algorithm of the rest."""
    latent = [v for v in model.variables.values() if v.is_latent]
    scale = hasattr(handler, "runner")  # integrates a scale out around whole fits
    if scale:
        fits = [v.name for v in latent if getattr(v, "scale_prior", None) and v.shape == ()]
    else:
        fits = [v.name for v in latent if v.family is MvGaussian and len(v.plates) <= 1]
    name = fits[0] if fits else "sigma" if scale else "w"
    where = (f" (its candidates in model {model.name!r}: {fits})" if len(fits) > 1 else
             "" if fits else f" (model {model.name!r} has no variable it can take over yet)")
    kind = "a scale variable" if scale else "a Gaussian weight vector"
    return ModelError(f"{type(handler).__name__} is a global handler, not an algorithm: it takes over {kind} while "
                      f"the algorithm fits the rest, so give it by variable name: fg.infer(model, "
                      f"handlers={{{name!r}: {handler!r}}}){where}")

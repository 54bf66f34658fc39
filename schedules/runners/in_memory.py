"""The in-memory run of VMP and NCVMP: compile the model (or reuse its last compilation), sweep, report.

The compiled structure is kept on the model (``Model._compiled``) with the key of what it depends on besides
the data (``compile_key``); a refit with the same graph and options, after ``set_data`` or not, only derives
again what the data determine (``compiled.rebind``).  ``engine.run`` iterates the schedule; this module turns
its pieces into a ``Result``: the kind of evidence, the notes on what the compilation and the run did, the
learned hyperparameters and what ``fg.predict`` and the derived nodes need.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import numpy as np

from factorgraph.graph import convergence
from factorgraph.graph.derived import derived_moments
from factorgraph.graph.model import Model
from factorgraph.graph.nodes import ModelError, Variable
from factorgraph.posterior.predict import FitRecord
from factorgraph.posterior.results import Result, combine_kinds

from ..binding import rebind
from ..compile import compile_model
from ..compiled import Compiled
from ..engine import run
from .options import RunOptions


def compile_key(model: Model, algorithm: Any, options: RunOptions) -> tuple:
    """What a compiled model depends on besides the data: the graph (its nodes, which variables are latent,
    fully or partly observed) and the options of ``infer`` that shape the compilation (of the handlers,
    which variables they take over)."""
    graph = (tuple(model.plates), len(model.factors), len(model.deterministics), tuple(
        (name, v.is_latent, v.mask is None, v.mask is not None and bool(v.mask.all()),
         getattr(v, "coord_mask", None) is None or bool(np.all(v.coord_mask)))
        for name, v in model.variables.items()))
    return (graph, algorithm, None if options.schedule is None else tuple(options.schedule),
            frozenset(options.init or ()), tuple(sorted((options.damping or {}).items())),
            tuple(options.handlers or ()))


def compiled_for(model: Model, algorithm: Any, options: RunOptions) -> tuple[Compiled, bool]:
    """The model compiled for ``algorithm`` and ``options``, reused from the last fit when its key is the
    same; and whether it was reused."""
    key = compile_key(model, algorithm, options)
    cached = model._compiled
    if cached is not None and cached[0] == key:
        c = cached[1]  # the same graph and options: only what the data determine is derived again
        c.handlers = dict(options.handlers or {})  # the claims depend on which variables are handled, not by what
        rebind(c)
        return c, True
    model._compiled = None
    c = compile_model(model, algorithm, options.schedule, options.init, options.damping, options.handlers)
    model._compiled = (key, c)
    return c, False


def warmup_variables(model: Model, names: list[str]) -> list[Variable]:
    """The latent variables ``warmup=`` names, in its order."""
    warm = []
    for name in names:
        v = model.variables.get(name)
        if v is None or not v.is_latent:
            raise ModelError(f"warmup: {name!r} is not a latent variable of model {model.name!r}")
        warm.append(v)
    return warm


def run_in_memory(model: Model, algorithm: Any, options: RunOptions) -> Result:
    """Fit ``model`` by ``algorithm`` (VMP or NCVMP) with its data in memory; ``options`` validated and their
    tolerances resolved."""
    t0 = time.perf_counter()
    c, reused = compiled_for(model, algorithm, options)
    compile_time = time.perf_counter() - t0
    warm = warmup_variables(model, options.warmup)
    out = run(c, options.max_iter, options.tol, options.param_tol, dict(options.init or {}), list(options.callbacks),
              options.progress, options.seed, warm)
    eng = out["engine"]
    # a block with claimed sites reports their expectation the handler's way; without sites the
    # engine computes every term exactly under the handler's q, which is then an exact ELBO
    kinds = {f.evidence_kind for f in c.factors if f.claimed_by is None} | {
        fit.kind for name, fit in eng.block.items() if c.claimed[name]}
    kind = combine_kinds(kinds)
    elbo_se = float(np.sqrt(sum(fit.site_se**2 for fit in eng.block.values())))
    notes = ([options.note] if options.note else []) + list(out["notes"]) + _compilation_notes(c)
    trace = out["elbo_trace"]
    if c.handlers:
        notes.append("handlers: " + ", ".join(f"{k} ← {h!r} (claims {[f.name for f in c.claimed[k]]})"
                                              for k, h in c.handlers.items()))
    hyper = {k: fit.info["hyperparameters"] for k, fit in eng.block.items() if "hyperparameters" in fit.info}
    if hyper:
        notes.append(f"learned hyperparameters (the evidence is at these values): {hyper}")
    dofs = {f.node.edges["out"].name: {"dof": float(f.params["state"].get("dof", f.params["dof"]))}
            for f in c.factors if f.params.get("learn_dof")}  # fg.student_t(..., dof="learn")
    if dofs:
        notes.append(f"learned Student-t degrees of freedom (the evidence is at these values): {dofs}")
        hyper.update(dofs)
    result = Result(model.name, algorithm.name, dict(eng.q), float(trace[-1]), kind, trace, out["n_iter"],
                    out["converged"], out["time"], compile_time, out["warnings"], elbo_se, notes)
    if reused:
        result.notes.append("compiled structure reused from the last fg.infer on this model (set_data or a refit)")
    # for fg.predict: the model and the data of the fit (set_data may replace them later)
    result.fit_record = FitRecord(model, {k: d.value for k, d in model.data.items()}, model.data_version)
    result.joint.update(eng.joint)
    result.starts.update(eng.starts)
    result.handled.update({name: type(h).__name__ for name, h in (options.handlers or {}).items()})
    result.model = model
    result.derived = derived_moments(eng.node_stats, model)  # fg.deterministic nodes: exact moments under q
    result.hyper.update(hyper)
    result.scales.update(scale_names(model))
    for text in out["unconverged"]:
        convergence.warn(text)
    return result


def _compilation_notes(c: Compiled) -> list[str]:
    """What the compilation and the run did to the model's factors: improper priors, clipped messages, fusions."""
    notes = []
    if any(f.params.get("logdet", 0) is None for f in c.factors):
        notes.append("an improper flat prior contributes no evidence term: the evidence is defined up to a constant")
    clipped = {f.name: f.params["state"]["clipped"] for f in c.factors if f.params["state"].get("clipped")}
    if clipped:
        notes.append(f"messages with negative precision clipped to zero precision (count per factor): {clipped}")
    orders = {f.name: f.params["state"]["order"][0] for f in c.factors if "order" in f.params["state"]}
    orders.update({f.name: f.params["order"] for f in c.factors if f.params.get("order") and "logpdf" in f.params})
    if orders:  # user log densities (fg.likelihood, fg.potential)
        notes.append(f"user log densities: E[log f] by quadrature, exact to 1e-10 per row unless noted, with nodes per "
                     f"random argument {orders}")
    rough = {f.name: f.params["state"]["quadrature_error"] for f in c.factors
             if f.params["state"].get("quadrature_error")}
    if rough:  # a user log density (fg.likelihood) its largest Gauss–Hermite rule did not resolve to 1e-10
        text = (f"Gauss–Hermite quadrature of a user log density less accurate than 1e-10 at its largest rule "
                f"(error per factor): {rough}; pass order= or check the log density for kinks")
        notes.append(text)
        warnings.warn(text, RuntimeWarning, stacklevel=4)
    if c.fused:
        notes.append(f"fused linear-Gaussian factors (cached XᵀX, Xᵀy): {c.fused}")
    if c.grouped:
        notes.append(f"fused grouped linear-Gaussian factors (per-group Gram matrices of the design): {c.grouped}")
    return notes


def scale_names(model: Model) -> list[str]:
    """The latent scales of the model held as a Gamma over σ⁻² (``Result.posterior`` reports them as σ)."""
    return [n for n, v in model.variables.items()
            if getattr(v, "scale_prior", None) and v.base is None and v.is_latent]

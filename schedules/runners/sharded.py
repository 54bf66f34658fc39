"""The sharded run of VMP and NCVMP: a plate whose data are Dask arrays, cut into chunks (docs/design.md §10).

``sharded_run.run_sharded`` iterates the chunks' engines and the driver's globals; this module checks what a
sharded run cannot do and turns its pieces into a ``Result`` (with ``Result.sharding``, the run's report, and
the local posteriors collected from the chunks on demand).
"""

from __future__ import annotations

from typing import Any

from factorgraph.graph import convergence
from factorgraph.graph.model import Model
from factorgraph.graph.nodes import ModelError
from factorgraph.posterior.results import Result, combine_kinds

from ..sharded_run import collect_local, run_sharded
from ..sharding import Sharding
from .in_memory import scale_names, warmup_variables
from .options import RunOptions


def run_sharded_fit(model: Model, algorithm: Any, options: RunOptions, sh: Sharding) -> Result:
    """Fit ``model`` by ``algorithm`` (VMP or NCVMP) over the plate ``sh`` shards; ``options`` validated and their
    tolerances resolved."""
    for hook in getattr(model, "sweep_hooks", ()):  # a hook that moves only globals runs on the driver
        touches = getattr(hook, "touches", None)
        if touches is None or any(sh.plate in model.variables[n].plates for n in touches):
            raise ModelError(f"model {model.name!r} has a sweep hook ({type(hook).__name__}) that moves variables "
                             f"on the sharded plate {sh.plate.name!r}, which live in the chunks; a sharded (dask) "
                             "run cannot apply it: give the data as numpy arrays")
    warm = warmup_variables(model, options.warmup)
    out = run_sharded(model, algorithm, sh, options.max_iter, options.tol, options.param_tol, dict(options.init or {}),
                      options.schedule, options.damping, list(options.callbacks), options.progress, options.seed, warm,
                      options.handlers)
    eng = out["engine"]
    kind = combine_kinds({f.evidence_kind for f in eng.c.factors if f.claimed_by is None} | {
        fit.kind for name, fit in eng.block.items() if eng.c.claimed[name]})
    notes = ([options.note] if options.note else []) + list(out["notes"])
    if getattr(algorithm, "accelerate", False) is True:
        notes.append("acceleration off: the local posteriors of a sharded run live in its chunks, where the sweeps "
                     "are not extrapolated")
    if eng.c.fused:
        notes.append(f"fused linear-Gaussian factors (cached XᵀX, Xᵀy per chunk): {eng.c.fused}")
    trace = out["elbo_trace"]
    result = Result(model.name, algorithm.name, dict(eng.q), float(trace[-1]), kind, trace, out["n_iter"],
                    out["converged"], out["time"], 0.0, out["warnings"], 0.0, notes)
    result.sharding = out["sharding"]
    result.starts.update(out["starts"])
    result.joint.update(eng.joint)
    result.local.update({n: collect_local(out["backend"], model.variables[n], sh)
                         for n, loc in eng.local.items() if loc})
    result.scales.update(scale_names(model))
    for text in out["unconverged"]:
        convergence.warn(text)
    return result

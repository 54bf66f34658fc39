"""How VMP and NCVMP run: in memory, or sharded when the model's data are Dask arrays chunked along a plate."""

from __future__ import annotations

from typing import Any

from factorgraph.graph.model import Model
from factorgraph.graph.nodes import ModelError
from factorgraph.posterior.results import Result

from ..sharding import find_sharding
from .in_memory import run_in_memory
from .options import RunOptions
from .sharded import run_sharded_fit


def admit_message_passing(model: Model, options: RunOptions) -> RunOptions:
    """VMP and NCVMP fit the data in the model: they refuse a stream of batches (``data=``)."""
    if options.data is not None:
        raise ModelError("data= streams batches to fg.SVI only; other algorithms use the data in the model")
    return options


def run_message_passing(model: Model, algorithm: Any, options: RunOptions) -> Result:
    """Fit ``model`` by ``algorithm`` (VMP or NCVMP) with validated ``options``: the ``"auto"`` tolerances are
    chosen from the algorithm (``RunOptions.resolved``), then the run is sharded if the data are Dask arrays
    (``sharding.find_sharding``), in memory otherwise."""
    options = options.resolved(algorithm)
    sh = find_sharding(model)
    if sh is not None:
        return run_sharded_fit(model, algorithm, options, sh)
    return run_in_memory(model, algorithm, options)

"""Validation at the public boundary: every error is a ``ModelError`` naming the argument and the value.

Builders, ``fg.infer`` and the handlers' constructors validate their arguments here, once, so that bad
input never reaches numpy, scipy or numba (where it would fail with an error that names neither).
Helpers for new builders:

* ``number(value, what, low=..., high=...)``: one real number (Python or numpy scalar, 0-d array);
  ``integer(value, what, low=...)``: one integer (not a bool, not a float); ``flag``: a bool;
  ``choice``: one of a few strings; ``seed``: a random seed (None or an integer ≥ 0).
* ``constant(value, what)`` (and ``positive``, ``nonnegative``): a finite float array of parameters.
* ``observed_array(value, mask, shape, name)``: observed data, with missing entries from ``mask=``
  and from a ``numpy.ma`` masked array's own mask; ``integer_labels`` (class labels 0..K−1) and
  ``counts`` (non-negative integer counts) on top of it.
* ``plate_list``, ``plate_size`` and ``array_size``: plates and the size of the arrays they imply.
* ``sd_as_precision`` and ``not_a_scale``: a scale variable σ is an ``sd=``, never a precision.

Every array is refused when it is complex (never silently truncated to its real part), holds strings,
objects, booleans (where numbers are meant) or dates, or has an entry whose magnitude exceeds
``MAX_ABS`` = 1e150: squares and products of such values (x², XᵀX, the sum of squares in a Gaussian's
evidence) overflow float64, which would otherwise surface as a nonsensical posterior of some other
variable.  Positive parameters below ``1/MAX_ABS`` are refused for the same reason (their reciprocal
squared overflows).

The checks live in one module per kind of value (``arrays``: constants and the renderings of values in
messages; ``observed``: observed data, in memory or dask; ``options``: single numbers and options; ``plates``:
plates and shapes; ``sd``: scale arguments); this package gathers them, so ``checks.constant(...)``,
``checks.observed_array(...)`` and the like are called through it.
"""

from __future__ import annotations

from factorgraph.graph.checks.arrays import (
    MAX_ABS,
    as_float_array,
    constant,
    is_dask,
    lazy,
    nonnegative,
    open_unit,
    positive,
    positive_number,
    precision_matrix,
    scanned_once,
)

# the renderings of values in messages, also used by the builders and the engine (checks._short(value))
from factorgraph.graph.checks.arrays import _item as _item
from factorgraph.graph.checks.arrays import _short as _short
from factorgraph.graph.checks.arrays import _show as _show
from factorgraph.graph.checks.arrays import _where as _where
from factorgraph.graph.checks.observed import (
    binary_labels,
    bool_as_float,
    counts,
    dask_mask,
    integer_labels,
    lazy_observed,
    mask_array,
    observed_array,
    one_hot_labels,
)
from factorgraph.graph.checks.options import choice, flag, integer, number, positive_int, seed
from factorgraph.graph.checks.plates import MAX_ELEMENTS, array_size, fits, plate_list, plate_size, sequence_lengths
from factorgraph.graph.checks.sd import not_a_scale, sd_as_precision

__all__ = ["MAX_ABS", "MAX_ELEMENTS", "array_size", "as_float_array", "binary_labels", "bool_as_float", "choice",
           "constant", "counts",
           "dask_mask", "fits", "flag", "integer", "integer_labels", "is_dask", "lazy", "lazy_observed", "mask_array",
           "nonnegative", "not_a_scale", "number", "observed_array", "one_hot_labels", "open_unit", "plate_list",
           "plate_size", "positive", "positive_int", "positive_number", "precision_matrix", "scanned_once",
           "sd_as_precision", "seed", "sequence_lengths"]

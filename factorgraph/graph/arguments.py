"""The arguments of a public builder call, checked against its signature before it runs.

Users arrive with the spellings of other libraries: ``fg.gaussian("mu", mu=0, sigma=1)`` (PyMC),
``loc=``/``scale=`` (NumPyro, scipy), ``fg.gamma("tau", alpha=1, beta=1)``.  A keyword the builder does
not take is named with the keyword meant (its alias in ``ALIASES`` that the builder has, else the closest
spelling), and with the conversion when the meaning differs (``scale=`` of a Gamma is ``1/rate``).

A positional argument whose meaning differs between libraries warns (``POSITIONAL``): the third argument
of ``fg.gaussian`` is a precision 1/σ², where ``pm.Normal("x", 0, 10)`` means σ = 10.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import warnings
from collections.abc import Callable
from typing import Any

from factorgraph.graph.nodes import Gate, ModelError, Node

# another library's keyword -> the keywords it may mean here, the first one the builder takes wins
ALIASES: dict[str, tuple[str, ...]] = {
    "mu": ("mean", "location", "rate"), "loc": ("mean", "location"), "location": ("mean",), "mean": ("location",),
    "sigma": ("sd", "scale"), "std": ("sd", "scale"), "stddev": ("sd", "scale"), "scale": ("sd", "rate"),
    "sd": ("scale",), "tau": ("precision",), "prec": ("precision",), "lam": ("precision", "rate"),
    "var": ("variance",), "sigma2": ("variance",), "cov": ("covariance",), "Sigma": ("covariance",),
    "covariance_matrix": ("covariance",), "precision_matrix": ("precision",), "variance": ("covariance",),
    "p": ("probs",), "prob": ("probs",), "probabilities": ("probs",), "theta": ("probs",), "pi": ("probs",),
    "logits": ("logit",), "logit": ("logits",), "eta": ("logit", "logits", "log_rate"),
    "n": ("trials",), "N": ("trials",), "total_count": ("trials",), "n_trials": ("trials",),
    "obs": ("observed",), "data": ("observed",), "value": ("observed",), "values": ("observed",),
    "y": ("observed",), "observations": ("observed",),
    "nu": ("dof",), "df": ("dof",), "alpha": ("shape", "concentration"), "a": ("shape", "alpha"),
    "k": ("shape",), "concentration": ("shape", "alpha"), "beta": ("rate",), "b": ("rate", "beta"),
    "inverse_scale": ("rate",), "high": ("upper",), "max": ("upper",),
    "shape": ("plates", "dim"), "size": ("plates", "dim"), "dims": ("plates",), "batch_shape": ("plates",),
    "event_shape": ("dim",), "event_size": ("dim",), "d": ("dim",),
}

# (alias, keyword) pairs of one meaning spelled differently, said in a word
SAME: dict[tuple[str, str], str] = {
    ("tau", "precision"): "the precision 1/σ²", ("sigma", "sd"): "the standard deviation σ",
    ("std", "sd"): "the standard deviation σ", ("stddev", "sd"): "the standard deviation σ",
    ("scale", "sd"): "the standard deviation σ", ("var", "variance"): "σ²", ("sigma2", "variance"): "σ²",
}
# (alias, keyword) pairs whose values differ: how to convert
CHANGED: dict[tuple[str, str], str] = {
    ("scale", "rate"): "rate = 1/scale",
    **{(k, "plates"): "a list of fg.plate(name, size), one per axis" for k in ("shape", "size", "dims", "batch_shape")},
    **{(k, "dim"): "the length of the vector" for k in ("shape", "size", "event_shape", "event_size")},
}

# builder -> its positional parameters that mean something else elsewhere, and what to say
POSITIONAL: dict[str, dict[str, str]] = {
    "gaussian": {"precision": "is the precision 1/σ² (so σ = {sigma}), not the standard deviation as in PyMC or "
                              "scipy: write precision={value} to say so, or sd={value} for σ = {value}"},
    "mv_gaussian": {"precision": "is the precision matrix Λ = Σ⁻¹, not the covariance as in PyMC's MvNormal or "
                                 "scipy's multivariate_normal: write precision={value} to say so, or "
                                 "covariance={value} for Σ"},
}


class ArgumentError(ModelError, TypeError):
    """A builder called with arguments its signature does not take (a ``TypeError`` too, as Python raises)."""


def check_call(fn: Callable[..., Any], sig: inspect.Signature, args: tuple, kwargs: dict) -> None:
    """Bind ``args``/``kwargs`` to ``sig``; on failure raise ``ArgumentError`` naming the keywords meant.
    Warn (``UserWarning``, at the caller's line) for a positional argument listed in ``POSITIONAL``."""
    params = sig.parameters
    var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    name = args[0] if args and isinstance(args[0], str) else kwargs.get("name", "?")
    what = f"fg.{fn.__name__}({name!r})"
    unknown = [k for k in kwargs if k not in params] if not var_kw else []
    if unknown:
        hints = [_hint(k, kwargs[k], params) for k in unknown]
        raise ArgumentError(f"{what}: {'; '.join(hints)}.  Its parameters: {_listing(sig)}")
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as e:
        raise ArgumentError(f"{what}: {e}.  Its parameters: {_listing(sig)}") from None
    notes = POSITIONAL.get(fn.__name__, {})
    positional = list(params)[: len(args)]
    for p in positional:
        value = bound.arguments[p]
        if p in notes and not isinstance(value, Node | Gate):
            text = notes[p].format(value=_show(value) or "...", sigma=_sigma(value))
            warnings.warn(f"{what}: the argument after the mean {text}", UserWarning, stacklevel=3)


def checked(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a public builder that records no call (``fg.gaussian_markov_chain``): its arguments are checked as
    ``check_call`` does."""
    sig = inspect.signature(fn)

    @functools.wraps(fn)
    def builder(*args: Any, **kwargs: Any) -> Any:
        check_call(fn, sig, args, kwargs)
        return fn(*args, **kwargs)

    return builder


def _hint(key: str, value: Any, params: Any) -> str:
    meant = next((k for k in ALIASES.get(key, ()) if k in params), None)
    if meant is None:
        close = difflib.get_close_matches(key, [p for p in params if p != "name"], n=1, cutoff=0.7)
        meant = close[0] if close else None
    if meant is None:
        return f"no keyword {key!r}"
    if (key, meant) in CHANGED:
        return f"no keyword {key!r}: use {meant}= instead ({CHANGED[key, meant]})"
    note = SAME.get((key, meant))
    shown = _show(value)
    said = f"write {meant}={shown}" if shown else f"use {meant}= instead"
    return f"no keyword {key!r}: {said}" + (f" ({note})" if note else "")


def _listing(sig: inspect.Signature) -> str:
    out, star = [], False
    for p in sig.parameters.values():
        if p.kind is inspect.Parameter.KEYWORD_ONLY and not star:
            out.append("*")
            star = True
        out.append(p.name if p.default is inspect.Parameter.empty else f"{p.name}=")
    return ", ".join(out)


def _show(value: Any) -> str:
    """A short repr of a number (or a string, a tuple of numbers), or "" (an array, a node)."""
    if not isinstance(value, int | float | str | tuple) or isinstance(value, bool):
        return ""
    text = repr(value)
    return text if len(text) <= 30 else ""


def _sigma(value: Any) -> str:
    try:
        return f"{float(value) ** -0.5:.4g}"
    except (TypeError, ValueError, ZeroDivisionError):
        return "precision^(-1/2)"


__all__ = ["ALIASES", "ArgumentError", "POSITIONAL", "check_call", "checked"]

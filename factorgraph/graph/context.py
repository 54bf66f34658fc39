"""The active models: ``with fg.Model(...)`` pushes its model, and the builders add to the innermost one.

Kept apart from ``model.py`` so that the modules the ``Model`` class builds on (expressions, indexing, data)
can find the active model without importing the class.
"""

from __future__ import annotations

from typing import Any

from factorgraph.graph.nodes import ModelError

_ACTIVE: list[Any] = []  # the models entered and not yet left, innermost last


def enter(model: Any) -> None:
    """Make ``model`` the innermost active model (``Model.__enter__``)."""
    _ACTIVE.append(model)


def leave(model: Any) -> None:
    """Remove ``model`` from the active models (``Model.__exit__``)."""
    _ACTIVE.remove(model)


def current_model(what: str) -> Any:
    """The innermost active model, or a clear error naming what was being built."""
    if not _ACTIVE:
        raise ModelError(f"{what}: no active model; build variables inside `with fg.Model(...):`")
    return _ACTIVE[-1]

"""The compiled model: what compiling a model (``schedules.compile``) makes of it.

The compiled model keeps, for every latent variable, the list of places its messages come from:
factor edges pointing at it (directly or through a gate) and deterministic nodes it feeds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from factorgraph.graph.nodes import Deterministic, FactorNode, Gate, Indexed, Plate, Variable


@dataclass(eq=False)
class CFactor:
    """A factor instance ready to run: plates as global indices, rules resolved per edge."""

    node: FactorNode
    plates: tuple[int, ...]
    sizes: tuple[int, ...]
    params: dict[str, Any]
    rules: dict[str, Any]
    evidence: Any
    evidence_kind: str
    const_stats: dict[str, tuple]  # edge -> statistics of a constant argument
    gate: Gate | None = None
    claimed_by: str | None = None  # the handled variable whose handler owns this factor
    damping: float = 0.0
    initial_damping: float = 0.0
    initial: dict[str, Any] = field(default_factory=dict)  # edge -> NCVMP's first message (``FactorType.initial``)
    weight: np.ndarray | None = None  # 1 = observed, 0 = missing output entry, on the factor's plates (or None)

    @property
    def name(self) -> str:
        return self.node.name


@dataclass(eq=False)
class Consumer:
    """Something that sends messages to a node: a factor edge, or a deterministic child."""

    factor: CFactor | None = None
    edge: str = ""
    det: Deterministic | None = None
    role: str = ""
    index: Indexed | None = None  # an indexed view x[idx] of the node: its messages, segment-summed


@dataclass(eq=False)
class Compiled:
    model: Any
    algorithm: Any
    factors: list[CFactor]
    latent: list[Variable]
    order: list[Variable]
    consumers: dict[int, list[Consumer]] = field(default_factory=dict)  # id(node) -> consumers
    selector_factors: dict[int, list[CFactor]] = field(default_factory=dict)
    fused: list[str] = field(default_factory=list)
    grouped: list[str] = field(default_factory=list)  # fused onto per-group Gram matrices
    # variable name -> plate whose elements are coupled (summed over by a mean-field inner
    # product): updating them all at once is not coordinate ascent, so they go one at a time
    sequential: dict[str, Plate] = field(default_factory=dict)
    # global handlers: variable name -> handler, and the factors each one claimed
    handlers: dict[str, Any] = field(default_factory=dict)
    claimed: dict[str, list[CFactor]] = field(default_factory=dict)
    # handled variable -> natural parameters (Λ₀m₀, −½Λ₀) of its constant prior, for a handler that learns
    # the prior's precision multiplier (flattened class-major for a class-plated block)
    block_prior: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    # partly observed leaves whose missing entries drop out of their likelihood (schedules.missing)
    dropped: set[str] = field(default_factory=set)
    # latent selectors with entries that have no observed descendant: name -> True where an entry is kept
    pruned: dict[str, np.ndarray] = field(default_factory=dict)


__all__ = ["CFactor", "Compiled", "Consumer"]

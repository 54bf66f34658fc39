"""Sequence models: ``fg.markov_chain`` (a categorical hidden Markov chain with an exact posterior)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from distributions import Categorical, Dirichlet
from factorgraph.graph import checks
from factorgraph.graph.builder_base import _check_parent, _plates
from factorgraph.graph.model import current_model
from factorgraph.graph.nodes import FactorNode, Indexed, ModelError, Plate, Variable
from factors.markov_chain import MARKOV_CHAIN


def markov_chain(name: str, initial: Any, transition: Any, *, plates: Sequence[Plate],
                 lengths: Any = None) -> Variable:
    """A hidden state sequence z_1..z_T ∈ {0, …, K−1} that is a Markov chain:
    z_1 ~ Categorical(π), z_t | z_{t−1} ~ Categorical(A[z_{t−1}]).

    The posterior q(z) is the exact chain posterior given the other messages into z (the emissions,
    through gates such as ``fg.gaussian("y", mean=mu[z], precision=tau[z], ...)``): forward–backward
    over all sequences at once, O(T·K²) (MacKay 1997; Beal 2003, ch. 3).  ``result.posterior(name)``
    is a ``CategoricalChain`` whose ``mean()`` gives the smoothed marginals q(z_t = k).

    Parameters
    ----------
    initial
        π: a Dirichlet variable over K states (unplated), or a constant probability vector.
    transition
        A: a Dirichlet variable plated over one plate of size K (row j, the "from" state j, is a
        Dirichlet over the K "to" states), or a constant K×K row-stochastic matrix.
    plates
        The time plate last; any plates before it run over independent sequences (which share π
        and A).  The time plate must be declared after the sequence plates.
    lengths
        Integer lengths 1 ≤ L_n ≤ T, one per sequence (shape of the sequence plates), for sequences
        shorter than the time plate: steps t ≥ L_n do not exist; their marginals are 0, so gated
        factors on them (the emissions, whose data there may be any finite filler) drop out.
    """
    model = current_model(f"markov_chain {name!r}")
    model.check_name(name)
    vplates = _plates(model, plates, name)
    if not vplates:
        raise ModelError(f"{name!r}: a Markov chain needs plates=[..., time], got none")
    if model.sorted_plates(vplates)[-1] is not vplates[-1]:
        raise ModelError(f"{name!r}: the time plate {vplates[-1].name!r} must be declared after the sequence "
                         f"plates {[p.name for p in vplates[:-1]]}")
    vplates = model.sorted_plates(vplates)
    time = vplates[-1]
    Ks: dict[str, int] = {}
    consumed = {"out": time}
    if isinstance(initial, Variable | Indexed):
        _check_parent(model, initial, name, "initial", (Dirichlet,))
        if initial.plates:
            raise ModelError(f"{name!r}: initial {initial.name!r} must be unplated (one Dirichlet over the K "
                             f"states), it has plates {[p.name for p in initial.plates]}")
        Ks["initial"] = initial.event_shape[0]
    else:
        initial = checks.nonnegative(initial, f"{name!r}: initial")
        if initial.ndim != 1 or initial.shape[0] < 2 or not np.isclose(initial.sum(), 1.0, atol=1e-9):
            raise ModelError(f"{name!r}: initial must be a probability vector (≥ 2 entries summing to 1) or a "
                             f"Dirichlet variable, got {checks._show(initial)}")
        Ks["initial"] = initial.shape[0]
    if isinstance(transition, Variable | Indexed):
        _check_parent(model, transition, name, "transition", (Dirichlet,))
        K = transition.event_shape[0]
        if len(transition.plates) != 1 or transition.plates[0].size != K:
            raise ModelError(f"{name!r}: transition {transition.name!r} must be a Dirichlet over {K} states plated "
                             f"over one plate of size {K} (the 'from' state), it has plates "
                             f"{[(p.name, p.size) for p in transition.plates]}")
        if transition.plates[0] in vplates:
            raise ModelError(f"{name!r}: transition {transition.name!r} is plated over {name!r}'s own plate "
                             f"{transition.plates[0].name!r}")
        consumed["transition"] = transition.plates[0]
        Ks["transition"] = K
    else:
        A = checks.nonnegative(transition, f"{name!r}: transition")
        if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] < 2:
            raise ModelError(f"{name!r}: transition must be a K×K matrix (or a plated Dirichlet), got shape {A.shape}")
        sums = A.sum(-1)
        bad = np.flatnonzero(np.abs(sums - 1.0) > 1e-9)
        if bad.size:
            raise ModelError(f"{name!r}: row {bad[0]} of the transition matrix sums to {sums[bad[0]]:.6g}, not 1 "
                             "(rows are the 'from' states and must be probability vectors)")
        transition = A
        Ks["transition"] = A.shape[0]
    if len(set(Ks.values())) > 1:
        raise ModelError(f"{name!r}: initial has {Ks['initial']} states but transition has {Ks['transition']}")
    K = Ks["initial"]
    seq = vplates[:-1]
    seq_shape = tuple(p.size for p in seq)
    lens = checks.sequence_lengths(lengths, seq_shape, time, name)
    var = Variable(model, name, Categorical, vplates, (K,))
    edges = {"out": var, "initial": initial, "transition": transition}
    factor = FactorNode(MARKOV_CHAIN, f"MarkovChain({name})", edges, seq, "default", {"lengths": lens}, consumed)
    var.prior = factor
    model.add_variable(var)
    model.add_factor(factor)
    return var

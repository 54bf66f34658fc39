"""The model: a context that collects plates, variables and factors, and its networkx graph.

The ``Model`` class sits above what it offers as methods: the node algebra its nodes' operators call
(``expressions``, ``indexing``), ``set_data`` (``data``) and ``draw`` (``drawing``); none of those import it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from factorgraph.graph import context, drawing, expressions, indexing
from factorgraph.graph import data as _data
from factorgraph.graph.checks import plate_size
from factorgraph.graph.context import current_model
from factorgraph.graph.nodes import Deterministic, FactorNode, Gate, Indexed, ModelError, Plate, Variable

if TYPE_CHECKING:
    import networkx as nx


class Model:
    """A declarative factor-graph model.

    Use as a context manager; the builder functions (``fg.gaussian``, ``fg.plate``, ...) add to the
    innermost active model::

        with fg.Model("gaussian-mean") as m:
            n = fg.plate("n", 10)
            mu = fg.gaussian("mu", mean=0.0, precision=1e-2)
    """

    def __init__(self, name: str = "model") -> None:
        self.name = name
        self.plates: dict[str, Plate] = {}
        self.variables: dict[str, Variable] = {}
        self.deterministics: list[Deterministic] = []
        self.tracked: dict[str, Deterministic] = {}  # deterministic nodes named by fg.deterministic
        self.factors: list[FactorNode] = []
        self._names: set[str] = set()
        self.data: dict[str, Any] = {}  # data node name -> fg.data node
        self.calls: dict[str, Any] = {}  # variable name -> its recorded builder call (factorgraph.graph.data)
        self.coords: dict[str, Any] = {}  # plate name -> labels of its elements (group names), for to_arviz
        self.data_version = 0  # bumped by set_data
        self.compilations = 0  # how many times fg.infer compiled this model (a refit after set_data does not)
        self._compiled: Any = None  # (key, compiled model) of the last fg.infer, reused when the key matches
        # functions hook(engine) run at the end of every VMP sweep, before its ELBO is taken: moves of q that
        # never lower the bound (the rotation of linear_state_space(rotate=True))
        self.sweep_hooks: list[Any] = []

    def __getstate__(self) -> dict:
        """A pickled model leaves out what ``fg.infer`` compiled (rule functions, kernels' state): the next
        fit after unpickling compiles again."""
        state = self.__dict__.copy()
        state["_compiled"] = None
        return state

    def __enter__(self) -> Model:
        context.enter(self)
        return self

    def __exit__(self, *exc) -> None:
        context.leave(self)

    # ------------------------------------------------------------------------------ registration
    def add_plate(self, name: str, size: int) -> Plate:
        if not isinstance(name, str) or not name:
            raise ModelError(f"a plate needs a non-empty string name, got {name!r}")
        if name in self.plates:
            raise ModelError(f"plate {name!r} is declared twice in model {self.name!r}")
        if isinstance(size, bool) or not isinstance(size, int | np.integer) or size <= 0:
            raise ModelError(f"plate {name!r} needs a positive integer size, got {size!r}")
        plate = Plate(name, plate_size(size, name), len(self.plates))
        self.plates[name] = plate
        return plate

    def check_name(self, name: str) -> str:
        """Validate a new variable's name (claimed only when the variable is registered, so a call
        that fails on a later argument leaves the name free)."""
        if not isinstance(name, str) or not name:
            raise ModelError(f"a variable needs a non-empty string name, got {name!r}")
        if name in self._names:
            raise ModelError(f"the name {name!r} is used twice in model {self.name!r}")
        return name

    def claim_name(self, name: str) -> str:
        self._names.add(self.check_name(name))
        return name

    def fresh_name(self, stem: str) -> str:
        i = 0
        while f"{stem}_{i}" in self._names:
            i += 1
        return self.claim_name(f"{stem}_{i}")

    def add_variable(self, var: Variable) -> Variable:
        self.claim_name(var.name)
        self.variables[var.name] = var
        return var

    def add_factor(self, factor: FactorNode) -> FactorNode:
        self.factors.append(factor)
        return factor

    def sorted_plates(self, plates: Iterable[Plate]) -> tuple[Plate, ...]:
        uniq = {p.name: p for p in plates}
        return tuple(sorted(uniq.values(), key=lambda p: p.index))

    def set_data(self, **values: Any) -> None:
        """Replace the values of data nodes (``fg.data``) by name: ``model.set_data(X=X_new, y=y_new)``.

        The new values pass the checks of construction (the builders that read them are re-run), and the
        plates a data node spans may change size; every data node on a resized plate must then be
        replaced in the same call.  The graph is unchanged, so the next ``fg.infer`` with the same options
        reuses what the last one compiled (``model.compilations`` does not grow) and gives the result of
        a model built afresh with the new data.  On a ``ModelError`` the model is left as it was.
        """
        _data.set_data(self, values)

    # ------------------------------------------------------------------------------ node algebra
    # the operators of the model's nodes (nodes.py) are built here: x + y, c * x, -x, x[z] and x[idx]
    def _sum(self, a: Any, b: Any) -> Deterministic:
        return expressions.add(a, b)

    def _product(self, a: Any, b: Any) -> Deterministic:
        return expressions.multiply(a, b)

    def _scaled(self, c: Any, a: Any) -> Deterministic:
        return expressions.scale(c, a)

    def _gate(self, source: Any, selector: Any) -> Gate:
        return expressions.gate(source, selector)

    def _index(self, x: Any, labels: Any) -> Indexed:
        return indexing.index(x, labels)

    # ------------------------------------------------------------------------------ inspection
    def __getitem__(self, name: str) -> Variable:
        try:
            return self.variables[name]
        except KeyError:
            raise KeyError(f"model {self.name!r} has no variable {name!r}; it has "
                           f"{sorted(self.variables)}") from None

    @property
    def graph(self) -> nx.Graph:
        """Bipartite networkx graph: variable and deterministic nodes (``bipartite=0``) and
        factors (``bipartite=1``); edges carry the factor's edge name as ``edge``."""
        import networkx as nx  # a heavy import, only for this view (``import factorgraph`` does not need it)

        g = nx.Graph(name=self.name)
        for v in self.variables.values():
            g.add_node(v.name, bipartite=0, kind="variable", family=v.family.__name__,
                       observed=v.is_observed, plates=[p.name for p in v.plates])
        for d in self.deterministics:
            g.add_node(d.name, bipartite=0, kind="deterministic", family="Gaussian",
                       observed=False, plates=[p.name for p in d.plates])
            for role, parent in d.parents.items():
                parent = parent.source if isinstance(parent, Indexed) else parent  # x[idx]: an edge to x
                if isinstance(parent, Variable | Deterministic):
                    g.add_edge(d.name, parent.name, edge=role)
        for f in self.factors:
            g.add_node(f.name, bipartite=1, kind="factor", type=f.ftype.name, method=f.method)
            for edge, arg in f.edges.items():
                target = arg.source if isinstance(arg, Gate | Indexed) else arg
                if isinstance(target, Variable | Deterministic):
                    g.add_edge(f.name, target.name, edge=edge)
                if isinstance(arg, Gate):
                    sel = arg.selector.source if isinstance(arg.selector, Indexed) else arg.selector
                    g.add_edge(f.name, sel.name, edge=f"{edge}.selector")
        return g

    def draw(self, backend: str | None = None):
        """Draw the factor graph: a ``graphviz.Digraph`` where the graphviz package and the Graphviz ``dot``
        program are installed (variables as circles, observed ones shaded, factors as small squares, plates
        as boxes labelled with their sizes, gates as dashed edges from the selector), else the same graph
        as a matplotlib ``Figure`` drawn through networkx.  ``backend="matplotlib"`` or ``"graphviz"``
        chooses."""
        return drawing.draw(self, backend)

    def __repr__(self) -> str:
        return (f"Model({self.name!r}: {len(self.variables)} variables, {len(self.factors)} factors, "
                f"plates {[(p.name, p.size) for p in self.plates.values()]})")


__all__ = ["Model", "current_model"]

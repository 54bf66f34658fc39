"""``model.draw()``: the factor graph as a picture.

With the ``graphviz`` Python package and the Graphviz ``dot`` program, ``model.draw()`` returns a
``graphviz.Digraph`` (it renders itself in notebooks, and ``.render(format="svg")`` or
``.pipe(format="png")`` write files): variables are circles, observed ones shaded (lightly when only
partly observed), deterministic nodes dashed circles, factors small black squares, plates boxes
(clusters) labelled with their names and sizes, and gates a dashed edge from the selector to the
factor it switches.  Edges point from parents through the factor to the variable it defines.

Where either is missing, the same graph is drawn with matplotlib through networkx and a matplotlib
``Figure`` is returned, so drawing never fails on a fresh machine; ``backend="matplotlib"`` asks for that
drawing, ``backend="graphviz"`` for the ``Digraph`` even without ``dot`` (its ``.source`` is still
valid DOT text).
"""

from __future__ import annotations

import shutil
from typing import Any

from factorgraph.graph.nodes import Deterministic, Gate, Indexed, Node, Plate, Variable

OBSERVED, PARTIAL = "#b0b0b0", "#dedede"


def _target(a: Any) -> Node | None:
    a = a.source if isinstance(a, Gate | Indexed) else a
    return a if isinstance(a, Variable | Deterministic) else None


def _ids(model: Any) -> dict[str, str]:
    """Node ids by variable name: ``v<i>`` (plain ids: DOT reads a colon as a port)."""
    names = [*model.variables, *(d.name for d in model.deterministics)]
    return {name: f"v{i}" for i, name in enumerate(names)}


def _edges(model: Any) -> list[tuple[str, str, str, bool]]:
    """(tail id, head id, label, gate?) of every edge, by node ids ``v<i>`` and ``f<index>``."""
    ids = _ids(model)
    out: list[tuple[str, str, str, bool]] = []
    for d in model.deterministics:
        for role, parent in d.parents.items():
            t = _target(parent)
            if t is not None:
                out.append((ids[t.name], ids[d.name], role, False))
    for i, f in enumerate(model.factors):
        fid = f"f{i}"
        for edge, arg in f.edges.items():
            t = _target(arg)
            if t is not None:
                out.append((fid, ids[t.name], "", False) if edge == "out" else (ids[t.name], fid, edge, False))
            if isinstance(arg, Gate):  # a selector gathered by labels (z[g]) is drawn as z
                out.append((ids[_target(arg.selector).name], fid, f"{edge} gate", True))
        if "out" not in f.edges:  # a likelihood defined through its parameters (the normal–gamma regression)
            out += [(fid, ids[v.name], "", False) for v in model.variables.values() if v.prior is f]
    return out


def _nodes(model: Any) -> list[tuple[str, str, str, tuple[Plate, ...]]]:
    """(id, label, kind, plates); kind is observed / partial / latent / deterministic / factor."""
    ids = _ids(model)
    out = []
    for v in model.variables.values():
        kind = "observed" if v.is_observed else ("partial" if v.mask is not None else "latent")
        out.append((ids[v.name], v.name, kind, tuple(v.plates)))
    for d in model.deterministics:
        out.append((ids[d.name], d.name, "deterministic", tuple(d.plates)))
    for i, f in enumerate(model.factors):
        out.append((f"f{i}", f.ftype.name, "factor", tuple(f.plates)))
    return out


def _plate_label(p: Plate) -> str:
    return f"{p.name} = {p.size}"


def to_graphviz(model: Any) -> Any:
    """The model as a ``graphviz.Digraph`` (see the module docstring)."""
    import graphviz

    g = graphviz.Digraph(model.name, graph_attr={"rankdir": "TB", "label": model.name, "labelloc": "t",
                                                 "fontname": "Helvetica"},
                         node_attr={"fontname": "Helvetica", "fontsize": "11"},
                         edge_attr={"arrowsize": "0.6", "fontsize": "9", "fontname": "Helvetica"})
    # clusters nest by the plates' declaration order: the cluster of (n, k) sits inside that of (n,)
    tree: dict[tuple[Plate, ...], list[str]] = {}
    node_attrs: dict[str, dict[str, str]] = {}
    for nid, label, kind, plates in _nodes(model):
        plates = tuple(sorted(plates, key=lambda p: p.index))
        tree.setdefault(plates, [])
        for j in range(1, len(plates)):
            tree.setdefault(plates[:j], [])
        if kind == "factor":
            attrs = {"shape": "square", "label": "", "width": "0.15", "height": "0.15", "style": "filled",
                     "fillcolor": "black", "tooltip": label, "xlabel": label, "fontsize": "8"}
        else:
            attrs = {"shape": "circle", "label": label}
            if kind in ("observed", "partial"):
                attrs.update(style="filled", fillcolor=OBSERVED if kind == "observed" else PARTIAL)
            elif kind == "deterministic":
                attrs.update(style="dashed")
        tree[plates].append(nid)
        node_attrs[nid] = attrs

    def build(parent: Any, key: tuple[Plate, ...]) -> None:
        for nid in tree.get(key, []):
            parent.node(nid, **node_attrs[nid])
        children = [k for k in tree if len(k) == len(key) + 1 and k[:len(key)] == key]
        for k in sorted(children, key=lambda t: [p.index for p in t]):
            name = "cluster_" + "_".join(p.name for p in k)
            with parent.subgraph(name=name) as sub:
                sub.attr(label=_plate_label(k[-1]), labeljust="r", labelloc="b", style="rounded", color="#606060")
                build(sub, k)

    build(g, ())
    for tail, head, label, gate in _edges(model):
        attrs = {"style": "dashed", "color": "#c04000", "label": label} if gate else {}
        g.edge(tail, head, **attrs)
    return g


def to_matplotlib(model: Any, ax: Any = None) -> Any:
    """The model drawn with matplotlib through networkx; returns the ``Figure``."""
    if ax is None:
        from matplotlib.figure import Figure

        fig = Figure(figsize=(7, 5))  # not registered with pyplot: no window, no global state
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    import networkx as nx  # heavy: imported when a model is drawn, not with factorgraph

    G = nx.DiGraph()
    nodes = _nodes(model)
    for nid, label, kind, plates in nodes:
        G.add_node(nid, label=label, kind=kind, plates=plates)
    edges = _edges(model)
    for tail, head, _, gate in edges:
        G.add_edge(tail, head, gate=gate)
    try:
        order = list(nx.topological_sort(G))
        layer = {}
        for n in order:
            layer[n] = 1 + max((layer[p] for p in G.predecessors(n)), default=-1)
        for n in G:
            G.nodes[n]["layer"] = -layer[n]
        pos = nx.multipartite_layout(G, subset_key="layer", align="horizontal")
        for n, kind in G.nodes(data="kind"):  # a factor sits right above the variable it defines
            kids = list(G.successors(n)) if kind == "factor" else []
            if len(kids) == 1:
                pos[n] = (pos[kids[0]][0], pos[n][1])
    except nx.NetworkXUnfeasible:
        pos = nx.spring_layout(G, seed=0)
    colour = {"observed": OBSERVED, "partial": PARTIAL, "latent": "white", "deterministic": "white"}
    for kind in ("latent", "observed", "partial", "deterministic"):
        ids = [n for n, k in G.nodes(data="kind") if k == kind]
        if ids:
            nx.draw_networkx_nodes(G, pos, nodelist=ids, ax=ax, node_shape="o", node_size=1400,
                                   node_color=colour[kind], edgecolors="black",
                                   linewidths=1.0 if kind != "deterministic" else 0.8)
    facs = [n for n, k in G.nodes(data="kind") if k == "factor"]
    nx.draw_networkx_nodes(G, pos, nodelist=facs, ax=ax, node_shape="s", node_size=80, node_color="black")
    plain = [(u, v) for u, v, gt in G.edges(data="gate") if not gt]
    gates = [(u, v) for u, v, gt in G.edges(data="gate") if gt]
    order = list(G)
    sizes = [80 if G.nodes[n]["kind"] == "factor" else 1400 for n in order]
    nx.draw_networkx_edges(G, pos, edgelist=plain, ax=ax, arrows=True, nodelist=order, node_size=sizes, arrowsize=10)
    nx.draw_networkx_edges(G, pos, edgelist=gates, ax=ax, arrows=True, nodelist=order, node_size=sizes,
                           style="dashed", edge_color="#c04000", arrowsize=10)

    def text(nid: str, label: str, kind: str, plates: tuple[Plate, ...]) -> str:
        if kind == "factor":
            return ""
        return label + ("\n" + ", ".join(_plate_label(p) for p in plates) if plates else "")

    nx.draw_networkx_labels(G, pos, labels={nid: text(nid, lab, k, pl) for nid, lab, k, pl in nodes}, ax=ax,
                            font_size=8)
    for nid, label, kind, _ in nodes:
        if kind == "factor":
            x, y = pos[nid]
            ax.annotate(label, (x, y), xytext=(5, -8), textcoords="offset points", fontsize=6, color="#404040")
    ax.set_title(f"{model.name}  (plates: " + ", ".join(_plate_label(p) for p in model.plates.values()) + ")"
                 if model.plates else model.name, fontsize=10)
    ax.set_axis_off()
    ax.margins(0.15)
    return fig


def has_dot() -> bool:
    """Whether the Graphviz ``dot`` program is on the PATH."""
    return shutil.which("dot") is not None


def draw(model: Any, backend: str | None = None) -> Any:
    """``model.draw()``: a ``graphviz.Digraph`` where Graphviz is installed, else a matplotlib ``Figure``."""
    if backend not in (None, "graphviz", "matplotlib"):
        raise ValueError(f"draw: backend must be None, 'graphviz' or 'matplotlib', got {backend!r}")
    if backend == "graphviz":
        return to_graphviz(model)
    if backend is None and has_dot():
        try:
            return to_graphviz(model)
        except ImportError:
            pass
    return to_matplotlib(model)

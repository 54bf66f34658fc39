"""The house: the library's layout keeps its layers.

- no library module over 500 lines;
- no import cycle between library modules, counting imports inside functions and under TYPE_CHECKING;
- no first-party import deferred into a function body (a deferred import that only dodges a cycle is a cycle);
- the import-linter contracts in pyproject.toml hold (the layers, and acyclic siblings at every depth);
- every public name imports from where the docs say.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("distributions", "factors", "factorgraph", "schedules")
MAX_LINES = 500


def _library_files() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py") if "__pycache__" not in p.parts)


def test_no_library_module_is_over_500_lines() -> None:
    big = {str(p.relative_to(ROOT)): n for p in _library_files()
           if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not big, f"modules over {MAX_LINES} lines (split them along the seams of their ideas): {big}"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[str | tuple[str, str], bool]]:
    """(imported module, or (module, name) of a from-import, inside a function?) for every first-party import of
    a file, relative ones resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    mod = _module_name(path)
    pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    found: list[tuple[str, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            if isinstance(child, ast.Import):
                found.extend((a.name, inner) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    up = pkg.split(".")[: len(pkg.split(".")) - (child.level - 1)]
                    base = ".".join(up + ([base] if base else []))
                # `from package import submodule` imports the submodule; `from module import name`, the module
                found.extend(((base, a.name), inner) for a in child.names)
            visit(child, inner)

    visit(tree, False)
    return [(m, f) for m, f in found if (m if isinstance(m, str) else m[0]).split(".")[0] in PACKAGES]


def _graph() -> tuple[nx.DiGraph, dict[str, list[str]]]:
    files = _library_files()
    modules = {_module_name(p) for p in files}
    G = nx.DiGraph()
    deferred: dict[str, list[str]] = {}
    for p in files:
        src = _module_name(p)
        G.add_node(src)
        for target, in_function in _imports(p):
            if not isinstance(target, str):
                base, name = target
                target = f"{base}.{name}" if f"{base}.{name}" in modules else base
            while target and target not in modules:  # `import pkg.mod.sub` of a non-module -> pkg.mod
                target = target.rpartition(".")[0]
            if not target or target == src:
                continue
            G.add_edge(src, target)
            if in_function and target not in deferred.setdefault(src, []):
                deferred[src].append(target)
    return G, {k: v for k, v in deferred.items() if v}


def test_no_import_cycle_between_library_modules() -> None:
    G, _ = _graph()
    cycles = [sorted(c) for c in nx.strongly_connected_components(G) if len(c) > 1]
    assert not cycles, f"import cycles: {cycles}"


def test_no_first_party_import_is_deferred_into_a_function() -> None:
    # the package root is the facade over every layer; it loads the engine's names on first use (PEP 562)
    _, deferred = _graph()
    deferred.pop("factorgraph", None)
    assert not deferred, f"first-party imports inside functions: {deferred}"


def test_the_graph_checker_sees_a_cycle_and_a_deferred_import(tmp_path: Path, monkeypatch) -> None:
    pkg = tmp_path / "factors"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from factors import b\n")
    (pkg / "b.py").write_text("def f():\n    from .a import x\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "PACKAGES", ("factors",))
    G, deferred = _graph()
    assert [sorted(c) for c in nx.strongly_connected_components(G) if len(c) > 1] == [["factors.a", "factors.b"]]
    assert deferred == {"factors.b": ["factors.a"]}


def test_import_linter_contracts_hold() -> None:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    assert exe, "lint-imports is not installed (the test extra installs import-linter)"
    out = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "broken" not in out.stdout.lower().replace("0 broken", "")


@pytest.mark.parametrize("where, names", [
    ("factorgraph", None),
    ("factorgraph.models", None),
    ("factorgraph.estimators", None),
    ("factorgraph.plots", ("elbo_trace", "evidence_comparison", "posterior_marginals")),
])
def test_public_names_import_from_where_the_docs_say(where: str, names) -> None:
    import importlib

    mod = importlib.import_module(where)
    names = names or mod.__all__
    missing = [n for n in names if not hasattr(mod, n)]
    assert not missing, f"{where} lacks {missing}"

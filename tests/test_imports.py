"""The package's imports go one way: no cycles between its modules, and only the views (and the
two documented helpers) reach for widgets.

Read from the source with ``ast`` (nothing is imported), counting every import: at module level
and inside functions.  A lazy import inside a function still ties two modules together, which is
why the question types left ``checks``.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "gpu_lessons"


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(name: str, *, lazy: bool) -> set[str]:
    """The package modules ``name`` imports (``lazy``: also inside functions)."""
    path = MODULES[name]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    nodes = ast.walk(tree) if lazy else tree.body
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            # ``from . import x`` imports the module x; ``from .m import f`` the module m
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base
                       for a in node.names]
        else:
            continue
        found |= {t for t in targets if t in MODULES and t != name}
    return found


def _cycles(lazy: bool) -> set[frozenset]:
    """Strongly connected components of more than one module (Tarjan)."""
    edges = {m: _imports(m, lazy=lazy) for m in MODULES}
    index, low, stack, on, out = {}, {}, [], set(), set()

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.add(frozenset(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_the_reader_sees_the_imports_it_should():
    """The checks below are only as good as this reader: known edges, both kinds."""
    assert "gpu_lessons.questions.types" in _imports("gpu_lessons.checks", lazy=False)
    assert "gpu_lessons.kernels.lang" in _imports("gpu_lessons.kernels", lazy=False)
    assert "gpu_lessons.puzzles._registry" in _imports("gpu_lessons.puzzles.on_gpu", lazy=True)
    assert "gpu_lessons.puzzles._registry" not in _imports("gpu_lessons.puzzles.on_gpu",
                                                           lazy=False)


def test_no_import_cycle_at_module_level():
    assert _cycles(lazy=False) == set()


def test_no_import_cycle_through_a_function():
    """A lazy import inside a function ties two modules together too: give the shared part a
    module of its own instead (as puzzles/_section.py and overlap_record.py do)."""
    cycles = _cycles(lazy=True)
    assert not cycles, f"import cycles: {[sorted(c) for c in cycles]}"


def test_only_views_and_two_helpers_import_widgets():
    """Models never import widgets: outside ``views/``, only ``notebook`` (Bokeh's set-up for
    a lesson) and ``puzzles.show`` (a kernel's picture) reach the view layer."""
    widgetry = ("ipywidgets", "bokeh", "gpu_lessons.views")
    users = set()
    for name, path in MODULES.items():
        if name.startswith("gpu_lessons.views"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            mods = ([a.name for a in node.names] if isinstance(node, ast.Import)
                    else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level
                    else [])
            if isinstance(node, ast.ImportFrom) and node.level and (node.module or "").startswith(
                    "views"):
                mods = ["gpu_lessons.views"]
            if any(m == w or m.startswith(w + ".") for m in mods for w in widgetry):
                users.add(name)
    assert users == {"gpu_lessons.notebook", "gpu_lessons.puzzles"}

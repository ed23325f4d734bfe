"""What the puzzles ask of a kernel, answered from its validated form (:class:`Kernel`), so the
kernel is read once: which atomics return a value nobody reads, and whether its parameters are
the ones a puzzle calls it with."""

from __future__ import annotations

import ast

from .lang import Kernel

ATOMICS = frozenset({"atomic_add", "atomic_max", "atomic_cas"})


def unread_atomic_lines(k: Kernel) -> frozenset[int]:
    """The learner's lines whose atomics all stand alone as statements (``t.atomic_add(out, i,
    v)``) or are assigned to a name the kernel never reads, so the old value they return is
    never used.  CUDA compiles such an atomic to a reduction (``red.global.add``), which
    writes memory and returns nothing to the thread.  A line that also holds an atomic whose
    value is used (``old = t.atomic_add(...)``, ``old`` read later) is not one of them."""
    read = {n.id for n in ast.walk(k.tree) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Load)}
    alone = {id(n.value) for n in ast.walk(k.tree) if isinstance(n, ast.Expr)}
    alone |= {id(n.value) for n in ast.walk(k.tree)  # old = t.atomic_add(...), old never read
              if isinstance(n, ast.Assign) and len(n.targets) == 1
              and isinstance(n.targets[0], ast.Name) and n.targets[0].id not in read}
    statement, used = set(), set()
    for node in ast.walk(k.tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == k.ctx
                and node.func.attr in ATOMICS):
            lines = range(node.lineno, (node.end_lineno or node.lineno) + 1)
            (statement if id(node) in alone else used).update(lines)
    return frozenset(line + k.line_offset for line in statement - used)


def signature_problem(k: Kernel, params: tuple[str, ...]) -> str | None:
    """Why ``k`` cannot be called as ``kernel(t, *params)``, or ``None``."""
    names = [k.ctx, *k.params]
    if len(names) != len(params) + 1:
        return (f"the kernel takes ({', '.join(names)}); this puzzle calls it as "
                f"kernel(t, {', '.join(params)})")
    if tuple(names[1:]) != tuple(params):
        # The simulator names each array after its parameter and every budget measures an
        # array by name: a renamed array would be measured as no accesses at all.
        return (f"the kernel takes ({', '.join(names)}); keep the stub's parameter names, "
                f"kernel(t, {', '.join(params)}): the budgets measure each array by its name")
    return None

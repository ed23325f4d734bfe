"""The translator's view of a kernel: structured statements and the names they touch."""

from __future__ import annotations

import ast
import tokenize
from dataclasses import dataclass, field

# -- the translator's view of a kernel: structured statements -------------------------------------

@dataclass
class _S:
    """A statement: ``kind`` is one of simple, if (a plain ``if``), while (a plain ``while``),
    for_range, for_values (``for v in (16, 8, 4)``), if_lanes (``with t.if_``), while_lanes
    (``for _ in t.while_``); ``blocks`` are its bodies."""

    kind: str
    node: ast.AST
    blocks: list = field(default_factory=list)
    else_node: ast.AST | None = None
    lanes_body: bool = False


def _structure(stmts, ctx) -> list[_S]:
    out, i = [], 0
    while i < len(stmts):
        s = stmts[i]
        if isinstance(s, ast.With):
            call = s.items[0].context_expr
            nxt = stmts[i + 1] if i + 1 < len(stmts) else None
            if (nxt is not None and isinstance(nxt, ast.With)
                    and nxt.items[0].context_expr.func.attr == "else_"):
                out.append(_S("if_lanes", s, [_structure(s.body, ctx), _structure(nxt.body, ctx)],
                              else_node=nxt, lanes_body=True))
                i += 2
                continue
            assert call.func.attr == "if_"
            out.append(_S("if_lanes", s, [_structure(s.body, ctx)], lanes_body=True))
        elif isinstance(s, ast.If):
            blocks = [_structure(s.body, ctx)]
            if s.orelse:
                blocks.append(_structure(s.orelse, ctx))
            out.append(_S("if", s, blocks))
        elif isinstance(s, ast.For):
            it = s.iter
            if isinstance(it, (ast.Tuple, ast.List)):
                out.append(_S("for_values", s, [_structure(s.body, ctx)]))
            elif isinstance(it.func, ast.Attribute):
                out.append(_S("while_lanes", s, [_structure(s.body, ctx)], lanes_body=True))
            else:
                out.append(_S("for_range", s, [_structure(s.body, ctx)]))
        elif isinstance(s, ast.While):
            out.append(_S("while", s, [_structure(s.body, ctx)]))
        elif isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Tuple) \
                and not isinstance(s.value, ast.Call):   # t.vload stays one statement
            out.extend(_S("simple", a) for a in _unpack(s))
        elif isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant):
            pass  # a docstring
        else:
            out.append(_S("simple", s))
        i += 1
    return out


def _unpack(s: ast.Assign) -> list[ast.Assign]:
    """``a, b = e1, e2`` as single assignments with Python's meaning: every value first, then
    the names.  A value is assigned to its name at once when no later value reads a name
    assigned before it; otherwise it goes through a new variable ``a_new``."""
    names = [e.id for e in s.targets[0].elts]
    values = s.value.elts
    direct = []
    for k, _name in enumerate(names):
        later = _names(values[k + 1:])
        direct.append(not (set(names[:k + 1]) & later))
    first, then = [], []
    for k, (name, value) in enumerate(zip(names, values, strict=True)):
        if all(direct[k:]):
            first.append(_assign_like(s, name, value))
        else:
            first.append(_assign_like(s, f"{name}_new#", value))
            then.append(_assign_like(s, name, ast.Name(f"{name}_new#", ast.Load())))
    return first + then


def _assign_like(s: ast.Assign, name: str, value: ast.AST) -> ast.Assign:
    node = ast.Assign(targets=[ast.Name(name, ast.Store())], value=value)
    node.unpacked = True   # one variable on both sides of the tuple: never split into two
    return ast.fix_missing_locations(ast.copy_location(node, s))


def _header_nodes(s: _S) -> list[ast.AST]:
    """The expressions a compound statement evaluates itself (its condition, its range)."""
    n = s.node
    if s.kind == "if_lanes":
        return [n.items[0].context_expr]
    if s.kind == "if" or s.kind == "while":
        return [n.test]
    if s.kind in ("for_range", "for_values"):
        return [n.target, n.iter]
    if s.kind == "while_lanes":
        return [n.iter]
    return [n]


def _own_nodes(s: _S) -> list[ast.AST]:
    """The syntax a statement holds itself, without its nested bodies."""
    if s.kind == "simple":
        return [s.node]
    return _header_nodes(s)


def _names(nodes) -> set[str]:
    found = set()
    for node in nodes:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name):
                found.add(sub.id)
    return found


def _occurs(name: str, s: _S) -> bool:
    if name in _names(_header_nodes(s)):
        return True
    return any(_occurs(name, c) for b in s.blocks for c in b)


def _first_access(name: str, stmts: list[_S]) -> str | None:
    """How ``stmts`` first touch ``name`` on some path: "read" if any path may read it before
    writing it, "write" if every path writes it first, None if they may not touch it."""
    for s in stmts:
        if s.kind == "simple":
            n = s.node
            if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name) \
                    and n.targets[0].id == name:
                if name in _names([n.value]):
                    return "read"
                return "write"
            if name in _names([n]):
                return "read"
            continue
        if s.kind in ("for_range", "for_values") and s.node.target.id == name:
            return "read"  # a loop variable shared with other code: declared outside
        if name in _names(_header_nodes(s)):
            return "read"
        results = [_first_access(name, b) for b in s.blocks]
        if "read" in results:
            return "read"
        if s.kind in ("if_lanes", "if") and len(results) == 2 and \
                all(r == "write" for r in results):
            return "write"
    return None



def _walk(stmts):
    for s in stmts:
        yield s
        for b in s.blocks:
            yield from _walk(b)


def _assigned_names(stmts) -> set[str]:
    found = set()
    for s in _walk(stmts):
        n = s.node
        if s.kind == "simple":
            if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name):
                found.add(n.targets[0].id)
            elif isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Tuple):   # t.vload
                found |= {e.id if isinstance(e, ast.Name) else e.value.id
                          for e in n.targets[0].elts}
            elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
                found.add(n.target.id)
            elif isinstance(n, (ast.Assign, ast.AugAssign)):
                tgt = n.targets[0] if isinstance(n, ast.Assign) else n.target
                if isinstance(tgt, ast.Subscript) and isinstance(tgt.value, ast.Name):
                    found.add(tgt.value.id)
        elif s.kind in ("for_range", "for_values"):
            found.add(n.target.id)
    return found


def _leading_op(text: str, left: str) -> str | None:
    """The C operator in ``text`` == ``left op rest``, when ``left op= rest`` means the same."""
    for op in ("<<", ">>", "+", "-", "*", "/", "%", "&", "|", "^"):
        if text.startswith(f"{left} {op} ") and not text.startswith(f"{left} {op}{op}"):
            return op
    return None


def _strip_comment(line: str) -> str:
    """A source line without its trailing ``# comment`` (strings are left alone)."""
    if "#" not in line:
        return line
    try:
        tokens = list(tokenize.generate_tokens(iter([line + "\n"]).__next__))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return line
    for tok in tokens:
        if tok.type == tokenize.COMMENT:
            return line[:tok.start[1]].rstrip()
    return line



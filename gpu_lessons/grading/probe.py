"""What the grader runs inside a submission's kernel: turn answers into plain data.

This module is the only part of the grader that runs next to a learner's code.  The grader
reads this file *as source text* and sends it to the kernel in its probe cells, so it must
stay self-contained: standard library only, nothing from ``gpu_lessons`` (a test parses it
and imports it with the package out of reach).  Notebook users meet the same two functions
as ``gpu_lessons.checks.observe`` and ``gpu_lessons.checks.probe``, so ``check`` in a
notebook and the grader see an answer in exactly the same way.

* :func:`observe` describes a value as JSON-safe data.  Numbers become plain ``int`` /
  ``float`` and strings plain ``str``, so an object with a doctored ``__eq__``, ``__float__``
  or ``__array__`` is judged on what it really holds, not on what it claims.
* :func:`probe` calls a learner's function on the grader's inputs and records what came back.
* :func:`kernel_answer` sends back a puzzle kernel's source text and the plain numbers it
  names, so the grader can validate and run it in a sandbox of its own (never here, where the
  learner could have patched the simulator).
* :func:`main` is the probe cell's body: it reads the answers named in its ``questions``,
  writes each to a file (unaffected by what the notebook did to its output) and prints it
  after a per-run ``nonce``.
"""

import contextlib
import copy
import inspect
import json
import numbers
import os

#: Longest string, source text and repr sent back.
MAX_STR = 2000
MAX_SOURCE = 20000
MAX_REPR = 200
#: Nesting depth and length of sequences described item by item.
MAX_DEPTH = 3
MAX_ITEMS = 10000


def observe(value, _depth=0):
    """Describe ``value`` as JSON-safe data: ``{"kind": ..., "value": ...}``.

    Numbers become plain ``int``/``float`` and strings plain ``str``, so an object with a
    doctored ``__eq__`` cannot pass for the right answer.
    """
    if value is Ellipsis:
        return {"kind": "ellipsis"}
    if value is None:
        return {"kind": "none"}
    shape = getattr(value, "shape", None)
    if shape == () and hasattr(value, "item"):  # NumPy scalars and 0-d arrays
        try:
            return observe(value.item(), _depth)
        except Exception:
            pass
    try:
        if isinstance(value, bool) or type(value).__name__ == "bool_":
            return {"kind": "bool", "value": bool(value)}
        # int/float subclasses are read through the base type's own slot, so an overridden
        # __int__/__float__ cannot stand in for the value the object holds.
        if isinstance(value, int):
            return {"kind": "number", "value": int.__int__(value)}
        if isinstance(value, float):
            return {"kind": "number", "value": float.__float__(value)}
        if isinstance(value, numbers.Integral):
            return {"kind": "number", "value": int(value)}
        if isinstance(value, numbers.Real):
            return {"kind": "number", "value": float(value)}
        if isinstance(value, str):
            return {"kind": "str", "value": str.__str__(value)[:MAX_STR]}
    except Exception:  # a number type whose conversion fails is reported as "other"
        pass
    if callable(value) and not isinstance(value, type):
        return {"kind": "callable", "type": type(value).__name__}
    items = None
    if isinstance(value, (list, tuple)):
        items = list(value)
    elif shape is not None and hasattr(value, "tolist"):
        try:
            items = value.tolist()
        except Exception:
            items = None
    if items is not None and _depth < MAX_DEPTH and len(items) <= MAX_ITEMS:
        return {"kind": "seq", "items": [observe(v, _depth + 1) for v in items]}
    try:
        text = repr(value)[:MAX_REPR]
    except Exception:
        text = "<unprintable>"
    return {"kind": "other", "type": type(value).__name__, "repr": text}


def probe(function, cases):
    """Call ``function(**case)`` for each case; return what happened, as plain data.

    Each entry is ``{"ok": observation}``, ``{"raised": name, "message": text}``, or
    ``{"not_implemented": True}``.  Stops at a ``NotImplementedError`` on the first case (the
    stub); lets ``KeyboardInterrupt`` through so an interrupt or time limit still works.
    """
    outputs = []
    for i, case in enumerate(cases):
        try:
            value = function(**copy.deepcopy(case))
        except KeyboardInterrupt:
            raise
        except NotImplementedError as exc:
            if i == 0:
                outputs.append({"not_implemented": True})
                break
            outputs.append({"raised": "NotImplementedError", "message": _text(exc)})
        except BaseException as exc:
            outputs.append({"raised": type(exc).__name__, "message": _text(exc)})
        else:
            outputs.append({"ok": observe(value)})
    return outputs


def kernel_answer(function, namespace, choices=()):
    """A puzzle kernel as data: its source text and the plain numbers it uses by name.

    A kernel is one self-contained function, so its source plus the ``int``/``float``/``bool``
    globals it names (``TILE = 16``) is everything needed to run it elsewhere.  Anything else
    it names (NumPy, the simulator) is provided by the puzzle, not by this notebook.
    ``choices``: names of launch choices the notebook sets (``BLOCK``), sent when plain numbers.
    """
    if not inspect.isfunction(function):
        return observe(function)
    chosen = _plain_numbers(namespace, choices)
    try:
        source = inspect.getsource(function)
    except (OSError, TypeError):
        return {"kind": "kernel", "name": function.__name__, "source": None, "globals": {},
                "choices": chosen}
    names, codes = set(), [function.__code__]
    while codes:
        code = codes.pop()
        names.update(code.co_names)
        codes.extend(c for c in code.co_consts if inspect.iscode(c))
    return {"kind": "kernel", "name": str.__str__(function.__name__)[:MAX_REPR],
            "source": source[:MAX_SOURCE], "truncated": len(source) > MAX_SOURCE,
            "globals": _plain_numbers(namespace, sorted(names)), "choices": chosen}


def _plain_numbers(namespace, names):
    """The ``int``/``float``/``bool`` values (exactly those types) ``namespace`` has for ``names``."""
    found = {}
    for name in names:
        value = namespace.get(name)
        if type(value) in (int, float, bool) and len(found) < 100:
            found[name] = value
    return found


def read_answer(namespace, item):
    """The observation for one question of the grader's plan (``item``: id, name, kind, cases)."""
    name = item["name"]
    if name not in namespace:
        return {"kind": "missing"}
    answer = namespace[name]
    if item.get("kind") == "kernel":
        return kernel_answer(answer, namespace, item.get("choices") or ())
    if item.get("cases") is not None and callable(answer):
        return {"kind": "function", "outputs": probe(answer, item["cases"])}
    return observe(answer)


def main(namespace, nonce, folder, questions):
    """The probe cell: read each answer in ``questions`` (JSON text) out of ``namespace``.

    Each answer is written to ``folder/<id>.json`` as soon as it is read (so answers read
    before a later one hangs are kept) and printed after ``nonce`` as a second channel.
    """
    if not os.path.isabs(folder):  # relative to the work folder, wherever the notebook cd'd
        folder = os.path.join(os.environ.get("GPU_LESSONS_WORK") or os.getcwd(), folder)
    lines = []
    for item in json.loads(questions):
        line = nonce + json.dumps({"id": item["id"], "observation": read_answer(namespace, item)})
        partial = os.path.join(folder, item["id"] + ".tmp")
        try:
            with open(partial, "w", encoding="utf-8") as f:
                f.write(line)
            os.replace(partial, os.path.join(folder, item["id"] + ".json"))
        except OSError:  # the folder is gone or full: the printed line is the other channel
            pass
        lines.append(line)
    text = "\n".join(lines)
    with contextlib.suppress(Exception):  # a broken sys.stdout: the files still hold it
        print(text)
    return text


def _text(exc):
    try:
        return str(exc)[:300]
    except Exception:
        return ""

"""Reading what comes out of a sandbox without trusting it.

Everything a submission's sandbox reports (its worker's events, the answers its kernel
describes, error names, puzzle results) may have been written by the learner's code: the
kernel runs as the same user as the worker, in the same sandbox.  So every line is parsed
here with bounds (bytes are already capped by the reader; JSON nesting is capped here) and
checked against the shape the honest worker writes; anything else makes the submission's
result invalid.  Nothing here ever yields a process id or a path to act on.
"""

from __future__ import annotations

import json
import re

#: Deepest JSON accepted (an honest observation nests about 10 levels).
MAX_DEPTH = 32
#: Bounds an honest probe stays within (see gpu_lessons.grading.probe).
MAX_STR, MAX_SOURCE, MAX_ITEMS, MAX_OUTPUTS = 2000, 20000, 10000, 100000

#: Control characters, Unicode's invisible and direction-changing ones, and lone surrogates
#: (JSON's "\\ud800" and a file name that is not UTF-8 both make one; no UTF-8 file or
#: terminal can take it, so one would stop the grades from being written or printed).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff"
                      "\ud800-\udfff]")


class Invalid(ValueError):
    """A line from a sandbox that is not what the honest worker writes."""


def parse_line(line: bytes) -> object:
    """JSON from one result line, or :class:`Invalid` saying why not (never RecursionError)."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        raise Invalid("a result line is not UTF-8") from None
    try:
        value = json.loads(text)
    except RecursionError:
        raise Invalid(f"a result line is JSON nested deeper than {MAX_DEPTH} levels") from None
    except (ValueError, MemoryError):
        raise Invalid("a result line is not valid JSON") from None
    if depth(value) > MAX_DEPTH:
        raise Invalid(f"a result line is JSON nested deeper than {MAX_DEPTH} levels")
    return value


def depth(value, limit: int = MAX_DEPTH) -> int:
    """Nesting depth of parsed JSON, without recursion (counted up to ``limit`` + 1)."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        v, d = todo.pop()
        if isinstance(v, (list, dict)):
            deepest = max(deepest, d)
            if d <= limit:
                todo.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return deepest


def event(value, *, n_cells: int, wanted: set[str]) -> dict:
    """Check one worker event (see gpu_lessons.grading.worker); return it, or raise Invalid."""
    if not isinstance(value, dict) or not isinstance(value.get("event"), str):
        raise Invalid("a result line is not an event")
    kind = value["event"]
    shapes = {"kernel": {"event"}, "cell": {"event", "index"},
              "error": {"event", "index", "ename"}, "answer": {"event", "id", "observation"},
              "end": {"event", "status", "dead_kernel", "error"},
              "puzzle": {"event", "id", "passed", "correct", "message"}}
    if kind not in shapes or not set(value) <= shapes[kind]:
        raise Invalid(f"an event of an unknown kind or shape ({clean(kind, 40)!r})")
    if kind in ("cell", "error"):
        index = value.get("index")
        if type(index) is not int or not 1 <= index <= n_cells:
            raise Invalid("an event names a cell that does not exist")
        if kind == "error" and not _text(value.get("ename"), 200):
            raise Invalid("an error event without an error name")
    elif kind in ("answer", "puzzle"):
        if value.get("id") not in wanted:
            raise Invalid("an answer to a question this submission was not asked")
        if kind == "answer":
            observation(value.get("observation"))
        elif not (type(value.get("passed")) is bool and type(value.get("correct")) is bool
                  and _text(value.get("message"), MAX_STR * 2, empty=True)):
            raise Invalid("a malformed puzzle result")
    elif kind == "end":
        if value.get("status") not in ("ok", "crashed"):
            raise Invalid("an end event with an unknown status")
        if "dead_kernel" in value and type(value["dead_kernel"]) is not bool:
            raise Invalid("a malformed end event")
        if "error" in value and not _text(value["error"], 1000, empty=True):
            raise Invalid("a malformed end event")
    return value


def observation(obs) -> dict:
    """Check an observation (see gpu_lessons.grading.probe.observe); return it or raise."""
    _observation(obs, 0)
    return obs


def _observation(obs, level: int) -> None:
    if not isinstance(obs, dict) or level > 8:
        raise Invalid("a malformed answer")
    kind = obs.get("kind")
    keys = set(obs) - {"kind"}
    if kind in ("ellipsis", "none", "missing") and not keys:
        return
    if kind == "bool" and keys == {"value"} and type(obs["value"]) is bool:
        return
    if kind == "number" and keys == {"value"} and type(obs["value"]) in (int, float):
        return
    if kind == "str" and keys == {"value"} and _text(obs["value"], MAX_STR, empty=True):
        return
    if kind == "callable" and keys == {"type"} and _text(obs["type"], 200, empty=True):
        return
    if kind == "other" and keys == {"type", "repr"} and _text(obs["type"], 200, empty=True) \
            and _text(obs["repr"], 200, empty=True):
        return
    if kind == "seq" and keys == {"items"} and isinstance(obs["items"], list) \
            and len(obs["items"]) <= MAX_ITEMS:
        for item in obs["items"]:
            _observation(item, level + 1)
        return
    if kind == "function" and keys == {"outputs"} and isinstance(obs["outputs"], list) \
            and len(obs["outputs"]) <= MAX_OUTPUTS:
        for out in obs["outputs"]:
            _output(out, level)
        return
    if kind == "kernel" and keys <= {"name", "source", "truncated", "globals", "choices"} \
            and _text(obs.get("name"), 200, empty=True) \
            and (obs.get("source") is None or _text(obs.get("source"), MAX_SOURCE, empty=True)) \
            and type(obs.get("truncated", False)) is bool and _globals(obs.get("globals")) \
            and _globals(obs.get("choices", {})):
        return
    raise Invalid("a malformed answer")


def _output(out, level: int) -> None:
    if not isinstance(out, dict):
        raise Invalid("a malformed function result")
    if set(out) == {"ok"}:
        _observation(out["ok"], level + 1)
    elif set(out) == {"not_implemented"} and out["not_implemented"] is True:
        pass
    elif not (set(out) == {"raised", "message"} and _text(out["raised"], 200)
              and _text(out["message"], 1000, empty=True)):
        raise Invalid("a malformed function result")


def _globals(value) -> bool:
    return (isinstance(value, dict) and len(value) <= 100
            and all(isinstance(k, str) and k.isidentifier() and len(k) <= 100
                    and type(v) in (int, float, bool) for k, v in value.items()))


def _text(value, limit: int, *, empty: bool = False) -> bool:
    return isinstance(value, str) and len(value) <= limit and (empty or bool(value))


def clean(text, limit: int = 300) -> str:
    """``text`` made safe to show in a table, a log or a file: control characters (and
    Unicode's invisible and direction-changing ones, and lone surrogates) become spaces, and it
    is cut to ``limit`` characters."""
    text = _CONTROL.sub(" ", str(text))
    return text if len(text) <= limit else text[:limit - 1] + "…"

"""Races on global memory (between blocks, or between warps of a block), which the simulator
cannot show by running wrong.

The simulator runs a grid's blocks one after another, so a block that reads, adds and stores
a global element another block also stores (``hist[b] = hist[b] + count`` from every block)
gets the right answer there.  On a GPU the blocks run at the same time and in any order, with
no barrier between them (CUDA C++ Programming Guide, "Thread Hierarchy": "Thread blocks are
required to execute independently ... in any order, in parallel or in series"), so the two
read-modify-writes interleave and updates are lost.  Such a kernel is not correct, whatever the
simulator computed.

The rule checked here, per global element, from the run's recorded indices: a plain store by
one block and any access (load, store or atomic) by another is a race; so is a plain store by
one warp and an access by another warp of the same block with no ``t.sync()`` between them
(the simulator runs a block's warps in turn; a GPU in any order).  Atomics from many
blocks are not, nor are loads of an element nobody stores.  (A plain load of an element other
blocks update atomically also depends on timing; the puzzles' budgets on reading outputs back
cover that case, and an atomic that adds 0 to read a value is not flagged.)
"""

from __future__ import annotations

_GLOBAL = {"ld.global": "load", "st.global": "store", "atom.global": "atomic"}
_VERB = {"load": "reads", "store": "writes", "atomic": "updates (atomically)"}


def global_race(result) -> tuple[str, int | None] | None:
    """``(message, line)`` for the first global element two blocks (or two warps of a block
    between the same barriers) race on, else ``None``.

    ``result``: a :class:`gpu_lessons.simt.SimResult` of a run with ``record_indices=True``.
    """
    accesses = []                   # (array, index, block, warp, phase, kind, line)
    for e in result.events:
        kind = _GLOBAL.get(e.kind)
        if kind is None or e.indices is None:
            continue
        for i in e.indices:
            if i is not None:
                accesses.append((e.array, i, e.block, e.warp, e.phase, kind, e.line))
    stores: dict = {}               # (array, index) -> {(block, warp, phase): line}
    for array, i, block, warp, phase, kind, line in accesses:
        if kind == "store":
            stores.setdefault((array, i), {}).setdefault((block, warp, phase), line)
    if not stores:
        return None
    for array, i, block, warp, phase, kind, line in accesses:
        for (b, w, ph), other_line in stores.get((array, i), {}).items():
            if b != block:
                return (f"race on {array}[{i}] between blocks: block {b} writes it (line "
                        f"{other_line}) and block {block} {_VERB[kind]} it (line {line}); "
                        f"blocks run at the same time and in any order, with no barrier "
                        f"between them: update an element several blocks share with an "
                        f"atomic, or give each element to one block"), line
            if w != warp and ph == phase:
                return (f"race on {array}[{i}] in block {block}: warp {w} writes it (line "
                        f"{other_line}) and warp {warp} {_VERB[kind]} it (line {line}) with "
                        f"no t.sync() in between; warps run in any order: a t.sync() is "
                        f"missing, or two threads write one element"), line
    return None

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


def _lanes(e):
    """The elements an instruction's active lanes touched."""
    return (i for i in e.indices if i is not None)


def global_race(result) -> tuple[str, int | None] | None:
    """``(message, line)`` for the first global element two blocks (or two warps of a block
    between the same barriers) race on, else ``None``.

    ``result``: a :class:`gpu_lessons.kernels.simt.SimResult` of a run with ``record_indices=True``.
    Two passes over the run, constant work per lane: for each element, the first two blocks
    that stored it, and per block and barrier interval the first two warps (one other than the
    accessing one is all a race needs).
    """
    by_block: dict = {}             # (array, index) -> {block: line}
    by_warp: dict = {}              # (array, index, block, phase) -> {warp: line}
    for e in result.events:
        if e.kind != "st.global" or e.indices is None:
            continue
        for i in _lanes(e):
            blocks = by_block.setdefault((e.array, i), {})
            if len(blocks) < 2:
                blocks.setdefault(e.block, e.line)
            warps = by_warp.setdefault((e.array, i, e.block, e.phase), {})
            if len(warps) < 2:
                warps.setdefault(e.warp, e.line)
    if not by_block:
        return None
    for e in result.events:
        kind = _GLOBAL.get(e.kind)
        if kind is None or e.indices is None:
            continue
        for i in _lanes(e):
            blocks = by_block.get((e.array, i))
            if not blocks:
                continue
            other = next(((b, ln) for b, ln in blocks.items() if b != e.block), None)
            if other is not None:
                return (f"race on {e.array}[{i}] between blocks: block {other[0]} writes it "
                        f"(line {other[1]}) and block {e.block} {_VERB[kind]} it (line "
                        f"{e.line}); blocks run at the same time and in any order, with no "
                        f"barrier between them: update an element several blocks share with "
                        f"an atomic, or give each element to one block"), e.line
            warps = by_warp.get((e.array, i, e.block, e.phase), {})
            other = next(((w, ln) for w, ln in warps.items() if w != e.warp), None)
            if other is not None:
                return (f"race on {e.array}[{i}] in block {e.block}: warp {other[0]} writes "
                        f"it (line {other[1]}) and warp {e.warp} {_VERB[kind]} it (line "
                        f"{e.line}) with no t.sync() in between; warps run in any order: a "
                        f"t.sync() is missing, or two threads write one element"), e.line
    return None

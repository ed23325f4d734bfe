"""Chapter 04 (cache lines, sectors, coalescing and banks) exercise questions.

References come from the memory-transaction model (:mod:`gpu_lessons.memory`), which counts
32-byte sectors per request and shared-memory wavefronts exactly as Nsight Compute does on an
H200 (CUDA C++ Best Practices Guide §10.2.1; CUDA C++ Programming Guide, "Shared Memory":
bank = (byte address / 4) mod 32).
"""

from __future__ import annotations

from ..memory import (
    aos_field,
    broadcast,
    global_load,
    matrix_row,
    shared_load,
    strided,
    tile_column,
)
from .types import Choice, Function, Mistake, Number, Question, Vary

# -- 04.aos_sectors: one field of an array of structs ----------------------------------------------

#: Field names of the particle struct, in order; a struct of n floats has the first n.
_FIELDS = ("x", "y", "z", "vx", "vy", "vz", "mass")


#: Bytes of one field, by the struct's element type.
_TYPE_BYTES = {"float": 4, "half": 2}


def _aos(fields, field, element, attr: str = "sectors"):
    """Sectors (or lines) of a warp reading ``field`` of consecutive structs of ``fields``
    elements, the array 256-byte aligned (:func:`gpu_lessons.memory.global_load`)."""
    size = _TYPE_BYTES[element]
    return getattr(global_load(aos_field(size * fields, size * _FIELDS.index(field)), size),
                   attr)


def _aos_sectors(fields, field, element) -> int:
    """Lane i reads the field at byte s·fields·i + s·f.  For floats {x, y, z, vx, vy} and y:
    lanes are 20 bytes apart, closer than a sector, so every 32-byte segment from byte 4 to
    byte 627 is touched: 20 sectors for 128 useful bytes (20 % efficiency)."""
    return _aos(fields, field, element)


def _aos_lines(ref, fields, field, element) -> int | None:
    lines = _aos(fields, field, element, "lines")
    return None if lines == ref else lines


def _aos_soa(ref, fields, field, element) -> int:
    """The same field as a separate array: 32 consecutive elements."""
    size = _TYPE_BYTES[element]
    return global_load(strided(1, element_bytes=size), size).sectors


def _aos_fields(fields, field, element) -> dict:
    return {"struct": ", ".join(_FIELDS[:fields]), "bytes": _TYPE_BYTES[element] * fields}


# -- sectors of any warp access -------------------------------------------------------------------

def _sectors_reference(addresses, bytes_per_thread):
    """Distinct 32-byte segments touched: :func:`gpu_lessons.memory.global_load`."""
    return global_load(addresses, bytes_per_thread).sectors


def _sectors_inputs(rng) -> dict:
    """A strided, offset warp access (the common case) or 32 scattered aligned addresses."""
    b = int(rng.choice([1, 2, 4, 8, 16]))
    if rng.random() < 0.75:
        stride = int(rng.choice([0, 1, 1, 2, 3, 4, 5, 8, 16, 33, int(rng.integers(0, 65))]))
        offset = b * int(rng.integers(0, 64))
        addresses = [offset + lane * stride * b for lane in range(32)]
    else:
        window = int(rng.choice([256, 1024, 8192]))
        addresses = [b * int(v) for v in rng.integers(0, window // b, size=32)]
    return {"addresses": addresses, "bytes_per_thread": b}


def _sectors_edges() -> list[dict]:
    """The patterns measured with Nsight Compute on an H200 (docs/measured/h200.md): 4, 5, 8,
    32, 1, 8 and 16 sectors."""
    return [{"addresses": strided(1), "bytes_per_thread": 4},
            {"addresses": strided(1, offset=4), "bytes_per_thread": 4},
            {"addresses": strided(2), "bytes_per_thread": 4},
            {"addresses": strided(8), "bytes_per_thread": 4},
            {"addresses": broadcast(), "bytes_per_thread": 4},
            {"addresses": strided(1, element_bytes=8), "bytes_per_thread": 8},
            {"addresses": strided(1, element_bytes=16), "bytes_per_thread": 16}]


def _lines_of(e, addresses, bytes_per_thread):
    return global_load(addresses, bytes_per_thread).lines


def _span_sectors(e, addresses, bytes_per_thread):
    """Every sector between the lowest and the highest byte, touched or not."""
    return (max(addresses) + bytes_per_thread - 1) // 32 - min(addresses) // 32 + 1


# -- bank of an address ---------------------------------------------------------------------------

def _bank_reference(address):
    """The bank the model assigns to a 1-byte access at ``address``: (address // 4) mod 32."""
    return shared_load(broadcast(address), 1).lane_banks[0][0]


def _bank_inputs(rng) -> dict:
    return {"address": int(rng.integers(0, 1 << int(rng.choice([8, 12, 16, 20]))))}


def _bank_edges() -> list[dict]:
    """Both ends of the first row of banks, the wrap to bank 0, bytes inside one word."""
    return [{"address": a} for a in (0, 3, 4, 124, 127, 128, 129, 130, 4096, 4100, 49151)]


# -- padding a tile --------------------------------------------------------------------------------

#: 04.padding's options: columns of padding P in `float T[32][32 + P]`.
_PADDINGS = ("0", "1", "2", "16", "33")


def _column_wavefronts(padding: int) -> int:
    return shared_load(tile_column(0, width=32, padding=padding)).wavefronts


def _padding_choice() -> str:
    """The smallest padding whose column read costs the fewest wavefronts."""
    costs = {p: _column_wavefronts(int(p)) for p in _PADDINGS}
    best = min(costs.values())
    return min((p for p in _PADDINGS if costs[p] == best), key=int)


# -- 04.row_pitch: misaligned rows ------------------------------------------------------------------

_ELEMENTS = {"float": 4, "double": 8}


def _row_sectors(ld, element, col, attr: str = "sectors") -> float:
    """Mean sectors (or lines) of a warp reading 32 consecutive elements of one row, starting
    at column ``col``, over rows 0-7 of a row-major matrix with ``ld`` elements per row.

    Floats, ld = 1002, column 0: row r starts at byte 4008·r, i.e. 8·r mod 32 past a sector
    boundary: rows 0 and 4 are aligned (4 sectors), the other six straddle one more (5):
    38 / 8 = 4.75.
    """
    size = _ELEMENTS[element]
    return sum(getattr(global_load(matrix_row(r, ld=ld, element_bytes=size, col=col), size),
                       attr) for r in range(8)) / 8


def _like_row_zero(ref, ld, element, col) -> float | None:
    """Every row taken to cost what row 0 does (as if every row started aligned)."""
    size = _ELEMENTS[element]
    value = global_load(matrix_row(0, ld=ld, element_bytes=size, col=col), size).sectors
    return None if value == ref else float(value)


def _row_lines(ref, ld, element, col) -> float | None:
    value = _row_sectors(ld, element, col, "lines")
    return None if value == ref else value


QUESTIONS = (
    Question(
        id="04.aos_sectors",
        name="aos_sectors",
        points=1,
        title="Sectors of an array of structs",
        prompt="Particles are stored as an array of structs `struct {{{element} {struct};}}` — "
               "{bytes} bytes each, the array starting 256-byte aligned. Lane *i* of a warp "
               "reads the `{field}` of particle *i*. How many **32-byte sectors** does that one "
               "warp-wide load touch? Store it in `aos_sectors`. How many would a structure of "
               "arrays (a separate `{field}[]` array) need?",
        hint="Write down lane i's byte address, then count the distinct 32-byte segments "
             "(address // 32) among the 32 lanes.",
        vary=(Vary("fields", (5, 3, 6, 7), "fields per struct"),
              Vary("field", ("y", "x", "z"), "the field each lane reads"),
              Vary("element", ("float", "half"), "the type of every field")),
        derive=_aos_fields,
        answer=Number(
            reference=_aos_sectors,
            units="sectors",
            rtol=0,
            integer=True,
            mistakes=(
                Mistake("lines", "that counts 128-byte lines; memory moves in 32-byte sectors, "
                        "four per line, and only the touched ones move (M14).", value=_aos_lines),
                Mistake("soa", "that would be the cost if the {field} values were contiguous "
                        "(a structure of arrays); here they are {bytes} bytes apart.",
                        value=_aos_soa),
                Mistake("one_per_lane", "not every lane needs a sector of its own: lanes whose "
                        "{field} values lie in the same 32-byte segment share it.",
                        value=lambda ref, **p: 32),
                Mistake("bytes", "that is bytes moved; the question asks for sectors (32 bytes "
                        "each).", value=lambda ref, **p: ref * 32),
            ),
        ),
    ),
    Question(
        id="04.sectors",
        name="sectors",
        points=2,
        title="Sectors of any warp load",
        prompt="Write `sectors(addresses, bytes_per_thread)`: given the 32 byte addresses of one "
               "warp-wide global load (a list; each address a multiple of `bytes_per_thread`, "
               "which is 1, 2, 4, 8 or 16), return how many 32-byte sectors the request "
               "touches. The check tries the patterns measured with Nsight Compute on an H200 "
               "(4 sectors for 32 consecutive floats, 5 when shifted by 4 bytes, …) and 100 "
               "random ones.",
        answer=Function(
            reference=_sectors_reference,
            inputs=_sectors_inputs,
            edge_cases=_sectors_edges,
            signature="sectors(addresses, bytes_per_thread)",
            units="sectors",
            rtol=1e-9,
            mistakes=(
                Mistake("lines", "that counts 128-byte lines; the unit that moves is the "
                        "32-byte sector (M14).", value=_lines_of),
                Mistake("span", "that counts every sector between the lowest and highest "
                        "address; sectors no lane touches do not move.", value=_span_sectors),
                Mistake("distinct_addresses", "that counts distinct addresses; lanes whose "
                        "addresses fall in one 32-byte segment share a sector.",
                        value=lambda e, addresses, **kw: len(set(addresses))),
                Mistake("bytes", "return the number of sectors, not bytes moved.",
                        value=lambda e, **kw: 32 * e),
                Mistake("ideal", "that is the fewest sectors 32 lanes of this size could "
                        "need; count the sectors these addresses actually touch.",
                        value=lambda e, bytes_per_thread, **kw: bytes_per_thread),
            ),
        ),
    ),
    Question(
        id="04.bank",
        name="bank",
        points=1,
        title="Bank of an address",
        prompt="Shared memory has 32 banks, each 4 bytes wide; successive 32-bit words go to "
               "successive banks. Write `bank(address)` returning the bank (0 to 31) that holds "
               "the byte at `address`.",
        answer=Function(
            reference=_bank_reference,
            inputs=_bank_inputs,
            edge_cases=_bank_edges,
            signature="bank(address)",
            units="bank number",
            rtol=0.0,
            mistakes=(
                Mistake("byte_banks", "banks are 4 bytes wide: divide the byte address by 4 "
                        "(whole words) before wrapping around the 32 banks.",
                        value=lambda e, address: address % 32),
                Mistake("no_wrap", "there are only 32 banks: successive words wrap around to "
                        "bank 0 after bank 31.", value=lambda e, address: address // 4),
                Mistake("sixteen", "there are 32 banks, not 16.",
                        value=lambda e, address: address // 4 % 16),
                Mistake("sector", "that is the 32-byte sector, not the 4-byte bank.",
                        value=lambda e, address: address // 32 % 32),
            ),
        ),
    ),
    Question(
        id="04.padding",
        name="padding",
        points=1,
        title="Pad a tile",
        prompt="A block stages a tile `float T[32][32 + P]` in shared memory and then reads it "
               "by columns: lane *i* reads `T[i][c]`. Which padding `P` removes every bank "
               "conflict with the least wasted memory? Answer one of `\"0\"`, `\"1\"`, "
               "`\"2\"`, `\"16\"`, `\"33\"` in `padding`.",
        answer=Choice(
            reference=_padding_choice,
            options=_PADDINGS,
            mistakes=(
                Mistake("none", "without padding row i starts 32·i words in, i.e. in bank 0 "
                        "for every row: a column is a 32-way conflict.", value="0"),
                Mistake("even", "P = 2 shifts row i by 2·i banks, so lanes i and i + 16 still "
                        "meet in one bank: a 2-way conflict.", value="2"),
                Mistake("sixteen", "P = 16 shifts row i by 16·i banks: only two distinct "
                        "banks, a 16-way conflict.", value="16"),
                Mistake("wasteful", "conflict-free, but it wastes 33 floats per row: a smaller "
                        "padding does the same.", value="33"),
            ),
        ),
    ),
    Question(
        id="04.row_pitch",
        name="row_sectors",
        points=2,
        title="Rows that are not aligned",
        prompt="A row-major matrix of **{element}s** has **{ld} elements per row**, no "
               "padding, and starts 256-byte aligned. A warp reads 32 consecutive elements of "
               "one row, starting at **column {col}**. Averaged over rows 0 to 7, how many "
               "32-byte sectors does one such request touch? Store the average in "
               "`row_sectors`. What would padding each row to a multiple of 32 elements give?",
        hint="Row r starts at byte {row_bytes}·r: where is that relative to a 32-byte "
             "boundary, and where does the warp's first element fall?",
        vary=(Vary("ld", (1002, 1001, 1003, 1006, 1010, 999, 1013, 1021), "elements per row"),
              Vary("element", ("float", "double"), "the element type"),
              Vary("col", (0, 1, 3, 8, 13), "the first column the warp reads")),
        derive=lambda ld, element, col: {"row_bytes": f"{_ELEMENTS[element] * ld:,}"},
        answer=Number(
            reference=_row_sectors,
            units="sectors per request",
            rtol=0.005,
            mistakes=(
                Mistake("like_row_zero", "that is what row 0 costs; the other rows start at "
                        "other offsets from a 32-byte boundary.", value=_like_row_zero),
                Mistake("lines", "that counts 128-byte lines; memory moves in 32-byte "
                        "sectors (M14).", value=_row_lines),
            ),
        ),
    ),
)

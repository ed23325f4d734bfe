"""Chapter 04 (cache lines, sectors, coalescing and banks) exercise questions.

References come from the memory-transaction model (:mod:`gpu_lessons.memory`), which counts
32-byte sectors per request and shared-memory wavefronts exactly as Nsight Compute does on an
H200 (CUDA C++ Best Practices Guide §10.2.1; CUDA C++ Programming Guide, "Shared Memory":
bank = (byte address / 4) mod 32), imported inside each function.
"""

from __future__ import annotations

from .types import Choice, Function, Mistake, Number, Question

# -- AoS: one field of a 20-byte struct ------------------------------------------------------------

#: 04.aos_sectors: struct {float x, y, z, vx, vy} (20 bytes); each lane reads the y of its own.
_STRUCT_BYTES, _FIELD_OFFSET = 20, 4


def _aos(attr: str = "sectors"):
    from ..memory import aos_field, global_load

    return getattr(global_load(aos_field(_STRUCT_BYTES, _FIELD_OFFSET)), attr)


def _aos_sectors() -> int:
    """Lane i reads bytes 20·i + 4 .. 20·i + 7.  Lanes are 20 bytes apart, closer than a
    sector, so every 32-byte segment from byte 4 to byte 627 is touched: 20 sectors for 128
    useful bytes (20 % efficiency)."""
    return _aos("sectors")


def _warp_size(_ref: float) -> int:
    from ..memory import WARP_SIZE

    return WARP_SIZE


def _soa_sectors(_ref: float) -> int:
    from ..memory import global_load, soa_field

    return global_load(soa_field(1, length=1 << 20)).sectors


# -- sectors of any warp access -------------------------------------------------------------------

def _sectors_reference(addresses, bytes_per_thread):
    """Distinct 32-byte segments touched: :func:`gpu_lessons.memory.global_load`."""
    from ..memory import global_load

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
    """The patterns measured with Nsight Compute on an H200 (facts: 4, 5, 8, 32, 1, 8, 16)."""
    from ..memory import broadcast, strided

    return [{"addresses": strided(1), "bytes_per_thread": 4},
            {"addresses": strided(1, offset=4), "bytes_per_thread": 4},
            {"addresses": strided(2), "bytes_per_thread": 4},
            {"addresses": strided(8), "bytes_per_thread": 4},
            {"addresses": broadcast(), "bytes_per_thread": 4},
            {"addresses": strided(1, element_bytes=8), "bytes_per_thread": 8},
            {"addresses": strided(1, element_bytes=16), "bytes_per_thread": 16}]


def _lines_of(e, addresses, bytes_per_thread):
    from ..memory import global_load

    return global_load(addresses, bytes_per_thread).lines


def _span_sectors(e, addresses, bytes_per_thread):
    """Every sector between the lowest and the highest byte, touched or not."""
    return (max(addresses) + bytes_per_thread - 1) // 32 - min(addresses) // 32 + 1


# -- bank of an address ---------------------------------------------------------------------------

def _bank_reference(address):
    """The bank the model assigns to a 1-byte access at ``address``: (address // 4) mod 32."""
    from ..memory import broadcast, shared_load

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
    from ..memory import shared_load, tile_column

    return shared_load(tile_column(0, width=32, padding=padding)).wavefronts


def _padding_choice() -> str:
    """The smallest padding whose column read costs the fewest wavefronts."""
    costs = {p: _column_wavefronts(int(p)) for p in _PADDINGS}
    best = min(costs.values())
    return min((p for p in _PADDINGS if costs[p] == best), key=int)


# -- misaligned rows ------------------------------------------------------------------------------

#: 04.row_pitch: a row-major float matrix with this many floats per row, no padding.
_LD = 1002


def _row_sectors(attr: str = "sectors") -> float:
    """Mean sectors (or lines) per 32-float row read over rows 0-7, with 1002 floats per row.

    Row r starts at byte 4008·r, i.e. 8·r mod 32 past a sector boundary: rows 0 and 4 are
    aligned (4 sectors), the other six straddle one more sector (5): 38 / 8 = 4.75.
    """
    from ..memory import global_load, matrix_row

    return sum(getattr(global_load(matrix_row(r, ld=_LD)), attr) for r in range(8)) / 8


def _aligned_row(_ref: float) -> int:
    """32 floats starting on a sector boundary (a padded pitch of 1024 floats)."""
    from ..memory import global_load, matrix_row

    return global_load(matrix_row(1, ld=1024)).sectors


def _misaligned_row(_ref: float) -> int:
    """32 floats starting 8 bytes past a sector boundary."""
    from ..memory import global_load, strided

    return global_load(strided(1, offset=8)).sectors


QUESTIONS = (
    Question(
        id="04.aos_sectors",
        name="aos_sectors",
        points=1,
        prompt="Particles are stored as an array of structs {float x, y, z, vx, vy} (20 bytes "
               "each, the array 256-byte aligned). Lane i of a warp reads the y of particle i. "
               "How many 32-byte sectors does that one warp-wide load touch?",
        hint="Write down lane i's byte address, then count the distinct 32-byte segments "
             "(address // 32) among the 32 lanes.",
        answer=Number(
            reference=_aos_sectors,
            units="sectors",
            rtol=0.001,
            mistakes=(
                Mistake("lines", "that counts 128-byte lines; memory moves in 32-byte sectors, "
                        "four per line, and only the touched ones move.",
                        value=lambda ref: _aos("lines")),
                Mistake("soa", "that would be the cost if the y values were contiguous (a "
                        "structure of arrays); here they are 20 bytes apart.",
                        value=_soa_sectors),
                Mistake("one_per_lane", "not every lane needs a sector of its own: lanes whose "
                        "y values lie in the same 32-byte segment share it.",
                        value=lambda ref: 32),
                Mistake("bytes", "that is bytes moved; the question asks for sectors (32 bytes "
                        "each).", value=lambda ref: ref * 32),
            ),
        ),
    ),
    Question(
        id="04.sectors",
        name="sectors",
        points=2,
        prompt="Write sectors(addresses, bytes_per_thread): the 32 byte addresses of one "
               "warp-wide global load (each a multiple of bytes_per_thread, which is 1, 2, 4, 8 "
               "or 16) → how many 32-byte sectors the request touches.",
        answer=Function(
            reference=_sectors_reference,
            inputs=_sectors_inputs,
            edge_cases=_sectors_edges,
            signature="sectors(addresses, bytes_per_thread)",
            units="sectors",
            rtol=1e-9,
            mistakes=(
                Mistake("lines", "that counts 128-byte lines; the unit that moves is the "
                        "32-byte sector.", value=_lines_of),
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
        prompt="Write bank(address): the shared-memory bank (0-31) that holds the byte at "
               "`address`.",
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
        prompt="A block stages a tile `float T[32][32 + P]` in shared memory and reads it by "
               "columns (lane i reads T[i][c]). Which padding P removes every bank conflict "
               "with the least wasted memory? One of '0', '1', '2', '16', '33'.",
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
        prompt="A row-major float matrix has 1002 floats per row, no padding, and starts "
               "256-byte aligned. A warp reads the first 32 floats of one row. Averaged over "
               "rows 0 to 7 (the pattern repeats every 8 rows), how many sectors does one such "
               "request touch?",
        hint="Row r starts at byte 4·1002·r: where is that relative to a 32-byte boundary?",
        answer=Number(
            reference=_row_sectors,
            units="sectors per request",
            rtol=0.005,
            mistakes=(
                Mistake("aligned", "that assumes every row starts on a sector boundary; with "
                        "4008-byte rows most do not.", value=_aligned_row),
                Mistake("all_misaligned", "not every row is misaligned: some rows start "
                        "exactly on a 32-byte boundary.", value=_misaligned_row),
                Mistake("lines", "that counts 128-byte lines; memory moves in 32-byte "
                        "sectors.", value=lambda ref: _row_sectors("lines")),
            ),
        ),
    ),
)

"""Registers, local memory, shared memory and SASS of every worked puzzle kernel: what
``gpu_lessons.kernels.compile`` says on a CPU against what the CUDA runtime says on an H200.

    .venv/bin/python tools/device/registers_h200.py prepare DIR             # here, no GPU
    python3 tools/device/registers_h200.py device DIR $OUT/registers.json   # on the GPU
    .venv/bin/python tools/device/registers_h200.py record RAW tests/data/h200_registers.json

``prepare`` compiles every worked kernel (``solutions/puzzle_kernels.py``, at the puzzle's first
size, seed 0) with :func:`gpu_lessons.kernels.compile` and writes ``DIR/manifest.json``: each
kernel's CUDA source, the options, the cubin and the PTX, with NVRTC's version; it copies the
package beside it (the device machine runs the checkout of ``main``).

``device`` (CuPy and a CUDA GPU, nothing from the network), each kernel in its own ``try``:

* **the same cubin**: ``compile()``'s cubin loaded by the driver (``cuModuleLoadData``) and its
  attributes read with ``cuFuncGetAttribute`` (``NUM_REGS``, ``LOCAL_SIZE_BYTES``,
  ``SHARED_SIZE_BYTES``) and with the runtime's ``cudaFuncGetAttributes`` (``numRegs``,
  ``localSizeBytes``, ``sharedSizeBytes``, through ``cudaLibraryLoadData``/``cudaLibraryGetKernel``);
* **what run_on_gpu compiles**: the same CUDA source through CuPy's ``RawKernel`` with
  ``-fmad=false`` (``gpu_lessons.measure.gpu.compiled``, CuPy's own NVRTC), its attributes and
  the binary CuPy cached, brought back so that its SASS is compared here with the same nvdisasm;
* **the device's NVRTC** through ``gpu_lessons.kernels.nvrtc.compile_cubin`` with ``compile()``'s
  options, and the PTX of ``compile()`` JIT-compiled by the driver, both for their registers.

``record`` disassembles the cubins that came back, compiles every kernel again with
``compile()``'s defaults, and writes the record that ``tests/kernels/test_registers_h200.py``
replays.
"""

from __future__ import annotations

import base64
import ctypes
import datetime as dt
import glob
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ARCH = "sm_90"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: str) -> bytes:
    return base64.b64decode(text.encode())


def worked_kernels():
    """``(puzzle, kernel function, args)`` for every puzzle, the worked kernel at the puzzle's
    first size (seed 0)."""
    import importlib.util

    from gpu_lessons import puzzles

    spec = importlib.util.spec_from_file_location("puzzle_kernels",
                                                  ROOT / "solutions" / "puzzle_kernels.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return [(p, getattr(mod, p.kernel_name), tuple(p.make_inputs(p.sizes[0], seed=0).values()))
            for p in puzzles.puzzles()]


# -- here: compile() every worked kernel -----------------------------------------------------------

def prepare(folder: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from gpu_lessons.kernels import compile

    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for p, k, args in worked_kernels():
        ck = compile(k, *args, arch=ARCH, ftz=False)   # the cubin the driver loads: CuPy-free
        rows.append({"puzzle": p.id, "kernel": ck.kernel, "size": p.sizes[0],
                     "source": str(ck.cuda), "options": list(ck.options),
                     "registers": ck.registers_per_thread, "local_bytes": ck.local_bytes,
                     "spill_store_bytes": ck.spill_store_bytes,
                     "spill_load_bytes": ck.spill_load_bytes,
                     "static_shared_bytes": ck.static_shared_bytes,
                     "instructions": len(ck.instructions),
                     "cubin": _b64(ck.cubin), "ptx": ck.ptx})
        print(f"{p.id}: {ck.registers_per_thread} registers", flush=True)
    meta = {"date_utc": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%MZ"),
            "nvrtc": ck.nvrtc, "nvrtc_wheel": _dist_version("nvidia-cuda-nvrtc"),
            "disassembler": ck.disassembler, "arch": ARCH, "python": platform.python_version()}
    (folder / "manifest.json").write_text(json.dumps({"meta": meta, "kernels": rows}))
    target = folder / "gpu_lessons"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(ROOT / "gpu_lessons", target,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


def _dist_version(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


# -- on the GPU ---------------------------------------------------------------------------------------

_CU_ATTR = {"num_regs": 4, "local_size_bytes": 3, "shared_size_bytes": 1, "ptx_version": 5,
            "binary_version": 6}


class _Driver:
    """The few driver and runtime calls the record needs, through ctypes."""

    def __init__(self):
        self.cu = ctypes.CDLL("libcuda.so.1")
        self.cudart = None
        names = [f for p in sys.path
                 for f in sorted(glob.glob(os.path.join(p, "nvidia", "cu13", "lib", "libcudart.so*")))]
        for name in [*names, "libcudart.so.13", "libcudart.so"]:
            try:
                self.cudart = ctypes.CDLL(name)
                break
            except OSError:
                continue

    def _check(self, rc, what):
        if rc != 0:
            raise RuntimeError(f"{what} returned {rc}")

    def function_attributes(self, image: bytes, name: str) -> dict:
        """``cuModuleLoadData`` (a cubin, or PTX that the driver compiles) and
        ``cuFuncGetAttribute`` of kernel ``name``."""
        module, func = ctypes.c_void_p(), ctypes.c_void_p()
        buf = ctypes.create_string_buffer(image, len(image) + 1)
        self._check(self.cu.cuModuleLoadData(ctypes.byref(module), buf), "cuModuleLoadData")
        try:
            self._check(self.cu.cuModuleGetFunction(ctypes.byref(func), module, name.encode()),
                        "cuModuleGetFunction")
            out = {}
            for key, attr in _CU_ATTR.items():
                v = ctypes.c_int()
                self._check(self.cu.cuFuncGetAttribute(ctypes.byref(v), attr, func),
                            "cuFuncGetAttribute")
                out[key] = v.value
            return out
        finally:
            self.cu.cuModuleUnload(module)

    def runtime_attributes(self, image: bytes, name: str) -> dict:
        """``cudaFuncGetAttributes`` of kernel ``name`` of a cubin loaded with
        ``cudaLibraryLoadData`` (CUDA 12.5+: a ``cudaKernel_t`` is a valid ``func``)."""
        if self.cudart is None:
            raise RuntimeError("no libcudart")
        lib, kern = ctypes.c_void_p(), ctypes.c_void_p()
        buf = ctypes.create_string_buffer(image, len(image) + 1)
        self._check(self.cudart.cudaLibraryLoadData(ctypes.byref(lib), buf, None, None, 0, None,
                                                    None, 0), "cudaLibraryLoadData")
        try:
            self._check(self.cudart.cudaLibraryGetKernel(ctypes.byref(kern), lib, name.encode()),
                        "cudaLibraryGetKernel")
            attrs = ctypes.create_string_buffer(1024)   # cudaFuncAttributes, with room to spare
            self._check(self.cudart.cudaFuncGetAttributes(attrs, kern), "cudaFuncGetAttributes")
            size_t = ctypes.sizeof(ctypes.c_size_t)
            shared, const, local = (int.from_bytes(attrs.raw[i * size_t:(i + 1) * size_t],
                                                   "little") for i in range(3))
            ints = [int.from_bytes(attrs.raw[3 * size_t + 4 * i:3 * size_t + 4 * i + 4], "little",
                                   signed=True) for i in range(4)]
            return {"shared_size_bytes": shared, "const_size_bytes": const,
                    "local_size_bytes": local, "max_threads_per_block": ints[0],
                    "num_regs": ints[1], "ptx_version": ints[2], "binary_version": ints[3]}
        finally:
            self.cudart.cudaLibraryUnload(lib)


def _elf(data: bytes) -> bytes | None:
    """The ELF file inside ``data`` (CuPy's cache file: a hash, then the binary, perhaps more),
    cut to the length its header gives (the end of the section or program header table, which
    NVRTC's cubins put last), since nvdisasm refuses trailing bytes."""
    at = data.find(b"\x7fELF")
    if at < 0 or len(data) < at + 64:
        return None
    head = data[at:at + 64]

    def field(lo, hi):
        return int.from_bytes(head[lo:hi], "little")

    # the section header table and the program header table, whichever ends later
    size = max(field(0x28, 0x30) + field(0x3A, 0x3C) * field(0x3C, 0x3E),
               field(0x20, 0x28) + field(0x36, 0x38) * field(0x38, 0x3A))
    return data[at:at + size] if 64 <= size <= len(data) - at else data[at:]


def _cupy_binary(cache: Path, before: set) -> tuple[str, bytes, bytes] | None:
    """The binary CuPy cached for the last compile: (``"cubin"`` or ``"ptx"``, the binary, the
    cache file's bytes as they are)."""
    new = [f for f in cache.rglob("*") if f.is_file() and f not in before]
    for f in sorted(new, key=lambda f: f.stat().st_mtime, reverse=True):
        data = f.read_bytes()
        elf = _elf(data)
        if elf is not None:
            return "cubin", elf, data
        if b".version" in data:
            return "ptx", data[data.find(b"//"):] if b"//" in data else data, data
    return None


def _loaded(word: str) -> list[str]:
    try:
        with open("/proc/self/maps") as f:
            return sorted({line.split()[-1] for line in f if word in line and "/" in line})
    except OSError:
        return []


def _try(fn):
    try:
        return fn()
    except Exception as exc:   # a version we could not read is recorded as the error
        return f"{type(exc).__name__}: {exc}"


def device(folder: Path, out: Path) -> None:
    started = time.time()
    sys.path.insert(0, str(folder))       # this branch's package, not the checkout's
    cache = Path("/tmp/cupy_cache_registers")
    os.environ["CUPY_CACHE_DIR"] = str(cache)
    cache.mkdir(parents=True, exist_ok=True)
    manifest = json.loads((folder / "manifest.json").read_text())
    import cupy as cp

    try:
        import greenlet  # noqa: F401  (the simulator's; the device image may not have it)
    except ImportError:   # the record uses NVRTC and nvdisasm only, never the simulator
        import types

        sys.modules["greenlet"] = types.SimpleNamespace(greenlet=object)
    from gpu_lessons.kernels import compiled as cm
    from gpu_lessons.kernels import nvrtc as nv

    cp.zeros(1)                           # the primary context, current for the driver calls
    drv = _Driver()
    props = cp.cuda.runtime.getDeviceProperties(0)
    smi = _try(lambda: subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                                       "--format=csv,noheader"], capture_output=True, text=True,
                                      check=False).stdout.strip())
    tool = shutil.which("nvdisasm")
    meta = {"date_utc": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%MZ"),
            "gpu": props["name"].decode() if isinstance(props["name"], bytes) else props["name"],
            "cc": f"{props['major']}.{props['minor']}", "nvidia_smi": smi,
            "driver_api": cp.cuda.runtime.driverGetVersion(),
            "runtime": cp.cuda.runtime.runtimeGetVersion(), "cupy": cp.__version__,
            "cupy_nvrtc": list(cp.cuda.nvrtc.getVersion()),
            "nvrtc_wheel": _dist_version("nvidia-cuda-nvrtc"), "python": platform.python_version(),
            "nvdisasm": _try(lambda: cm.nvdisasm_version(tool)) if tool else None,
            "package": str(Path(cm.__file__).resolve().parents[2])}
    lib = _try(nv.newest_library)
    meta["device_nvrtc"] = _try(lambda: list(nv.version(lib))) if lib is not None else None
    meta["device_nvrtc_loaded"] = _loaded("nvrtc")
    rows = []
    for k in manifest["kernels"]:
        row = {"puzzle": k["puzzle"], "kernel": k["kernel"]}
        name, cubin = k["kernel"], _unb64(k["cubin"])
        steps = {"compile_cubin_driver": (drv.function_attributes, cubin),
                 "compile_cubin_runtime": (drv.runtime_attributes, cubin),
                 "compile_ptx_driver_jit": (drv.function_attributes, k["ptx"].encode())}
        for key, (step, image) in steps.items():
            try:
                row[key] = step(image, name)
            except Exception as exc:   # record it and go on
                row[key] = {"error": f"{type(exc).__name__}: {exc}"}
        try:
            before = set(cache.rglob("*"))
            raw = cp.RawKernel(k["source"], name, options=("-fmad=false",))
            raw.compile()
            row["cupy"] = {key: int(v) for key, v in raw.attributes.items()}
            found = _cupy_binary(cache, before)
            if found is not None:
                row["cupy"].update(binary_kind=found[0], binary=_b64(found[1]),
                                   cache_file=_b64(found[2]),
                                   binary_sha256=hashlib.sha256(found[1]).hexdigest())
        except Exception as exc:
            row["cupy"] = {"error": f"{type(exc).__name__}: {exc}",
                           "traceback": traceback.format_exc()[-1500:]}
        try:   # the device's disassembler on CuPy's cubin, a check on the one used here
            if row["cupy"].get("binary_kind") == "cubin" and tool:
                sass = cm.parse_sass(cm.disassemble(_unb64(row["cupy"]["binary"]), tool))
                row["cupy"]["device_nvdisasm_instructions"] = list(cm.sass_instructions(sass))
        except Exception as exc:
            row["cupy"]["device_nvdisasm_error"] = f"{type(exc).__name__}: {exc}"
        try:
            res = nv.compile_cubin(k["source"], ARCH, tuple(k["options"]))
            row["device_nvrtc"] = {**cm.ptxas_resources(res.log, name), "version": list(res.version),
                                   "cubin": _b64(res.cubin)}
        except Exception as exc:
            row["device_nvrtc"] = {"error": f"{type(exc).__name__}: {exc}"}
        rows.append(row)
        got = row.get("compile_cubin_driver", {}).get("num_regs")
        print(f"{k['puzzle']}: compile() {k['registers']}, cubin on GPU {got}, "
              f"CuPy {row['cupy'].get('num_regs')}", flush=True)
    meta["cupy_nvrtc_loaded"] = _loaded("nvrtc")
    meta["seconds"] = round(time.time() - started, 1)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": meta, "local": manifest["meta"], "rows": rows}, indent=1))
    print(f"wrote {out} in {meta['seconds']} s")


# -- here: the record -------------------------------------------------------------------------------

def _resources(d: dict) -> dict:
    return {"registers": d["registers"], "local_bytes": d["local_bytes"],
            "spill_store_bytes": d["spill_store_bytes"], "spill_load_bytes": d["spill_load_bytes"],
            "static_shared_bytes": d["static_shared_bytes"]}


def _cupy_summary(cupy: dict) -> dict:
    """CuPy's attributes (or its error) without the binaries."""
    return {k: v for k, v in cupy.items()
            if k not in ("binary", "cache_file", "device_nvdisasm_instructions", "traceback")}


def record(raw_path: Path, manifest_path: Path, out: Path) -> None:
    """The record: per kernel, ``compile(..., ftz=False)`` (the cubin the H200 loaded) against the
    H200's attributes of that cubin, the device NVRTC's SASS against it, and ``compile()`` with
    its defaults (CuPy's ``-ftz=true`` too) against the registers CuPy's own compile had on the
    H200 in ``tests/data/h200_cuda_translation.json``."""
    sys.path.insert(0, str(ROOT))
    from gpu_lessons.kernels import compile
    from gpu_lessons.kernels import compiled as cm

    raw = json.loads(raw_path.read_text())
    manifest = {k["puzzle"]: k for k in json.loads(manifest_path.read_text())["kernels"]}
    translation = json.loads((ROOT / "tests" / "data" / "h200_cuda_translation.json").read_text())
    cupy_regs = {r["puzzle"]: r.get("registers") for r in translation["puzzles"]}
    worked = {p.id: (k, args) for p, k, args in worked_kernels()}
    tool = cm.nvdisasm_path()
    rows = []
    for r in raw["rows"]:
        local = manifest[r["puzzle"]]
        mine = cm.sass_instructions(cm.parse_sass(cm.disassemble(_unb64(local["cubin"]), tool)))
        dev = r.get("device_nvrtc", {})
        dev_sass = (cm.sass_instructions(cm.parse_sass(cm.disassemble(_unb64(dev["cubin"]), tool)))
                    if "cubin" in dev else None)
        ck = compile(*worked[r["puzzle"]][:1], *worked[r["puzzle"]][1])
        cupy = r.get("cupy", {})
        cupy_sass = None
        if cupy.get("binary_kind") == "cubin":
            try:
                cupy_sass = cm.sass_instructions(cm.parse_sass(cm.disassemble(
                    _unb64(cupy["binary"]), tool)))
            except RuntimeError as exc:   # CuPy's cache entry is not always a plain ELF
                cupy["sass_error"] = str(exc)[:200]
        rows.append({
            "puzzle": r["puzzle"], "kernel": r["kernel"], "size": local["size"],
            "compile_ftz_false": _resources(local),
            "h200_cubin_cuFuncGetAttribute": r["compile_cubin_driver"],
            "h200_cubin_cudaFuncGetAttributes": r["compile_cubin_runtime"],
            "h200_ptx_driver_jit": r["compile_ptx_driver_jit"],
            "h200_device_nvrtc": {k: v for k, v in dev.items() if k != "cubin"},
            "h200_device_nvrtc_sass_equal": dev_sass == mine if dev_sass is not None else None,
            "sass_ftz_false": list(mine),
            "compile": {"registers": ck.registers_per_thread, "local_bytes": ck.local_bytes,
                        "spill_store_bytes": ck.spill_store_bytes,
                        "spill_load_bytes": ck.spill_load_bytes,
                        "static_shared_bytes": ck.static_shared_bytes},
            "h200_cupy_registers_2026_12_01": cupy_regs.get(r["puzzle"]),
            "h200_cupy_run_on_gpu": _cupy_summary(cupy),
            "h200_cupy_sass_equal": (list(cupy_sass) == list(ck.instructions)
                                     if cupy_sass is not None else None),
            "sass": list(ck.instructions)})
        print(r["puzzle"], flush=True)
    data = {"what": "Registers, local and shared memory and SASS of every worked puzzle kernel "
                    "(solutions/puzzle_kernels.py, the puzzle's first size, seed 0) as "
                    "gpu_lessons.kernels.compile reports them on a CPU, against the CUDA runtime on "
                    "an H200 for the same cubin (cuFuncGetAttribute and cudaFuncGetAttributes), "
                    "against the device's own NVRTC, and against the registers CuPy's compile "
                    "(run_on_gpu) had on the H200 on 2026-12-01",
            "how": "tools/device/registers_h200.py prepare / device / record; the cubin the H200 "
                   "loaded is compile(..., ftz=False) (options -fmad=false -lineinfo); compile()'s "
                   "defaults add CuPy's -ftz=true; SASS: nvdisasm instructions without addresses "
                   "or trailing NOP padding",
            "device": raw["meta"], "local": raw["local"],
            "compile_options": list(ck.options), "compile_nvrtc": ck.nvrtc,
            "record_nvdisasm": cm.nvdisasm_version(tool), "rows": rows}
    out.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {out}")


def main(argv=None) -> None:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    sub.add_parser("prepare").add_argument("folder", type=Path)
    d = sub.add_parser("device")
    d.add_argument("folder", type=Path)
    d.add_argument("out", type=Path)
    r = sub.add_parser("record")
    r.add_argument("raw", type=Path)
    r.add_argument("manifest", type=Path)
    r.add_argument("out", type=Path)
    a = ap.parse_args(argv)
    if a.what == "prepare":
        prepare(a.folder)
    elif a.what == "device":
        device(a.folder, a.out)
    else:
        record(a.raw, a.manifest, a.out)


if __name__ == "__main__":
    main()

"""Record the CUDA runtime's occupancy answer over a broad grid of launch configurations.

Run on a machine with an NVIDIA GPU and CuPy:

    python3 tools/device/occupancy_grid.py OUT.json

For kernels compiled with different register caps and static shared-memory sizes, it asks the
driver (``cuOccupancyMaxActiveBlocksPerMultiprocessor``) how many blocks fit on one SM for every
block size x dynamic shared memory x preferred carveout in the grid, and writes the rows that
``tests/models/test_occupancy.py`` replays through ``gpu_lessons.occupancy``.  The kernel's register count
is read back from the driver (``CU_FUNC_ATTRIBUTE_NUM_REGS``), so the data holds what was really
compiled, whatever the compiler chose under the cap.
"""

import ctypes
import datetime
import json
import sys

import cupy

# CUfunction_attribute values from cuda.h
NUM_REGS, SHARED_SIZE_BYTES, MAX_DYNAMIC_SHARED, PREFERRED_CARVEOUT = 4, 1, 8, 9

SOURCE = r"""
#ifndef STATIC_SMEM
#define STATIC_SMEM 0
#endif
#ifndef NACC
#define NACC 48
#endif
extern "C" __global__ void busy(const float* in, float* out, int n) {
    // Many independent accumulators keep many values live, so the register cap decides the count.
    float acc[NACC];
    int t = blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll
    for (int i = 0; i < NACC; ++i) acc[i] = in[(t + i * 97) % n];
    for (int r = 0; r < 8; ++r) {
#pragma unroll
        for (int i = 0; i < NACC; ++i) acc[i] = acc[i] * acc[(i + r + 1) % NACC] + 1.0f;
    }
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < NACC; ++i) s += acc[i];
#if STATIC_SMEM > 0
    __shared__ char pad[STATIC_SMEM];
    pad[threadIdx.x % STATIC_SMEM] = (char)s;
    __syncthreads();
    s += pad[(threadIdx.x + 1) % STATIC_SMEM];
#endif
    out[t] = s;
}
"""

# (accumulators, register cap): 48 live values need <= ~96 registers; 200 push past 200.
KERNELS = [(48, cap) for cap in (16, 24, 32, 37, 40, 48, 56, 64, 72, 80, 96)] + \
          [(200, cap) for cap in (104, 128, 152, 168, 184, 200, 232, 255)]
STATIC_SMEM = [0, 4096, 40000]
BLOCK_SIZES = [32, 64, 96, 128, 160, 192, 256, 288, 320, 384, 448, 512, 640, 768, 1024, 100, 257]
DYNAMIC_SMEM = [0, 1, 1000, 2048, 8192, 16384, 24576, 40960, 65536, 100000, 150000, 190000]
CARVEOUTS = [None, 0, 10, 25, 50, 60, 75, 90, 100]


def main(path):
    cupy.cuda.Device(0).use()
    cupy.zeros(1)  # create the context
    cuda = ctypes.CDLL("libcuda.so.1")
    dev = cupy.cuda.runtime.getDeviceProperties(0)
    optin = int(dev["sharedMemPerBlockOptin"])
    driver = cupy.cuda.runtime.driverGetVersion()

    def attr(fn, which):
        v = ctypes.c_int()
        assert cuda.cuFuncGetAttribute(ctypes.byref(v), which, fn) == 0
        return v.value

    rows, kernels = [], []
    for static in STATIC_SMEM:
        for nacc, cap in KERNELS:
            opts = (f"--maxrregcount={cap}", f"-DSTATIC_SMEM={static}", f"-DNACC={nacc}")
            kern = cupy.RawModule(code=SOURCE, options=opts).get_function("busy")
            fn = ctypes.c_void_p(kern.kernel.ptr)
            regs, static_bytes = attr(fn, NUM_REGS), attr(fn, SHARED_SIZE_BYTES)
            name = f"busy_a{nacc}_r{cap}_s{static}"
            kernels.append({"kernel": name, "cap": cap, "registers": regs,
                            "static_smem": static_bytes})
            assert cuda.cuFuncSetAttribute(fn, MAX_DYNAMIC_SHARED, optin - static_bytes) == 0
            for carve in CARVEOUTS:
                assert cuda.cuFuncSetAttribute(fn, PREFERRED_CARVEOUT,
                                               -1 if carve is None else carve) == 0
                for block in BLOCK_SIZES:
                    for dyn in DYNAMIC_SMEM:
                        if static_bytes + dyn > optin:
                            continue
                        n = ctypes.c_int(-1)
                        err = cuda.cuOccupancyMaxActiveBlocksPerMultiprocessor(
                            ctypes.byref(n), fn, block, ctypes.c_size_t(dyn))
                        rows.append([name, regs, static_bytes, block, dyn, carve,
                                     n.value if err == 0 else -err])
            print(name, "regs", regs, "static", static_bytes, "rows", len(rows), flush=True)

    meta = {
        "gpu": dev["name"].decode() if isinstance(dev["name"], bytes) else dev["name"],
        "cc": f"{dev['major']}.{dev['minor']}",
        "driver_version": driver,
        "runtime_version": cupy.cuda.runtime.runtimeGetVersion(),
        "cupy": cupy.__version__,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d"),
        "sharedMemPerMultiprocessor": int(dev["sharedMemPerMultiprocessor"]),
        "sharedMemPerBlockOptin": optin,
        "reservedSharedMemPerBlock": int(dev.get("reservedSharedMemPerBlock", -1)),
        "regsPerMultiprocessor": int(dev["regsPerMultiprocessor"]),
        "maxBlocksPerMultiProcessor": int(dev.get("maxBlocksPerMultiProcessor", -1)),
        "api": "cuOccupancyMaxActiveBlocksPerMultiprocessor; carveout set with "
               "cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT), "
               "null = -1 (default); negative blocks_per_sm = -CUresult on error",
        "script": "tools/device/occupancy_grid.py",
        "kernels": kernels,
    }
    cols = ["kernel", "registers_per_thread", "static_smem", "threads_per_block",
            "dynamic_smem", "carveout", "blocks_per_sm"]
    with open(path, "w") as f:
        json.dump({"meta": meta, "columns": cols, "rows": rows}, f, separators=(",", ":"))
    print("wrote", len(rows), "rows to", path)


if __name__ == "__main__":
    main(sys.argv[1])

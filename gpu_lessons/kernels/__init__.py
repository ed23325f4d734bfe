"""The kernel toolchain: a learner's kernel, written in Python from one thread's view, run in the
SIMT simulator, translated to CUDA C, compiled and run on a GPU.

>>> import numpy as np
>>> from gpu_lessons.kernels import run, to_cuda
>>> def scale(t, x, out, n):
...     i = t.block_idx.x * t.block_dim.x + t.thread_idx.x
...     if i < n:
...         out[i] = x[i] * 2.0
>>> x, out = np.ones(256, np.float32), np.zeros(256, np.float32)
>>> run(scale, 2, 128, x, out, 256).simt_efficiency
1.0
>>> "out[i] = x[i] * 2.0f;" in to_cuda(scale, x, out, 256)
True

The parts, each a module of its own:

* :mod:`~gpu_lessons.kernels.constructs` — each construct of the kernel language defined once:
  its Python, its CUDA C, its meaning (the tables of ``docs/kernel_language.md``);
* :mod:`~gpu_lessons.kernels.lang` — the kernel language: the one syntax walk that decides what a
  kernel may use (:func:`validate`) and refuses the rest with its line, its reason and the form
  that works;
* :mod:`~gpu_lessons.kernels.simt` — the warp simulator (:func:`run`);
* ``cuda_*`` — the translation to CUDA C (:func:`to_cuda`);
* :mod:`~gpu_lessons.kernels.nvrtc` — NVRTC without a GPU;
* :mod:`~gpu_lessons.kernels.compiled` — the machine code, without a GPU (:func:`compile`:
  registers, spills, PTX and SASS, each line tied to the learner's Python line);
* :mod:`~gpu_lessons.kernels.fragments` — which lane holds which element of a tensor-core
  operand (:func:`mma_layout`);
* :mod:`~gpu_lessons.kernels.gpu` — a run on a GPU (:func:`run_on_gpu`, :func:`beside_simulator`).

The learner's guide to the language, with each construct's CUDA counterpart, is
``docs/kernel_language.md``.
"""

from .compiled import AsmLine, CompiledKernel, compile
from .cuda_c import to_cuda
from .cuda_types import CudaSource
from .fragments import MmaLayout, mma_layout
from .gpu import BesideSimulator, GpuRun, beside_simulator, run_on_gpu
from .lang import KernelLanguageError, validate
from .simt import KernelError, SimResult, SimtError, run

__all__ = ["AsmLine", "BesideSimulator", "CompiledKernel", "CudaSource", "GpuRun", "KernelError",
           "KernelLanguageError", "MmaLayout", "SimResult", "SimtError", "beside_simulator",
           "compile", "mma_layout", "run", "run_on_gpu", "to_cuda", "validate"]

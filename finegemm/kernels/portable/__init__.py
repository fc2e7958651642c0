"""Portable Triton kernels (plain ``triton.language``): any CUDA GPU with FP8, or the CPU interpreter."""

from ...jit.interpret import enable_interpreter_without_gpu

enable_interpreter_without_gpu()

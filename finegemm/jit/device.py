"""Device facts the heuristics take as input, and the SM cap set by :func:`set_num_sms`."""

from __future__ import annotations

import functools
import numbers
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class DeviceFacts:
    """What the config heuristics may know about a device (a pure input: tests build their own)."""

    name: str
    num_sms: int
    smem_per_block: int  # bytes of shared memory one CTA may opt into
    capability: tuple[int, int]
    interpreter: bool = False  # True: CPU tensors, run through Triton's interpreter

    @property
    def is_sm90(self) -> bool:
        return self.capability == (9, 0) and not self.interpreter


# H200/H100 SXM: 132 SMs, 227 KiB opt-in shared memory per block.
H200 = DeviceFacts("NVIDIA H200", 132, 232448, (9, 0))
CPU_INTERPRETER = DeviceFacts("cpu (Triton interpreter)", 1, 232448, (0, 0), interpreter=True)

_num_sms_cap: int | None = None


def set_num_sms(num_sms: int) -> None:
    """Cap the SMs the persistent kernels use (DeepGEMM's ``set_num_sms``)."""
    if isinstance(num_sms, bool) or not isinstance(num_sms, numbers.Integral):
        raise TypeError(f"set_num_sms: num_sms must be an int (numpy integers count), got {type(num_sms).__name__} "
                        f"{num_sms!r}")
    num_sms = int(num_sms)
    if num_sms <= 0:
        raise ValueError(f"set_num_sms: num_sms must be a positive int, got {num_sms!r}")
    if torch.cuda.is_available():
        total = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
        if num_sms > total:
            raise ValueError(f"set_num_sms: num_sms={num_sms} exceeds the device's {total} SMs")
    global _num_sms_cap
    _num_sms_cap = num_sms


def get_num_sms() -> int:
    """SMs the kernels will use: the cap from :func:`set_num_sms`, else the current device's count."""
    if _num_sms_cap is not None:
        return _num_sms_cap
    if torch.cuda.is_available():
        return torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    return CPU_INTERPRETER.num_sms


@functools.lru_cache(maxsize=16)
def _cuda_facts(index: int) -> DeviceFacts:
    props = torch.cuda.get_device_properties(index)
    smem = getattr(props, "shared_memory_per_block_optin", 0) or 232448
    return DeviceFacts(props.name, props.multi_processor_count, int(smem), (props.major, props.minor))


def device_facts(device: torch.device) -> DeviceFacts:
    """Facts of ``device`` with the SM cap applied; CPU tensors map to the interpreter."""
    if device.type != "cuda":
        return CPU_INTERPRETER
    facts = _cuda_facts(device.index if device.index is not None else torch.cuda.current_device())
    if _num_sms_cap is not None and _num_sms_cap != facts.num_sms:
        facts = DeviceFacts(facts.name, min(_num_sms_cap, facts.num_sms), facts.smem_per_block, facts.capability)
    return facts

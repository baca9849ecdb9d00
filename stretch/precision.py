"""Which precision to train in, and how, chosen from what the machine does natively.

bfloat16 autocast pays only where the hardware multiplies bf16 itself: on x86 CPUs with AMX or AVX512-BF16,
and on CUDA GPUs that support it. Elsewhere (an AVX2-only CPU, say) PyTorch emulates bf16 in float32 and
converts back and forth, so the same step runs several times slower than in plain float32: a run that
reached step 500 in 36 s on an AMX machine had reached step 50 after 132 s on an AVX2 one. So the default
asks the hardware, and the run's first line says what it chose and why.

The GPU path is chosen here the same way: whether to ``torch.compile`` and whether to use fused attention.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Precision:
    bf16: bool
    why: str  # in words, for the run's first line: "bf16 autocast: this CPU has AMX"

    def __str__(self) -> str:
        return self.why


def cpu_capability() -> str:
    """What PyTorch's CPU kernels were picked for: "AVX2", "AVX512", ... (its own words)."""
    try:
        return torch.backends.cpu.get_cpu_capability()
    except (AttributeError, RuntimeError):  # an older PyTorch
        return "unknown"


def native_bf16_cpu() -> str | None:
    """The feature that makes bf16 fast on this CPU ("AMX", "AVX512-BF16"), or None."""
    probes = (("AMX", "_is_amx_tile_supported"), ("AVX512-BF16", "_is_avx512_bf16_supported"))
    for name, probe in probes:
        check = getattr(torch.cpu, probe, None)
        try:
            if check is not None and check():
                return name
        except RuntimeError:
            pass
    return None


def choose(device: str, asked: bool | None = None) -> Precision:
    """The precision for training steps on ``device``: ``asked`` (--bf16/--no-bf16) if given, else bf16 where the
    hardware does it natively."""
    if device.startswith("cuda"):
        native = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
        reason = "this GPU supports bf16" if native else "this GPU has no bf16"
    elif device == "cpu":
        feature = native_bf16_cpu()
        native = feature is not None
        reason = f"this CPU has {feature}" if feature else f"this CPU ({cpu_capability()}) would emulate bf16, slower"
    else:
        native, reason = False, f"no bf16 autocast on {device}"
    if asked is not None:
        said = "--bf16" if asked else "--no-bf16"
        return Precision(asked, f"{'bf16 autocast' if asked else 'float32'} ({said}; {reason})")
    return Precision(native, f"{'bf16 autocast' if native else 'float32'} ({reason})")


@dataclass(frozen=True)
class Compile:
    on: bool
    why: str  # in words, for the run's first line: "torch.compile (a CUDA GPU)"

    def __str__(self) -> str:
        return self.why


def choose_compile(device: str, asked: bool | None = None) -> Compile:
    """Whether to ``torch.compile`` the training model on ``device``: ``asked`` (--compile/--no-compile) if given,
    else on for a CUDA GPU only.

    On a GPU compiling fuses the many small kernels of a step, which is where a small model's time goes, and
    pays its one-off cost back over a run of thousands of steps (benchmarks/gpu_train.py measures both sides).
    On the 2-core development CPU it did not pay: the fast preset's first 20 float32 steps took 70 s compiled
    against under a second eager, twice the preset's whole run to validation loss 1.88, and the compiled steps
    after them were no faster.
    """
    if asked is not None:
        said = "--compile" if asked else "--no-compile"
        return Compile(asked, f"{'torch.compile' if asked else 'eager'} ({said})")
    if device.startswith("cuda"):
        return Compile(True, "torch.compile (a CUDA GPU)")
    return Compile(False, f"eager (no torch.compile on {device}: it does not pay there)")


def choose_fused_attention(device: str) -> bool:
    """Whether the training model computes attention with ``scaled_dot_product_attention``: on a CUDA GPU only.

    stretch/model.py gives the CPU measurements: there the reference's explicit softmax was as fast or faster.
    """
    return device.startswith("cuda")

"""The stretch's training speed on whatever device is here, side by side with a nanoGPT-style model.

One run prints every figure docs/stretch.md and docs/performance.md need, as two tables:

1. tokens per second of training steps, at the same shape, batch and precision, for: the kit as `gptkit train`
   runs it (fused attention, torch.compile where the device gets it), the kit's training step with the
   reference TinyGPT's own attention (what the stretch trained before), and a nanoGPT-style model (tied
   embeddings, no biases, fused attention, compiled alike) in a loop of nanoGPT's shape.
2. time to a validation loss: the kit's `gpu` preset (or the --quick shape) and the nanoGPT-style model trained
   on the same batches with the same schedule and the same evaluation, each run to its last step; the best
   validation loss and its step, and where the kit's default patience would have stopped it.

Run from the repository root. On a GPU, the default is the lesson's model at batch 64 for 5000 steps (a few
minutes on a recent GPU); --quick is a small model for a few hundred steps that takes under a minute on a CPU:

    python benchmarks/gpu_train.py [--quick] [--device auto|cpu|cuda] [--steps N] [--target LOSS]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from stretch.data import DataError, Dataset, load_dataset  # noqa: E402
from stretch.precision import (  # noqa: E402
    choose,
    choose_compile,
    choose_fused_attention,
    cpu_capability,
    native_bf16_cpu,
)
from stretch.train import (  # noqa: E402
    DEFAULT_PATIENCE,
    TrainConfig,
    evaluate,
    get_batch,
    lr_at,
    make_optimizer,
    pick_device,
    preset,
    start,
    train,
)

# --quick: a model a 2-core CPU trains a few hundred steps of in seconds
QUICK = dict(
    n_layers=2,
    d=64,
    n_heads=4,
    block_size=64,
    batch_size=16,
    steps=300,
    lr=3e-3,
    min_lr=3e-4,
    warmup=20,
    eval_interval=50,
    eval_tokens=4096,
    dropout=0.0,
)


class NanoAttention(nn.Module):
    def __init__(self, d: int, n_heads: int, dropout: float):
        super().__init__()
        self.n_heads, self.dropout = n_heads, dropout
        self.c_attn = nn.Linear(d, 3 * d, bias=False)
        self.c_proj = nn.Linear(d, d, bias=False)
        self.resid_dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, d = x.shape
        q, k, v = (t.view(B, T, self.n_heads, -1).transpose(1, 2) for t in self.c_attn(x).split(d, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0, is_causal=True)
        return self.resid_dropout(self.c_proj(y.transpose(1, 2).contiguous().view(B, T, d)))


class NanoBlock(nn.Module):
    def __init__(self, d: int, n_heads: int, dropout: float):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d, bias=False)
        self.attn = NanoAttention(d, n_heads, dropout)
        self.ln_2 = nn.LayerNorm(d, bias=False)
        self.mlp = nn.Sequential(
            nn.Linear(d, 4 * d, bias=False), nn.GELU(), nn.Linear(4 * d, d, bias=False), nn.Dropout(dropout)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class NanoGPT(nn.Module):
    """nanoGPT's model as its shakespeare_char recipe builds it: no biases, the head tied to the token
    embedding, weights drawn from N(0, 0.02) with the residual projections scaled down by depth."""

    def __init__(self, vocab_size: int, d: int, n_heads: int, n_layers: int, block_size: int, dropout: float):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, d)
        self.wpe = nn.Embedding(block_size, d)
        self.drop = nn.Dropout(dropout)
        self.h = nn.ModuleList(NanoBlock(d, n_heads, dropout) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d, bias=False)
        self.lm_head = nn.Linear(d, vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * n_layers) if name.endswith(("c_proj.weight", "mlp.2.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


@dataclass
class Curve:
    val: list[tuple[int, float]]
    seconds: list[float]
    steps: int


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def nano_train(cfg: TrainConfig, data: Dataset, device: str, steps: int, evaluate_every: bool) -> tuple[Curve, float]:
    """nanoGPT's loop: a loss read every 10 steps only, evaluations at the interval. Returns the curve and the
    seconds of the last `steps // 2` steps (compilation and warm-up are in the first half)."""
    torch.manual_seed(cfg.seed)
    model = NanoGPT(data.tokenizer.vocab_size, cfg.d, cfg.n_heads, cfg.n_layers, cfg.block_size, cfg.dropout)
    model.to(device)
    optimizer = make_optimizer(model, cfg, device)
    step_model = torch.compile(model) if cfg.compile else model
    generator = torch.Generator().manual_seed(cfg.seed)  # the kit's batches, in the kit's order
    curve, started, half = Curve([], [], 0), time.perf_counter(), 0.0
    for step in range(steps):
        if step == steps // 2:
            sync(device)
            half = time.perf_counter()
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, cfg)
        x, y = get_batch(data.train, cfg, generator, device)
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=bool(cfg.bf16)):
            loss = F.cross_entropy(step_model(x).flatten(0, 1), y.flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step % 10 == 0:
            loss.item()  # nanoGPT logs every 10 steps, and waits for the device only then
        if evaluate_every and ((step + 1) % cfg.eval_interval == 0 or step + 1 == steps):
            curve.val.append((step + 1, evaluate(model, data.val, cfg, device)))
            curve.seconds.append(time.perf_counter() - started)
    sync(device)
    curve.steps = steps
    return curve, time.perf_counter() - half


def kit_steps_per_second(cfg: TrainConfig, device: str, data_dir: str, steps: int) -> float:
    """Tokens per second of `gptkit train`'s own loop over the last half of `steps` (no evaluation among them)."""
    cfg = replace(cfg, steps=steps, eval_interval=10 * steps, patience=0)
    run = start(cfg, device, data_dir)
    train(run, device, stop_after=steps // 2, progress=False)  # compiles, warms up
    sync(device)
    started = time.perf_counter()
    train(run, device, stop_after=steps - 1, progress=False)  # the last step evaluates: left out
    sync(device)
    return (steps - 1 - steps // 2) * cfg.batch_size * cfg.block_size / (time.perf_counter() - started)


def first_at(curve: Curve, target: float) -> str:
    hit = next(((s, t) for (s, v), t in zip(curve.val, curve.seconds) if v <= target), None)
    return f"{hit[1]:.1f} s (step {hit[0]})" if hit else "not reached"


def patience_stop(val: list[tuple[int, float]], patience: int) -> str:
    """The step at which `patience` evaluations without a new best would have stopped this curve."""
    best = math.inf
    since = 0
    for step, loss in val:
        best, since = (loss, 0) if loss < best else (best, since + 1)
        if since >= patience and step != val[-1][0]:
            return f"step {step}"
    return "no stop"


def describe_device(device: str) -> str:
    cpu = (
        f"CPU capability {cpu_capability()}, native bf16 {native_bf16_cpu() or 'none'}, {os.cpu_count()} CPUs, "
        f"{torch.get_num_threads()} threads"
    )
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(device)
        gpu = f"{props.name}, compute capability {props.major}.{props.minor}, {props.total_memory / 2**30:.0f} GiB"
        return f"device {device} ({gpu}); {cpu}; torch {torch.__version__}, CUDA {torch.version.cuda}"
    return f"device {device}; {cpu}; torch {torch.__version__}"


def speed_table(cfg: TrainConfig, data: Dataset, device: str, data_dir: str, steps: int) -> None:
    """Tokens per second, the compiled models timed after their compilation."""
    kit_fused = choose_fused_attention(device)
    _, nano_seconds = nano_train(cfg, data, device, steps, evaluate_every=False)
    nano = (steps - steps // 2) * cfg.batch_size * cfg.block_size / nano_seconds
    fused, before = replace(cfg, fused_attention=True), replace(cfg, fused_attention=False, compile=False)
    rows = [
        ("kit, fused attention", fused, kit_steps_per_second(fused, device, data_dir, steps)),
        ("kit, reference attention (before)", before, kit_steps_per_second(before, device, data_dir, steps)),
        ("nanoGPT-style (fused attention)", cfg, nano),
    ]
    print(
        f"\ntokens/s of training steps, batch {cfg.batch_size}, the last {steps - steps // 2} of {steps} steps "
        "(*: the attention `gptkit train` uses here)"
    )
    print(f"  {'model':<36} {'compile':>8} {'tokens/s':>12} {'vs nanoGPT':>11}")
    for name, run_cfg, rate in rows:
        mark = "*" if name.startswith("kit") and run_cfg.fused_attention == kit_fused else " "
        compiled = "yes" if run_cfg.compile else "no"
        print(f"{mark} {name:<36} {compiled:>8} {rate:>12,.0f} {rate / nano:>10.2f}x", flush=True)


def loss_table(cfg: TrainConfig, data: Dataset, device: str, data_dir: str, target: float) -> None:
    """Time to a validation loss: the kit as `gptkit train` runs here, then the nanoGPT-style model, each to the
    last step."""
    run = train(start(replace(cfg, fused_attention=None), device, data_dir), device, progress=False)
    kit = Curve(run.history.val, run.history.val_seconds, run.step)
    nano, _ = nano_train(cfg, data, device, cfg.steps, evaluate_every=True)
    print(
        f"\ntime to validation loss {target} ({cfg.steps} steps, evaluation every {cfg.eval_interval} on "
        f"{cfg.eval_tokens:,} validation characters; compilation and evaluations included)"
    )
    head = f"{'best val (step)':>18} {'last val':>9} {'all steps':>10} {'patience ' + str(DEFAULT_PATIENCE):>12}"
    print(f"  {'model':<16} {'to ' + str(target):>22} {head}")
    for name, curve in (("kit", kit), ("nanoGPT-style", nano)):
        step, best = min(curve.val, key=lambda sv: sv[1])
        print(
            f"  {name:<16} {first_at(curve, target):>22} {f'{best:.4f} ({step})':>18} {curve.val[-1][1]:>9.4f} "
            f"{curve.seconds[-1]:>9.1f}s {patience_stop(curve.val, DEFAULT_PATIENCE):>12}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small model for 300 steps: under a minute on a CPU")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--steps", type=int, help="training steps of the time-to-loss runs (default: the preset's)")
    parser.add_argument("--batch-size", type=int, help="sequences per step (default: the gpu preset's 64)")
    parser.add_argument("--target", type=float, help="the validation loss to time (default 1.55, --quick 2.5)")
    parser.add_argument("--speed-steps", type=int, help="steps per tokens/s measurement (default 200, --quick 20)")
    parser.add_argument(
        "--compile",
        dest="compile_",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="torch.compile the kit's fused model and the nanoGPT-style one (default: on a CUDA GPU only)",
    )
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's own choice)")
    parser.add_argument(
        "--data-dir",
        default=str(ROOT.parent / "shared" / "datasets"),
        help="folder holding tinyshakespeare.txt (default ../shared/datasets)",
    )
    parser.add_argument("--skip-loss", action="store_true", help="the tokens/s table only")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        device = pick_device(args.device)
        data = load_dataset("shakespeare", args.data_dir)
    except (RuntimeError, DataError) as err:
        parser.error(str(err))
    cfg = preset("gpu", **(QUICK if args.quick else {}))
    cfg = replace(cfg, steps=args.steps or cfg.steps, batch_size=args.batch_size or cfg.batch_size)
    cfg = replace(cfg, bf16=choose(device).bf16, compile=choose_compile(device, args.compile_).on, patience=0)
    torch.backends.cuda.matmul.allow_tf32 = True  # nanoGPT's setting; autocast covers the training steps anyway

    print(describe_device(device), flush=True)
    print(
        f"shape: {cfg.n_layers} layers, d={cfg.d}, {cfg.n_heads} heads, block {cfg.block_size}, batch "
        f"{cfg.batch_size}; {choose(device)}; {choose_compile(device, args.compile_)}; dropout {cfg.dropout:g}; "
        f"lr {cfg.lr:g} -> {cfg.min_lr:g} over {cfg.steps} steps",
        flush=True,
    )
    speed_table(cfg, data, device, args.data_dir, args.speed_steps or (20 if args.quick else 200))
    if not args.skip_loss:
        target = args.target if args.target is not None else (2.5 if args.quick else 1.55)
        loss_table(cfg, data, device, args.data_dir, target)


if __name__ == "__main__":
    main()

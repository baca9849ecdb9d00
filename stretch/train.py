"""Train the reference TinyGPT on a character corpus: AdamW, warmup then cosine decay, evaluations, checkpoints.

Deterministic on the CPU for a given seed: the weights come from ``torch.manual_seed(seed)`` and every batch
from one ``torch.Generator`` whose state is checkpointed, so a resumed run draws exactly the batches an
uninterrupted run would have drawn.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

import torch
import torch.nn as nn

from stretch import checkpoint
from stretch.data import Dataset, load_dataset
from stretch.model import ModelConfig, build_model, reference
from stretch.precision import choose


@dataclass(frozen=True)
class TrainConfig:
    corpus: str = "shakespeare"
    n_layers: int = 6
    d: int = 256
    n_heads: int = 8
    block_size: int = 256  # 256 characters: several lines of verse or a whole short function
    batch_size: int = 16
    steps: int = 5000
    lr: float = 1e-3
    min_lr: float = 1e-4  # the cosine decay ends here, at `steps`
    warmup: int = 100
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    eval_interval: int = 250
    eval_tokens: int = 32768  # validation tokens per evaluation: a fixed, evenly spaced set of windows
    seed: int = 1337
    # bfloat16 autocast in training steps (evaluations stay fp32); None: where the hardware does bf16 natively
    # (stretch/precision.py), about 2.5x faster on CPUs with AMX and several times slower where it is emulated
    bf16: bool | None = None

    def model_config(self, vocab_size: int) -> ModelConfig:
        return ModelConfig(vocab_size, self.n_layers, self.d, self.n_heads, self.block_size)


PRESETS: dict[str, dict] = {
    # the lesson's stretch model: 6 layers, 256 wide, 8 heads, 256 characters of context (about 4.8M parameters)
    "stretch": {},
    # the fastest route to validation loss 1.88 on 2 CPU cores we measured (benchmarks/train_speed.py)
    "fast": dict(
        n_layers=4,
        d=128,
        n_heads=4,
        block_size=64,
        batch_size=16,  # twice the steps of batch 32 in the same time, and a shorter cosine: 1.88 sooner in
        steps=1000,  # float32 (45 s against 58) and in bf16 (36 s against 40), 2 cores, AVX512
        lr=5e-3,
        min_lr=5e-4,
        warmup=50,
        eval_interval=50,
        eval_tokens=16384,
    ),
    # a seconds-long smoke test (the tests use it): the loss falls, nothing more
    "tiny": dict(
        n_layers=1,
        d=32,
        n_heads=2,
        block_size=32,
        batch_size=8,
        steps=40,
        lr=1e-2,
        min_lr=1e-3,
        warmup=5,
        eval_interval=10,
        eval_tokens=2048,
    ),
    # nanoGPT's CPU recipe for shakespeare_char, for comparison
    "nanogpt-cpu": dict(
        n_layers=4,
        d=128,
        n_heads=4,
        block_size=64,
        batch_size=12,
        steps=2000,
        lr=1e-3,
        min_lr=1e-4,
        warmup=100,
        eval_interval=250,
        eval_tokens=16384,
    ),
}


def preset(name: str, **overrides) -> TrainConfig:
    """The named preset with any non-None overrides (the CLI passes None for options left unset)."""
    return replace(TrainConfig(), **{**PRESETS[name], **{k: v for k, v in overrides.items() if v is not None}})


@dataclass
class History:
    train: list[float] = field(default_factory=list)  # the loss of every step
    val: list[tuple[int, float]] = field(default_factory=list)  # (step, validation loss)
    val_seconds: list[float] = field(default_factory=list)  # training wall time at each validation loss
    seconds: float = 0.0  # training wall time so far, summed over resumes


def lr_at(step: int, cfg: TrainConfig) -> float:
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    progress = min(1.0, (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup))
    return cfg.min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (cfg.lr - cfg.min_lr)


def make_optimizer(model: nn.Module, cfg: TrainConfig) -> torch.optim.AdamW:
    # decay the matrices and embeddings only; biases and LayerNorm gains stay free (as nanoGPT does)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": rest, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.99))


def get_batch(
    data: torch.Tensor, cfg: TrainConfig, generator: torch.Generator, device: str
) -> tuple[torch.Tensor, torch.Tensor]:
    starts = torch.randint(len(data) - cfg.block_size, (cfg.batch_size,), generator=generator)
    rows = torch.stack([data[i : i + cfg.block_size + 1] for i in starts.tolist()])
    rows = rows.to(device)
    return rows[:, :-1], rows[:, 1:]


@torch.no_grad()
def evaluate(model: nn.Module, data: torch.Tensor, cfg: TrainConfig, device: str) -> float:
    """Mean loss over evenly spaced windows of data: the same windows every time, so evaluations compare."""
    clm_loss = reference("m3_train").clm_loss
    n = max(1, min(cfg.eval_tokens // cfg.block_size, (len(data) - 1) // cfg.block_size))
    starts = torch.linspace(0, len(data) - cfg.block_size - 1, n).long().tolist()
    model.eval()
    total = 0.0
    for chunk in range(0, n, 64):
        rows = torch.stack([data[i : i + cfg.block_size + 1] for i in starts[chunk : chunk + 64]]).to(device)
        total += clm_loss(model(rows[:, :-1]), rows[:, 1:]).item() * len(rows)
    model.train()
    return total / n


def pick_device(device: str) -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("--device cuda asked for, but this PyTorch sees no CUDA GPU; use --device cpu or auto")
    return device


@dataclass
class Run:
    """Everything a training run holds; `state()` is the checkpoint."""

    cfg: TrainConfig
    data: Dataset
    model: nn.Module
    optimizer: torch.optim.Optimizer
    generator: torch.Generator
    step: int = 0
    history: History = field(default_factory=History)

    def state(self) -> dict:
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "model_config": self.cfg.model_config(self.data.tokenizer.vocab_size).to_dict(),
            "train_config": asdict(self.cfg),
            "chars": self.data.tokenizer.chars,
            "step": self.step,
            "generator": self.generator.get_state(),
            "history": asdict(self.history),
        }


def start(cfg: TrainConfig, device: str, data_dir: str | Path | None = None) -> Run:
    if cfg.bf16 is None:  # decided once, here: the checkpoint keeps the choice for a resume
        cfg = replace(cfg, bf16=choose(device).bf16)
    data = load_dataset(cfg.corpus, data_dir)
    torch.manual_seed(cfg.seed)
    model = build_model(cfg.model_config(data.tokenizer.vocab_size)).to(device)
    generator = torch.Generator().manual_seed(cfg.seed)
    return Run(cfg, data, model, make_optimizer(model, cfg), generator)


def resume(path: Path, device: str, data_dir: str | Path | None = None, steps: int | None = None) -> Run:
    """Rebuild a run from its checkpoint; ``steps`` may extend it (the cosine schedule stretches to the new end)."""
    state = checkpoint.load(path)
    known = {f.name for f in fields(TrainConfig)}
    cfg = TrainConfig(**{k: v for k, v in state["train_config"].items() if k in known})
    if steps is not None:
        cfg = replace(cfg, steps=steps)
    data = load_dataset(cfg.corpus, data_dir, chars=state["chars"])
    model = build_model(ModelConfig(**state["model_config"]))
    model.load_state_dict(state["model"])
    model.to(device)
    optimizer = make_optimizer(model, cfg)
    optimizer.load_state_dict(state["optimizer"])
    generator = torch.Generator()
    generator.set_state(state["generator"])
    history = History(**state["history"])
    history.val = [(int(step), float(loss)) for step, loss in history.val]
    return Run(cfg, data, model, optimizer, generator, state["step"], history)


def train(
    run: Run,
    device: str,
    out_dir: Path | None = None,
    stop_after: int | None = None,
    target_loss: float | None = None,
    progress: bool = True,
) -> Run:
    """Train from run.step to cfg.steps (or to stop_after, or until validation loss <= target_loss).

    Checkpoints go to out_dir/ckpt.pt at every evaluation and at the end, and on Ctrl-C.
    """
    from stretch.progress import TrainProgress  # rich is only needed when training

    cfg, model, opt = run.cfg, run.model, run.optimizer
    clm_loss = reference("m3_train").clm_loss
    end = cfg.steps if stop_after is None else min(cfg.steps, stop_after)
    tokens_per_step = cfg.batch_size * cfg.block_size
    bar = TrainProgress(total=cfg.steps, done=run.step, enabled=progress)
    clock = time.perf_counter()
    try:
        with bar:
            while run.step < end:
                for group in opt.param_groups:
                    group["lr"] = lr_at(run.step, cfg)
                x, y = get_batch(run.data.train, cfg, run.generator, device)
                with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=bool(cfg.bf16)):
                    loss = clm_loss(model(x), y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
                opt.step()
                run.step += 1
                run.history.train.append(loss.item())
                now = time.perf_counter()
                run.history.seconds += now - clock
                clock = now
                bar.update(run.step, run.history.train[-1], tokens_per_step * run.step / run.history.seconds)
                if run.step % cfg.eval_interval == 0 or run.step == cfg.steps:
                    val = evaluate(model, run.data.val, cfg, device)
                    run.history.val.append((run.step, val))
                    run.history.seconds += time.perf_counter() - clock  # evaluation is part of training time
                    clock = time.perf_counter()
                    run.history.val_seconds.append(run.history.seconds)
                    bar.log(
                        f"step {run.step:>6}  train {run.history.train[-1]:.4f}  val {val:.4f}  "
                        f"{run.history.seconds:7.1f} s"
                    )
                    if out_dir is not None:
                        checkpoint.save(run.state(), out_dir / "ckpt.pt")
                    if target_loss is not None and val <= target_loss:
                        break
    except KeyboardInterrupt:
        if out_dir is not None:
            checkpoint.save(run.state(), out_dir / "ckpt.pt")
        raise
    if out_dir is not None:
        checkpoint.save(run.state(), out_dir / "ckpt.pt")
    return run

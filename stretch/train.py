"""Train TinyGPT on a character corpus: AdamW, warmup then cosine decay, evaluations, checkpoints, early stopping.

The model trained is ``TrainingGPT`` (stretch/model.py): the reference TinyGPT's weights, optional dropout, and
fused attention on a GPU. Deterministic on the CPU for a given seed: the weights come from ``torch.manual_seed(seed)``
and every batch from one ``torch.Generator`` whose state is checkpointed, so a resumed run draws exactly the
batches an uninterrupted run would have drawn.

Two files: ``ckpt.pt``, the latest state (what ``--resume`` continues), and ``best.pt``, the weights at the
lowest validation loss so far (what sampling loads), since a long run can end past its best.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

import torch
import torch.nn as nn

from stretch import checkpoint
from stretch.data import Dataset, load_dataset
from stretch.model import ModelConfig, build_training_model, reference
from stretch.precision import choose, choose_compile, choose_fused_attention

# evaluations in a row without a new lowest validation loss before a run stops. The lesson's run without dropout
# (on a GPU) was best at step 2750 of 5000, 1.5275, and ended at 1.5938: five evaluations (1250 steps) end such
# a run about a quarter early, while a curve still falling, however slowly, sets a new low far more often
DEFAULT_PATIENCE = 5


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
    dropout: float = 0.0  # on the embeddings, the attention weights and each residual branch, in training only
    # stop after this many evaluations in a row without a new lowest validation loss (0: never stop early)
    patience: int = DEFAULT_PATIENCE
    # torch.compile the training model; None: on a CUDA GPU only (stretch/precision.py says why)
    compile: bool | None = None
    # attention through scaled_dot_product_attention; None: on a CUDA GPU only (stretch/model.py says why)
    fused_attention: bool | None = None

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
    # the lesson's model on a GPU: nanoGPT's shakespeare_char recipe at this batch (batch 64, lr 1e-3 decaying to
    # 1e-4 over 5000 steps, dropout 0.2); the default preset where --device picks CUDA
    "gpu": dict(
        batch_size=64,
        steps=5000,
        lr=1e-3,
        min_lr=1e-4,
        warmup=100,
        eval_interval=250,
        dropout=0.2,
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


def default_preset(device: str) -> str:
    """The preset `gptkit train` uses when none is named: the GPU recipe on a GPU, the lesson's otherwise."""
    return "gpu" if device.startswith("cuda") else "stretch"


def preset(name: str, **overrides) -> TrainConfig:
    """The named preset with any non-None overrides (the CLI passes None for options left unset)."""
    return replace(TrainConfig(), **{**PRESETS[name], **{k: v for k, v in overrides.items() if v is not None}})


@dataclass
class History:
    train: list[float] = field(default_factory=list)  # the loss of every step
    val: list[tuple[int, float]] = field(default_factory=list)  # (step, validation loss)
    val_seconds: list[float] = field(default_factory=list)  # training wall time at each validation loss
    seconds: float = 0.0  # training wall time so far, summed over resumes
    stopped_early: int = 0  # the step at which patience ran out (0: it did not)

    def best(self) -> tuple[int, float] | None:
        """(step, validation loss) of the lowest validation loss so far; the earliest of equals."""
        return min(self.val, key=lambda sv: sv[1]) if self.val else None

    def evaluations_since_best(self) -> int:
        best = self.best()
        return 0 if best is None else len(self.val) - 1 - self.val.index(best)


def lr_at(step: int, cfg: TrainConfig) -> float:
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    progress = min(1.0, (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup))
    return cfg.min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (cfg.lr - cfg.min_lr)


def make_optimizer(model: nn.Module, cfg: TrainConfig, device: str = "cpu") -> torch.optim.AdamW:
    # decay the matrices and embeddings only; biases and LayerNorm gains stay free (as nanoGPT does)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": rest, "weight_decay": 0.0}]
    # on a GPU one fused kernel updates every parameter; the CPU keeps the default (and its figures)
    fused = True if device.startswith("cuda") else None
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.99), fused=fused)


def get_batch(
    data: torch.Tensor, cfg: TrainConfig, generator: torch.Generator, device: str
) -> tuple[torch.Tensor, torch.Tensor]:
    starts = torch.randint(len(data) - cfg.block_size, (cfg.batch_size,), generator=generator)
    rows = torch.stack([data[i : i + cfg.block_size + 1] for i in starts.tolist()])
    if device.startswith("cuda"):  # copy from pinned memory while the GPU is still busy with the last step
        rows = rows.pin_memory().to(device, non_blocking=True)
    else:
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
    compiled: Callable[..., torch.Tensor] | None = field(default=None, repr=False)  # see step_model

    def step_model(self) -> Callable[..., torch.Tensor]:
        """What training steps call: the model, or its torch.compile wrapper, made once per run so that another
        `train` call on the run reuses it. Evaluations, checkpoints and samples use the model itself: its
        state_dict keeps the reference's names, and evaluation's other batch shape costs no recompilation."""
        if not self.cfg.compile:
            return self.model
        if self.compiled is None:
            self.compiled = torch.compile(self.model)
        return self.compiled

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

    def best_state(self) -> dict:
        """What best.pt holds: the weights now (the best so far, when it is written) and what sampling needs."""
        step, val = self.history.best() or (self.step, float("nan"))
        return {
            "model": self.model.state_dict(),
            "model_config": self.cfg.model_config(self.data.tokenizer.vocab_size).to_dict(),
            "train_config": asdict(self.cfg),
            "chars": self.data.tokenizer.chars,
            "step": step,
            "val": val,
        }


def start(cfg: TrainConfig, device: str, data_dir: str | Path | None = None) -> Run:
    if cfg.bf16 is None:  # decided once, here: the checkpoint keeps the choice for a resume
        cfg = replace(cfg, bf16=choose(device).bf16)
    if cfg.compile is None:
        cfg = replace(cfg, compile=choose_compile(device).on)
    if cfg.fused_attention is None:
        cfg = replace(cfg, fused_attention=choose_fused_attention(device))
    data = load_dataset(cfg.corpus, data_dir)
    torch.manual_seed(cfg.seed)
    model = build_training_model(cfg.model_config(data.tokenizer.vocab_size), cfg.dropout, bool(cfg.fused_attention))
    model.to(device)
    generator = torch.Generator().manual_seed(cfg.seed)
    return Run(cfg, data, model, make_optimizer(model, cfg, device), generator)


def resume(
    path: Path,
    device: str,
    data_dir: str | Path | None = None,
    steps: int | None = None,
    patience: int | None = None,
) -> Run:
    """Rebuild a run from its checkpoint; ``steps`` may extend it (the cosine schedule stretches to the new end),
    and ``patience`` replace the one it ran with (a run that stopped early stops again at its next evaluation
    without a new best, unless given more patience, or 0)."""
    state = checkpoint.load(path)
    known = {f.name for f in fields(TrainConfig)}
    cfg = TrainConfig(**{k: v for k, v in state["train_config"].items() if k in known})
    if steps is not None:
        cfg = replace(cfg, steps=steps)
    if patience is not None:
        cfg = replace(cfg, patience=patience)
    data = load_dataset(cfg.corpus, data_dir, chars=state["chars"])
    fused = choose_fused_attention(device) if cfg.fused_attention is None else cfg.fused_attention
    model = build_training_model(ModelConfig(**state["model_config"]), cfg.dropout, fused)
    model.load_state_dict(state["model"])
    model.to(device)
    optimizer = make_optimizer(model, cfg, device)
    optimizer.load_state_dict(state["optimizer"])
    generator = torch.Generator()
    generator.set_state(state["generator"])
    history = History(**state["history"])
    history.val = [(int(step), float(loss)) for step, loss in history.val]
    history.stopped_early = 0  # resumed: it runs again, until patience runs out anew
    return Run(cfg, data, model, optimizer, generator, state["step"], history)


def loss_read_interval(device: str) -> int:
    """Steps between reads of their losses. Reading a loss waits for the device to finish the step; a GPU reads
    them in bunches, so that it always has the next steps queued. The CPU has nothing to wait for."""
    return 1 if device == "cpu" else 25


def take_step(run: Run, step_model: Callable[[torch.Tensor], torch.Tensor], device: str) -> torch.Tensor:
    """One optimiser step at the schedule's learning rate; returns the step's loss, still on the device."""
    cfg, opt = run.cfg, run.optimizer
    for group in opt.param_groups:
        group["lr"] = lr_at(run.step, cfg)
    x, y = get_batch(run.data.train, cfg, run.generator, device)
    with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=bool(cfg.bf16)):
        loss = reference("m3_train").clm_loss(step_model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(run.model.parameters(), cfg.grad_clip)
    opt.step()
    run.step += 1
    return loss.detach()


def record_evaluation(run: Run, val: float, out_dir: Path | None, log: Callable[[str], None]) -> int:
    """Add a validation loss to the history, log it, write the checkpoints; return the evaluations since the best
    (0: this one is the new best, and best.pt now holds it)."""
    run.history.val.append((run.step, val))
    run.history.val_seconds.append(run.history.seconds)
    since = run.history.evaluations_since_best()
    log(
        f"step {run.step:>6}  train {run.history.train[-1]:.4f}  val {val:.4f}  {run.history.seconds:7.1f} s"
        + ("  best" if since == 0 else "")
    )
    if out_dir is not None:
        if since == 0:
            checkpoint.save(run.best_state(), out_dir / "best.pt")
        checkpoint.save(run.state(), out_dir / "ckpt.pt")
    return since


def stops(run: Run, val: float, since: int, target_loss: float | None, log: Callable[[str], None]) -> bool:
    """After an evaluation: whether the target is reached or patience has run out (which the history records)."""
    if target_loss is not None and val <= target_loss:
        return True
    if run.cfg.patience and since >= run.cfg.patience and run.step < run.cfg.steps:  # not early at the end
        run.history.stopped_early = run.step  # the checkpoint written as training ends records it
        log(f"no new best in {since} evaluations: stopping early (--patience {run.cfg.patience})")
        return True
    return False


def drop_stale_best(run: Run, out_dir: Path | None) -> None:
    """A run not yet evaluated in a used folder: an older run's best.pt would stand for this run's until its
    first evaluation, and a sampler would load it."""
    if out_dir is not None and not run.history.val:
        (out_dir / "best.pt").unlink(missing_ok=True)


def train(
    run: Run,
    device: str,
    out_dir: Path | None = None,
    stop_after: int | None = None,
    target_loss: float | None = None,
    progress: bool = True,
) -> Run:
    """Train from run.step to cfg.steps (or to stop_after, until validation loss <= target_loss, or until
    cfg.patience evaluations in a row bring no new lowest validation loss).

    Checkpoints go to out_dir/ckpt.pt at every evaluation and at the end, and on Ctrl-C; out_dir/best.pt is
    rewritten at every new lowest validation loss.
    """
    from stretch.progress import TrainProgress  # rich is only needed when training

    cfg, model = run.cfg, run.model
    step_model = run.step_model()
    drop_stale_best(run, out_dir)
    end = cfg.steps if stop_after is None else min(cfg.steps, stop_after)
    tokens_per_step = cfg.batch_size * cfg.block_size
    read_every = loss_read_interval(device)
    pending: list[torch.Tensor] = []
    bar = TrainProgress(total=cfg.steps, done=run.step, enabled=progress)
    clock = time.perf_counter()

    def read_losses() -> None:
        nonlocal clock
        if not pending:
            return
        run.history.train.extend(torch.stack(pending).tolist())  # one wait for the whole bunch
        pending.clear()
        now = time.perf_counter()
        run.history.seconds += now - clock
        clock = now
        bar.update(run.step, run.history.train[-1], tokens_per_step * run.step / run.history.seconds)

    try:
        with bar:
            while run.step < end:
                pending.append(take_step(run, step_model, device))
                evaluating = run.step % cfg.eval_interval == 0 or run.step == cfg.steps
                if len(pending) >= read_every or evaluating or run.step == end:
                    read_losses()
                if evaluating:
                    val = evaluate(model, run.data.val, cfg, device)
                    run.history.seconds += time.perf_counter() - clock  # evaluation is part of training time
                    clock = time.perf_counter()
                    since = record_evaluation(run, val, out_dir, bar.log)
                    if stops(run, val, since, target_loss, bar.log):
                        break
    except KeyboardInterrupt:
        read_losses()  # the steps taken keep their losses, so the checkpoint's history matches its step
        if out_dir is not None:
            checkpoint.save(run.state(), out_dir / "ckpt.pt")
        raise
    if out_dir is not None:
        checkpoint.save(run.state(), out_dir / "ckpt.pt")
    return run

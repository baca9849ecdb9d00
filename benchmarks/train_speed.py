"""Time to validation loss <= 1.88 on tiny Shakespeare characters, on the CPU: the `fast` preset next to
nanoGPT's CPU recipe (4 layers, 4 heads, 128 wide, block 64, batch 12, lr 1e-3, 2000 iterations, no dropout).

Both train the reference TinyGPT in this process, one after the other, with the same evaluation (a fixed,
evenly spaced 16,384 characters of the validation split). The wall time runs from reading the text and
building the model to the first evaluation at or below the target, evaluations included; it leaves out
`import torch` (about 2 s). The baseline always runs its full 2000 iterations. Run from the repository root:

    python benchmarks/train_speed.py [--threads 2] [--skip-baseline] [--plot curve.png]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from stretch.model import reference  # noqa: E402
from stretch.precision import choose, cpu_capability, native_bf16_cpu  # noqa: E402
from stretch.train import make_optimizer, preset, start, train  # noqa: E402

TARGET = 1.88
DATA_DIR: str | None = None


def measure(name: str, data_dir: str | None, target: float | None, bf16: bool | None = None) -> dict:
    # bf16 None: the precision this CPU does natively; no early stop, so the baseline runs all its iterations
    cfg = preset(name, bf16=bf16, patience=0)
    started = time.perf_counter()
    run = start(cfg, "cpu", data_dir)
    run = train(run, "cpu", target_loss=target, progress=False)
    wall = time.perf_counter() - started
    hit = next(((s, v, t) for (s, v), t in zip(run.history.val, run.history.val_seconds) if v <= TARGET), None)
    return {
        "name": name,
        "cfg": run.cfg,  # with the precision decided
        "wall": wall,
        "steps": run.step,
        "val": run.history.val,
        "seconds": run.history.val_seconds,
        "hit": hit,
        "tokens_per_s": run.step * cfg.batch_size * cfg.block_size / run.history.seconds,
    }


def describe(cfg) -> str:
    return (
        f"{cfg.n_layers} layers, d={cfg.d}, {cfg.n_heads} heads, block {cfg.block_size}, batch {cfg.batch_size}, "
        f"lr {cfg.lr:g} -> {cfg.min_lr:g} (warmup {cfg.warmup}, cosine to step {cfg.steps}), AdamW wd "
        f"{cfg.weight_decay}, clip {cfg.grad_clip}, {'bf16 autocast' if cfg.bf16 else 'float32'}"
    )


def step_ratio(steps: int = 20, rounds: int = 3) -> list[float]:
    """bf16-autocast over float32 time per training step of the fast preset's model, measured side by side
    (interleaved rounds, the same batches): below 1, bf16 pays on this machine."""
    cfg = preset("fast", bf16=False)
    run = start(cfg, "cpu", DATA_DIR)
    loss_of = reference("m3_train").clm_loss
    optimizer = make_optimizer(run.model, cfg)
    x = torch.randint(0, run.data.tokenizer.vocab_size, (cfg.batch_size, cfg.block_size + 1))

    def seconds(bf16: bool) -> float:
        started = time.perf_counter()
        for _ in range(steps):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                loss = loss_of(run.model(x[:, :-1]), x[:, 1:])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        return time.perf_counter() - started

    seconds(True), seconds(False)  # warm both paths up
    return [seconds(True) / seconds(False) for _ in range(rounds)]


def plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for r in results:
        ax.plot(r["seconds"], [v for _, v in r["val"]], "o-", label=r["name"])
    ax.axhline(TARGET, color="gray", linestyle="--", label=f"target {TARGET}")
    ax.set(
        xlabel="training wall time (s)",
        ylabel="validation loss",
        ylim=(1.6, 3.0),
        title=f"tiny Shakespeare, characters, CPU ({cpu_capability()}, "
        f"{'bf16 autocast' if results[0]['cfg'].bf16 else 'float32'})",
    )
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="torch CPU threads")
    parser.add_argument(
        "--data-dir",
        default=str(ROOT.parent / "shared" / "datasets"),
        help="folder holding tinyshakespeare.txt (default ../shared/datasets)",
    )
    parser.add_argument("--skip-baseline", action="store_true", help="time the fast preset only")
    parser.add_argument(
        "--precision",
        choices=("auto", "bf16", "float32"),
        default="auto",
        help="both recipes' precision: auto (what this CPU does natively), or forced; float32 is what a CPU "
        "without native bf16 (AVX2 only, say) gets from auto",
    )
    parser.add_argument("--plot", type=Path, help="save validation loss against wall time as a PNG here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    global DATA_DIR
    DATA_DIR = args.data_dir
    print(
        f"torch {torch.__version__}, {args.threads} threads, {os.cpu_count()} CPUs, CPU capability "
        f"{cpu_capability()}, native bf16: {native_bf16_cpu() or 'none'}; load average "
        f"{os.getloadavg()[0]:.1f} at start",
        flush=True,
    )
    ratios = step_ratio()
    print(
        f"bf16/float32 time per step, side by side: {', '.join(f'{r:.2f}' for r in ratios)} "
        f"(median {sorted(ratios)[1]:.2f}); the default here: {choose('cpu')}",
        flush=True,
    )
    runs = [("fast", TARGET)] + ([] if args.skip_baseline else [("nanogpt-cpu", None)])
    results = []
    for name, target in runs:
        forced = None if args.precision == "auto" else args.precision == "bf16"  # both recipes alike
        r = measure(name, args.data_dir, target, forced)
        results.append(r)
        hit = (
            f"val {r['hit'][1]:.4f} <= {TARGET} at step {r['hit'][0]} after {r['hit'][2]:.1f} s"
            if r["hit"]
            else f"never reached {TARGET} (last val {r['val'][-1][1]:.4f})"
        )
        print(
            f"\n{name}: {describe(r['cfg'])}\n  {hit}; ran {r['steps']} steps in {r['wall']:.1f} s wall, "
            f"{r['tokens_per_s']:,.0f} tokens/s",
            flush=True,
        )
        print(
            "  curve (step: val loss @ s): "
            + ", ".join(f"{s}: {v:.3f} @ {t:.0f}" for (s, v), t in zip(r["val"], r["seconds"])),
            flush=True,
        )
    if len(results) == 2 and all(r["hit"] for r in results):
        fast, base = (r["hit"][2] for r in results)
        print(
            f"\ntime to val loss {TARGET}: fast {fast:.1f} s, nanoGPT's CPU recipe {base:.1f} s: "
            f"{fast / base:.2f}x ({'bf16 autocast' if results[0]['cfg'].bf16 else 'float32'}, CPU capability "
            f"{cpu_capability()}, native bf16: {native_bf16_cpu() or 'none'})"
        )
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    if args.plot:
        plot(results, args.plot)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()

"""What a finished training run leaves behind: the loss curve (PNG) and a few samples (text)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from stretch import checkpoint
from stretch.sample import Sampler, generate, load_sampler

if TYPE_CHECKING:
    from stretch.train import Run

SAMPLE_PROMPTS = {"shakespeare": ["ROMEO:\n", "\n", "First Citizen:\n"], "python": ["def ", "class ", "import "]}


def plot_losses(train: list[float], val: list[tuple[int, float]], path: Path, title: str = "") -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display needed
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    window = max(1, len(train) // 100)  # a running mean, so the curve's trend shows through batch noise
    smooth = [
        sum(train[max(0, i - window + 1) : i + 1]) / len(train[max(0, i - window + 1) : i + 1])
        for i in range(len(train))
    ]
    ax.plot(range(1, len(train) + 1), smooth, label="train (running mean)", color="tab:blue")
    if val:
        ax.plot(*zip(*val), "o-", label="validation", color="tab:orange")
    ax.set(xlabel="step", ylabel="cross-entropy (nats per character)", title=title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write(run: Run, out_dir: Path, device: str, max_new: int = 400, temperature: float = 0.8) -> None:
    """loss.png and samples.txt in out_dir for a finished run."""
    out_dir.mkdir(parents=True, exist_ok=True)
    c = run.cfg
    title = f"{c.corpus}: {c.n_layers} layers, d={c.d}, {c.n_heads} heads, context {c.block_size}"
    plot_losses(run.history.train, run.history.val, out_dir / "loss.png", title)
    # sample from the weights kept as the best, which is what `gptkit sample OUT_DIR` loads too
    best = out_dir / "best.pt"
    if best.is_file():
        sampler, step = load_sampler(best, device), checkpoint.load(best)["step"]
    else:
        sampler, step = Sampler(run.model.eval(), run.data.tokenizer, device), run.step
    lines = [f"# {title}; step {step}; temperature {temperature}; seed 0\n"]
    for prompt in SAMPLE_PROMPTS.get(c.corpus, ["\n"]):
        lines.append(f"--- prompt {prompt!r} ---\n{generate(sampler, prompt, max_new, 0, temperature)}\n")
    (out_dir / "samples.txt").write_text("\n".join(lines))
    run.model.train()

"""``gptkit``: train the stretch model, sample from it, and measure in-context learning."""

from __future__ import annotations

from pathlib import Path

import click

from stretch.data import CORPORA, ENV_VAR, DataError

DEVICES = click.Choice(["auto", "cpu", "cuda"])


def fail(err: Exception) -> click.ClickException:
    return click.ClickException(str(err))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Train the lesson's stretch GPT (the reference TinyGPT) on real text, sample from it, and measure
    in-context learning."""


@main.command()
@click.option(
    "--preset",
    type=click.Choice(["stretch", "gpu", "fast", "nanogpt-cpu", "tiny"]),
    help="stretch: 6 layers, d=256, 8 heads, 256-character context, batch 16. gpu: the same model at batch 64 "
    "with dropout 0.2. fast: the quickest to val loss 1.88 on a CPU. nanogpt-cpu: nanoGPT's CPU recipe. tiny: a "
    "seconds-long smoke test. Default: gpu when training on CUDA, else stretch. The options below override it.",
)
@click.option(
    "--corpus",
    type=click.Choice(CORPORA),
    default="shakespeare",
    show_default=True,
    help="tiny Shakespeare, or Python's own standard library (datasets/README.md says which files).",
)
@click.option("--steps", type=click.IntRange(min=1), help="Optimiser steps in all (the cosine schedule ends here).")
@click.option("--batch-size", type=click.IntRange(min=1), help="Sequences per step.")
@click.option("--block-size", type=click.IntRange(min=2), help="Context length in characters.")
@click.option("--lr", type=click.FloatRange(min=0, min_open=True), help="Peak learning rate (after warmup).")
@click.option("--eval-interval", type=click.IntRange(min=1), help="Steps between validation losses and checkpoints.")
@click.option("--seed", type=int, help="Seed for the weights and the batches (runs are deterministic on the CPU).")
@click.option("--device", type=DEVICES, default="auto", show_default=True, help="auto picks CUDA when present.")
@click.option(
    "--out-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("out"),
    show_default=True,
    help="Where ckpt.pt, loss.png and samples.txt go.",
)
@click.option("--resume", is_flag=True, help="Continue the run checkpointed in --out-dir (its settings, more --steps).")
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help=f"A folder already holding tinyshakespeare.txt (else ${ENV_VAR}, else download to the cache).",
)
@click.option("--target-loss", type=float, help="Stop at the first validation loss at or below this.")
@click.option(
    "--patience",
    type=click.IntRange(min=0),
    help="Stop after this many evaluations in a row without a new lowest validation loss (default 5; 0: never). "
    "With --resume, replaces the run's own.",
)
@click.option(
    "--dropout",
    type=click.FloatRange(min=0, max=1, max_open=True),
    help="Dropout in training (embeddings, attention, residual branches); default 0, or 0.2 with --preset gpu.",
)
@click.option(
    "--compile/--no-compile",
    "compile_",
    default=None,
    help="torch.compile the training model (default: on a CUDA GPU only; on a CPU it did not pay).",
)
@click.option(
    "--bf16/--no-bf16",
    default=None,
    help="bfloat16 autocast in training steps (default: on where the hardware does bf16 natively: AMX or "
    "AVX512-BF16 CPUs, about 2.5x faster with AMX; elsewhere it is emulated, slower). Evaluations stay float32.",
)
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    help="CPU threads for PyTorch (default: its own choice; 1 is faster for small models and on a busy machine).",
)
@click.option("--quiet", is_flag=True, help="No progress bar or log lines.")
def train(
    preset,
    corpus,
    steps,
    batch_size,
    block_size,
    lr,
    eval_interval,
    seed,
    device,
    out_dir,
    resume,
    data_dir,
    target_loss,
    patience,
    dropout,
    compile_,
    bf16,
    threads,
    quiet,
) -> None:
    """Train a TinyGPT on characters, with a live progress bar, validation losses and atomic checkpoints.

    Ends with OUT_DIR/loss.png (the loss curve) and OUT_DIR/samples.txt.
    """
    import torch

    from stretch import checkpoint, report
    from stretch import train as training
    from stretch.precision import choose, choose_compile

    if threads:
        torch.set_num_threads(threads)
    try:
        dev = training.pick_device(device)
        if resume:
            run = training.resume(out_dir / "ckpt.pt", dev, data_dir, steps, patience)
        else:
            preset = preset or training.default_preset(dev)
            cfg = training.preset(
                preset,
                corpus=corpus,
                steps=steps,
                batch_size=batch_size,
                block_size=block_size,
                lr=lr,
                eval_interval=eval_interval,
                seed=seed,
                bf16=bf16,
                patience=patience,
                dropout=dropout,
                compile=compile_,
            )
            run = training.start(cfg, dev, data_dir)
        if not quiet:
            click.echo(
                f"{run.cfg.corpus}: {len(run.data.train):,} train / {len(run.data.val):,} val characters, "
                f"vocabulary {run.data.tokenizer.vocab_size}; step {run.step} of {run.cfg.steps} on {dev}, "
                + (
                    f"{'bf16 autocast' if run.cfg.bf16 else 'float32'}, "
                    f"{'torch.compile' if run.cfg.compile else 'eager'} (as the run began)"
                    if resume
                    else f"preset {preset}, {choose(dev, bf16)}, {choose_compile(dev, compile_)}"
                )
                + f", dropout {run.cfg.dropout:g}, patience {run.cfg.patience or 'off'}",
                err=True,
            )
        run = training.train(run, dev, out_dir, target_loss=target_loss, progress=not quiet)
    except (DataError, checkpoint.CheckpointError, RuntimeError) as err:
        raise fail(err) from None
    except KeyboardInterrupt:
        raise click.ClickException(
            f"interrupted; checkpoint saved, continue with --resume --out-dir {out_dir}"
        ) from None
    report.write(run, out_dir, dev)
    if not quiet:
        val = f"{run.history.val[-1][1]:.4f}" if run.history.val else "n/a"
        best = run.history.best()
        stopped = (
            f" (stopped early: no new best in {run.cfg.patience} evaluations)" if run.history.stopped_early else ""
        )
        click.echo(
            f"done: step {run.step}{stopped}, val loss {val}, {run.history.seconds:.1f} s"
            + (f"; best val loss {best[1]:.4f} at step {best[0]}, kept in {out_dir / 'best.pt'}" if best else "")
            + f"; wrote {out_dir / 'ckpt.pt'}, {out_dir / 'loss.png'}, {out_dir / 'samples.txt'}",
            err=True,
        )


@main.command()
@click.argument("checkpoint_path", metavar="CHECKPOINT", type=click.Path(path_type=Path))
@click.option("--prompt", default="", help="Text to continue (default: a newline).")
@click.option("--max-new", type=click.IntRange(min=0), default=200, show_default=True, help="Characters to generate.")
@click.option(
    "--temperature",
    type=click.FloatRange(min=0),
    default=0.8,
    show_default=True,
    help="Divide the logits by this; 0 is greedy.",
)
@click.option("--top-k", type=click.IntRange(min=1), help="Keep only the k likeliest characters.")
@click.option(
    "--top-p",
    type=click.FloatRange(min=0, max=1, min_open=True),
    help="Keep the smallest set of characters whose probabilities reach p (nucleus sampling).",
)
@click.option("--greedy", is_flag=True, help="Always take the likeliest character (same as --temperature 0).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the sampling generator.")
@click.option(
    "--explain",
    is_flag=True,
    help="Print every step: the context window fed, the top-5 next-character probabilities and the character chosen.",
)
@click.option("--device", type=DEVICES, default="cpu", show_default=True, help="Where to run the model.")
def sample(checkpoint_path, prompt, max_new, temperature, top_k, top_p, greedy, seed, explain, device) -> None:
    """Continue --prompt with a model from CHECKPOINT (a .pt file, or a run's folder: its best.pt, the weights at
    the lowest validation loss, else its ckpt.pt)."""
    from stretch import checkpoint
    from stretch import sample as sampling
    from stretch.train import pick_device

    temperature = 0.0 if greedy else temperature
    try:
        sampler = sampling.load_sampler(checkpoint_path, pick_device(device))
        sampling.check_prompt(sampler, prompt)
        if explain:
            steps = sampling.explain(sampler, prompt, max_new, seed, temperature, top_k, top_p)
            text = prompt + sampling.print_explained(steps, click.echo)
            click.echo("\n--- generated ---")
            click.echo(text)
        else:
            click.echo(sampling.generate(sampler, prompt, max_new, seed, temperature, top_k, top_p))
    except (DataError, checkpoint.CheckpointError, RuntimeError) as err:
        raise fail(err) from None


@main.command()
@click.option("--steps", type=click.IntRange(min=1), default=1500, show_default=True, help="Training steps.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for the weights and the sequences.")
@click.option(
    "--n",
    "n_prompts",
    type=click.IntRange(min=1),
    default=2000,
    show_default=True,
    help="Evaluation prompts per number of shots.",
)
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("incontext.png"),
    show_default=True,
    help="Where to save the accuracy bar chart.",
)
def incontext(steps, seed, n_prompts, plot_path) -> None:
    """Train a TinyGPT on fresh random key>value mappings, then measure query accuracy with 0-3 examples of the
    queried pair in the prompt (no gradient update)."""
    from stretch import incontext as icl

    cfg = icl.TaskConfig(steps=steps, seed=seed)
    table = icl.measure(cfg, n_prompts, log=lambda line: click.echo(line, err=True))
    click.echo(f"\n{'shots':>5}  {'accuracy':>8}   (chance {icl.CHANCE:.0%}, {n_prompts} prompts each)")
    for shots, acc in table.items():
        click.echo(f"{shots:>5}  {acc:>8.1%}")
    icl.plot(table, plot_path)
    click.echo(f"wrote {plot_path}")

"""Sampling from a checkpoint: reproducible with a seed, and --explain shows exactly the steps taken."""

import pytest
import torch
from click.testing import CliRunner

from stretch import checkpoint
from stretch.cli import main
from stretch.data import CharTokenizer
from stretch.model import ModelConfig, build_model
from stretch.sample import Sampler, explain, generate, load_sampler

CHARS = "\n !',.:;?abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    """A small untrained model saved as a checkpoint: sampling's plumbing needs no trained weights."""
    torch.manual_seed(0)
    config = ModelConfig(len(CHARS), n_layers=1, d=32, n_heads=2, block_size=16)
    path = tmp_path_factory.mktemp("ckpt") / "ckpt.pt"
    checkpoint.save(
        {
            "model": build_model(config).state_dict(),
            "model_config": config.to_dict(),
            "chars": CharTokenizer(CHARS).chars,
        },
        path,
    )
    return path


@pytest.fixture(scope="module")
def sampler(ckpt) -> Sampler:
    return load_sampler(ckpt)


@pytest.mark.parametrize("options", [dict(temperature=1.0), dict(temperature=0.7, top_k=5), dict(top_p=0.9)])
def test_same_seed_same_text(sampler, options):
    a, b = (generate(sampler, "To be", 40, seed=3, **options) for _ in range(2))
    assert a == b, "with the same seed, sampling must repeat itself"
    assert a.startswith("To be") and len(a) == len("To be") + 40
    assert generate(sampler, "To be", 40, seed=4, **options) != a, "another seed should give another text"


@pytest.mark.parametrize("temperature, top_k", [(1.0, None), (0.8, 3), (0.0, None)])
def test_explain_takes_the_same_steps_as_generate(sampler, temperature, top_k):
    steps = list(explain(sampler, "a long prompt, longer than sixteen", 20, 5, temperature, top_k))
    text = generate(sampler, "a long prompt, longer than sixteen", 20, 5, temperature, top_k)
    assert "".join(s.chosen for s in steps) == text[-20:], "--explain must show the very tokens sampling picks"
    assert all(len(s.window) <= 16 for s in steps), "the window fed is at most the model's context"
    assert steps[-1].window == text[-21:-1][-16:], "the last window is the 16 characters before the last token"
    for s in steps:
        probs = [p for _, p in s.top]
        assert len(s.top) == 5 and probs == sorted(probs, reverse=True) and sum(probs) <= 1 + 1e-6
    if top_k == 3:
        assert all(s.top[3][1] == 0 for s in steps), "top-k 3 leaves no probability on the 4th choice"


def test_cli_explain_prints_every_step(ckpt):
    result = CliRunner().invoke(main, ["sample", str(ckpt), "--prompt", "Hi", "--max-new", "4", "--explain"])
    assert result.exit_code == 0, result.output
    assert result.output.count("context [") == 4 and result.output.count("top-5") == 4
    assert result.output.count("chose") == 4
    assert "step   1  context [  2 chars] 'Hi'" in result.output, result.output


def test_cli_sample_is_seeded(ckpt):
    args = ["sample", str(ckpt), "--prompt", "Hi", "--max-new", "30", "--seed", "1", "--top-p", "0.9"]
    first, second = (CliRunner().invoke(main, args) for _ in range(2))
    assert first.exit_code == 0 and first.output == second.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["missing.pt"], "no checkpoint at"),
        (["CKPT", "--prompt", "{}"], "not in the vocabulary"),
        (["CKPT", "--top-k", "0"], "Invalid value for '--top-k'"),
    ],
)
def test_cli_bad_input_is_a_message_not_a_traceback(ckpt, tmp_path, args, message):
    args = [str(ckpt) if a == "CKPT" else str(tmp_path / a) if a.endswith(".pt") else a for a in args]
    result = CliRunner().invoke(main, ["sample", *args])
    assert result.exit_code != 0 and message in result.output, result.output
    assert "Traceback" not in result.output


def test_a_foreign_file_is_not_a_checkpoint(tmp_path):
    (tmp_path / "ckpt.pt").write_text("not a checkpoint")
    with pytest.raises(checkpoint.CheckpointError, match="not a readable gptkit checkpoint"):
        checkpoint.load(tmp_path)

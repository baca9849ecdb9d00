"""A short training run lowers the loss, checkpoints, and resumes to exactly the uninterrupted result."""

from dataclasses import replace

import pytest
import torch
from click.testing import CliRunner

from helpers import SHARED_DATA as SHARED
from helpers import needs_shakespeare
from stretch import checkpoint
from stretch.cli import main
from stretch.train import evaluate, lr_at, preset, resume, start, train

pytestmark = [needs_shakespeare, pytest.mark.usefixtures("one_torch_thread")]


@pytest.fixture
def cfg():
    return preset("tiny", steps=30)


@pytest.mark.parametrize("bf16", [False, True])
def test_loss_falls(cfg, bf16):
    cfg = replace(cfg, bf16=bf16)
    run = start(cfg, "cpu", SHARED)
    first = evaluate(run.model, run.data.val, cfg, "cpu")
    last = train(run, "cpu", progress=False).history.val[-1][1]
    assert last < first - 0.5, f"30 steps should cut the validation loss well below: {first:.3f} -> {last:.3f}"
    assert len(run.history.train) == 30


def test_resume_matches_an_uninterrupted_run(cfg, tmp_path):
    straight = train(start(cfg, "cpu", SHARED), "cpu", tmp_path / "a", progress=False)
    train(start(cfg, "cpu", SHARED), "cpu", tmp_path / "b", stop_after=13, progress=False)  # "interrupted"
    resumed = train(resume(tmp_path / "b" / "ckpt.pt", "cpu", SHARED), "cpu", tmp_path / "b", progress=False)
    assert resumed.history.train == straight.history.train, (
        "a resumed run must draw the same batches and take the same steps (the generator state is checkpointed)"
    )
    for name, tensor in straight.model.state_dict().items():
        assert torch.equal(tensor, resumed.model.state_dict()[name]), f"{name} differs after resuming"


def test_same_seed_same_run_other_seed_other_run(cfg):
    a, b = (train(start(cfg, "cpu", SHARED), "cpu", progress=False) for _ in range(2))
    c = train(start(preset("tiny", steps=30, seed=7), "cpu", SHARED), "cpu", progress=False)
    assert a.history.train == b.history.train, "training on the CPU must be deterministic for a given seed"
    assert a.history.train != c.history.train


def test_checkpoint_is_weights_only_loadable(cfg, tmp_path):
    train(start(cfg, "cpu", SHARED), "cpu", tmp_path, stop_after=10, progress=False)
    state = torch.load(tmp_path / "ckpt.pt", weights_only=True)
    assert state["step"] == 10 and state["model_config"]["n_layers"] == 1
    assert not list(tmp_path.glob("*.tmp")), "the atomic write leaves no temp file behind"


def test_schedule_warms_up_then_decays_to_min_lr():
    c = preset("fast")
    assert lr_at(0, c) < lr_at(c.warmup - 1, c) == pytest.approx(c.lr)
    assert lr_at(c.steps, c) == pytest.approx(c.min_lr)


def test_cli_trains_writes_artifacts_and_resumes(tmp_path):
    runner = CliRunner()
    base = ["train", "--preset", "tiny", "--data-dir", str(SHARED), "--out-dir", str(tmp_path), "--quiet"]
    result = runner.invoke(main, [*base, "--steps", "10"])
    assert result.exit_code == 0, result.output
    for name in ("ckpt.pt", "best.pt", "loss.png", "samples.txt"):
        assert (tmp_path / name).stat().st_size > 0, f"training should leave {name} in --out-dir"
    result = runner.invoke(main, [*base, "--resume", "--steps", "20"])
    assert result.exit_code == 0, result.output
    assert checkpoint.load(tmp_path / "ckpt.pt")["step"] == 20, "--resume --steps 20 continues the run to step 20"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--resume"], "no checkpoint at"),
        (["--data-dir", "/nonexistent"], "not found"),
    ],
)
def test_cli_bad_input_is_a_message_not_a_traceback(tmp_path, args, message):
    result = CliRunner().invoke(main, ["train", "--preset", "tiny", "--out-dir", str(tmp_path), *args])
    assert result.exit_code == 1 and message in result.output, result.output
    assert "Traceback" not in result.output

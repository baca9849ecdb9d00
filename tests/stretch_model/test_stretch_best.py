"""The best checkpoint by validation loss, early stopping, and the GPU path's loss bookkeeping, on the CPU.

Most tests here script the validation losses (a stand-in for `evaluate`) so that the best step and the stop
are known in advance; one CLI test trains for real and checks best.pt against the run's own history.
"""

import pytest
import torch
from click.testing import CliRunner

from helpers import SHARED_DATA as SHARED
from helpers import needs_shakespeare
from stretch import checkpoint
from stretch import train as training
from stretch.cli import main
from stretch.model import build_model
from stretch.sample import load_sampler

pytestmark = [needs_shakespeare, pytest.mark.usefixtures("one_torch_thread")]


@pytest.fixture
def scripted(monkeypatch):
    """Replace evaluate with a list of validation losses, one per evaluation; keeps the weights at each one."""
    seen: dict = {"weights": []}

    def install(losses):
        queue = list(losses)

        def evaluate(model, data, cfg, device):
            seen["weights"].append({k: v.clone() for k, v in model.state_dict().items()})
            return queue.pop(0)

        monkeypatch.setattr(training, "evaluate", evaluate)
        return seen

    return install


def tiny(**overrides):
    return training.preset("tiny", **{"steps": 80, "eval_interval": 10, **overrides})


def same_weights(a: dict, b: dict) -> bool:
    return all(torch.equal(a[k], b[k]) for k in a)


def test_best_checkpoint_holds_the_lowest_validation_loss(scripted, tmp_path):
    seen = scripted([3.0, 2.5, 2.0, 2.2, 2.4, 2.6, 2.8, 3.0])  # best at the third evaluation, step 30
    run = training.train(training.start(tiny(patience=0), "cpu", SHARED), "cpu", tmp_path, progress=False)
    assert run.step == 80 and run.history.best() == (30, 2.0) and not run.history.stopped_early
    best, last = checkpoint.load(tmp_path / "best.pt"), checkpoint.load(tmp_path / "ckpt.pt")
    assert (best["step"], best["val"], last["step"]) == (30, 2.0, 80)
    assert same_weights(best["model"], seen["weights"][2]), "best.pt must hold the weights evaluated at step 30"
    assert not same_weights(best["model"], last["model"]), "the last weights are not the best ones here"
    assert checkpoint.load(tmp_path)["step"] == 30, "a run's folder loads its best checkpoint"
    sampler = load_sampler(tmp_path)  # the reference TinyGPT loads the training model's weights as they are
    assert same_weights(sampler.model.state_dict(), seen["weights"][2])


def test_a_new_run_in_a_used_folder_drops_the_old_best(scripted, tmp_path):
    scripted([1.0, 3.0])
    training.train(training.start(tiny(steps=10), "cpu", SHARED), "cpu", tmp_path, progress=False)
    assert checkpoint.load(tmp_path)["val"] == 1.0
    run = training.start(tiny(steps=10), "cpu", SHARED)
    training.train(run, "cpu", tmp_path, stop_after=5, progress=False)  # stopped before its first evaluation
    assert not (tmp_path / "best.pt").exists(), "the old run's best must not pass for this run's"
    assert checkpoint.load(tmp_path)["step"] == 5


def test_patience_stops_after_that_many_evaluations_without_a_new_best(scripted, tmp_path):
    scripted([3.0, 2.5, 2.0, 2.2, 2.4, 2.6, 2.8, 3.0])
    run = training.train(training.start(tiny(patience=3), "cpu", SHARED), "cpu", tmp_path, progress=False)
    assert run.step == 60 and run.history.stopped_early == 60, "3 evaluations after the best at step 30"
    assert checkpoint.load(tmp_path / "ckpt.pt")["history"]["stopped_early"] == 60
    assert len(run.history.train) == 60


def test_a_new_best_restarts_the_count(scripted):
    scripted([3.0, 2.5, 2.6, 2.7, 2.4, 2.5, 2.6, 2.7, 2.8, 2.9])
    run = training.train(training.start(tiny(steps=100, patience=3), "cpu", SHARED), "cpu", progress=False)
    assert run.history.best() == (50, 2.4)
    assert run.step == 80 and run.history.stopped_early == 80, "not at step 40: step 50 was a new best"


@pytest.mark.parametrize("patience, steps", [(None, 70), (0, 80), (5, 80)])
def test_resuming_a_stopped_run_takes_its_patience_or_a_new_one(scripted, tmp_path, patience, steps):
    scripted([3.0, 2.5, 2.0, 2.2, 2.4, 2.6, 2.9, 3.0])
    training.train(training.start(tiny(patience=3), "cpu", SHARED), "cpu", tmp_path, progress=False)
    run = training.resume(tmp_path / "ckpt.pt", "cpu", SHARED, patience=patience)
    run = training.train(run, "cpu", tmp_path, progress=False)
    assert run.step == steps, "its own patience stops it at the next evaluation without a new best"
    assert bool(run.history.stopped_early) == (patience is None)


def test_reading_losses_in_bunches_changes_nothing(monkeypatch):
    """The GPU reads losses every few steps; on the CPU that path must give the same run, loss for loss."""
    every_step = training.train(training.start(tiny(steps=30), "cpu", SHARED), "cpu", progress=False)
    monkeypatch.setattr(training, "loss_read_interval", lambda device: 7)
    bunched = training.train(training.start(tiny(steps=30), "cpu", SHARED), "cpu", progress=False)
    assert bunched.history.train == every_step.history.train and len(bunched.history.train) == 30
    assert bunched.history.val == every_step.history.val
    assert same_weights(bunched.model.state_dict(), every_step.model.state_dict())


def test_compiled_training_checkpoints_the_reference_names(monkeypatch, tmp_path):
    """torch.compile wraps the model; the checkpoint must still hold the plain names the reference loads.
    (The eager backend traces as a GPU run does without needing a C++ compiler, so CI stays quick.)"""
    compile_ = torch.compile
    monkeypatch.setattr(torch, "compile", lambda model: compile_(model, backend="eager"))
    plain = training.train(training.start(tiny(steps=10), "cpu", SHARED), "cpu", progress=False)
    run = training.train(training.start(tiny(steps=10, compile=True), "cpu", SHARED), "cpu", tmp_path, progress=False)
    state = checkpoint.load(tmp_path / "ckpt.pt")
    assert not [k for k in state["model"] if "_orig_mod" in k]
    build_model(training.ModelConfig(**state["model_config"])).load_state_dict(state["model"], strict=True)
    assert run.history.train == pytest.approx(plain.history.train, abs=1e-4), "compiled or not, the same training"


def test_cli_reports_and_keeps_the_best(tmp_path):
    args = ["train", "--preset", "tiny", "--data-dir", str(SHARED), "--out-dir", str(tmp_path), "--steps", "30"]
    result = CliRunner().invoke(main, [*args, "--dropout", "0.1", "--patience", "0"])
    assert result.exit_code == 0, result.output
    history = checkpoint.load(tmp_path / "ckpt.pt")["history"]
    step, val = min(history["val"], key=lambda sv: sv[1])
    assert checkpoint.load(tmp_path / "best.pt")["step"] == step
    assert f"best val loss {val:.4f} at step {step}" in result.output
    assert "dropout 0.1, patience off" in result.output
    assert checkpoint.load(tmp_path / "ckpt.pt")["train_config"]["dropout"] == 0.1


@pytest.mark.parametrize("args", [["--dropout", "1.5"], ["--patience", "-1"]])
def test_cli_refuses_bad_options_with_a_message(tmp_path, args):
    result = CliRunner().invoke(main, ["train", "--preset", "tiny", "--out-dir", str(tmp_path), *args])
    assert result.exit_code == 2 and "Invalid value" in result.output and "Traceback" not in result.output

"""The in-context lookup task: the answer is in the prompt exactly as often as asked, and nowhere else."""

import pytest
import torch
from click.testing import CliRunner

from stretch import incontext as icl
from stretch.cli import main

CFG = icl.TaskConfig()

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def pairs(text: str) -> list[tuple[str, str]]:
    return [(p[0], p[2]) for p in text.split()]


def decode(row: torch.Tensor) -> str:
    return icl.TOKENIZER.decode(row)


@pytest.mark.parametrize("shots", [0, 1, 2, 3])
def test_prompts_show_the_queried_pair_exactly_shots_times(shots):
    prompts, answers, queries = icl.shot_prompts(CFG, shots, 200, torch.Generator().manual_seed(shots))
    assert prompts.shape == (200, icl.PAIR * CFG.prompt_pairs + 2)
    for row, answer, query in zip(prompts, answers.tolist(), queries.tolist()):
        text = decode(row)
        key = icl.KEYS[query]
        assert text.endswith(f" {key}>"), f"a prompt ends by asking for its key: {text!r}"
        shown = pairs(text[:-2])
        assert [k for k, _ in shown].count(key) == shots, f"{key!r} should appear {shots} times in {text!r}"
        assert all(v == icl.VALUES[answer] for k, v in shown if k == key), "every shot shows the right answer"


@pytest.mark.parametrize("make", ["train", "prompt"])
def test_each_sequence_keeps_one_mapping(make):
    generator = torch.Generator().manual_seed(0)
    rows = (
        icl.training_batch(CFG, 100, generator)[0]
        if make == "train"
        else icl.shot_prompts(CFG, 3, 100, generator)[0][:, :-2]
    )
    for row in rows:
        mapping: dict[str, str] = {}
        for key, value in pairs(decode(row)):
            assert mapping.setdefault(key, value) == value, f"{key!r} maps to two values in {decode(row)!r}"


def test_mappings_are_fresh_per_sequence():
    tokens, _ = icl.training_batch(CFG, 200, torch.Generator().manual_seed(0))
    seen = {dict(pairs(decode(row))).get("a") for row in tokens} - {None}
    assert len(seen) == len(icl.VALUES), "across sequences a key must take every value: nothing to memorise"


def test_only_values_of_keys_already_shown_are_scored():
    tokens, targets = icl.training_batch(CFG, 8, torch.Generator().manual_seed(0))
    assert tokens.shape == targets.shape == (8, CFG.block_size)
    for row, target in zip(tokens, targets.tolist()):
        shown, expected = set(), [-100] * CFG.block_size
        for i, (key, value) in enumerate(pairs(decode(row))):
            if key in shown:  # the answer is in the context: score it, right after 'k>'
                expected[icl.PAIR * i + 1] = icl.TOKENIZER.stoi[value]
            shown.add(key)
        assert target == expected, f"targets for {decode(row)!r}"


def test_shots_beyond_the_prompt_are_refused():
    with pytest.raises(ValueError, match="shots"):
        icl.shot_prompts(CFG, CFG.prompt_pairs + 1, 1, torch.Generator())


def test_cli_measures_every_shot_count(tmp_path):
    plot = tmp_path / "icl.png"
    result = CliRunner().invoke(main, ["incontext", "--steps", "3", "--n", "50", "--plot", str(plot)])
    assert result.exit_code == 0, result.output
    assert "chance 10%" in result.output and plot.stat().st_size > 0
    rows = [line.split() for line in result.output.splitlines() if line.strip()[:1].isdigit()]
    assert [r[0] for r in rows] == ["0", "1", "2", "3"], result.output

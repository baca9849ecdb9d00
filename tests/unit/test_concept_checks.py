"""concepts' checks see the work (grader/suites/hidden/test_concepts.py): the worker's position counter records
each call's input shape, and overflow_error is tried on two models that stop with different exceptions, with
messages that never say which exception is right. The dodges themselves are in tests/corpus/concepts.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from grader.sandbox.worker.probes import PositionCounter
from helpers import Variant, grade

M12 = "m12_concepts.py"
ONE_TOO_MANY = "    idx = torch.zeros(1, model.T + 1, dtype=torch.long)"


def test_the_counter_records_each_calls_shape_in_order():
    head = torch.nn.Linear(4, 3)
    counter = PositionCounter()
    head.register_forward_pre_hook(counter)
    for t in (3, 1, 2):
        head(torch.zeros(1, t, 4))
    with torch.no_grad():
        head(torch.zeros(2, 5, 4))
    assert counter.shapes == [[1, 3, 4], [1, 1, 4], [1, 2, 4], [2, 5, 4]]
    assert counter.calls == 4 and counter.positions == 3 + 1 + 2 + 5 and counter.calls_with_grad == 3
    assert all(type(n) is int for shape in counter.shapes for n in shape)  # plain data on the wire


def test_the_counter_keeps_a_bounded_record_and_takes_any_input():
    counter = PositionCounter()
    for _ in range(PositionCounter.KEPT + 5):
        counter(None, (torch.zeros(1, 2, 3),))
    counter(None, ("not a tensor",))
    counter(None, ())
    assert counter.calls == PositionCounter.KEPT + 7 and len(counter.shapes) == PositionCounter.KEPT
    assert counter.positions == 2 * (PositionCounter.KEPT + 5)


# A fixed name that is right for neither model: no message may name what is right (the model's own exception)
FIXED = "    return 'KeyError'  # a guess\n"


@pytest.mark.slow
def test_a_wrong_overflow_name_is_not_told_the_right_one(tmp_path: Path):
    folder = Variant("fixed-overflow-name", edits={M12: [(ONE_TOO_MANY, FIXED + ONE_TOO_MANY)]}).build(
        tmp_path / "submission"
    )
    graded = grade(folder, "-m", "concepts")
    assert graded.returncode == 0, graded.stderr
    told = [c for c in graded.milestone("concepts")["checks"] if "overflow_error" in c["name"] + c["message"]]
    failed = [c["message"] for c in told if not c["passed"]]
    assert len(failed) == 3, told  # each model size
    for message in failed:
        assert "'KeyError'" in message, message
        named = set(re.findall(r"\b[A-Z][A-Za-z]*(?:Error|Exception)\b", message)) - {"KeyError"}
        assert not named, message  # IndexError (TinyGPT's) and ValueError (the other model's) alike

"""The milestones' leak probes (grader/suites/causality.py) under a huge constant added to the logits, through
`grade check`: a softmax ignores the constant, so it must neither hide a lookahead (the probe's tolerance once grew
with the logits' size: 1e-6 of 4e6 let a lookahead of 2 nats through) nor fail an honest model.
lmbudget's own probe: tests/e2e/test_lmbudget_attacks.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import Variant, grade

TYING, MODEL = "m6_tying.py", "m2_model.py"
RETURN = "        return self.head(self.ln(x))"
# The logits shifted by a constant so large that a share of it (1e-6 x 4e6 = 4) covers the 2 nats the next token's
# logit is raised by (float32 still holds them there: its spacing at 4e6 is 0.5).
LOOKAHEAD = """        logits = self.head(self.ln(x)) + 4e6
        ahead = torch.nn.functional.one_hot(idx[:, 1:], logits.shape[-1]).to(logits.dtype)
        return torch.cat([logits[:, :-1] + 2.0 * ahead, logits[:, -1:]], 1)  # the answer for t is idx[:, t + 1]"""
HONEST = "        return self.head(self.ln(x)) + 1e4  # a softmax ignores it"
CAUSAL = "depend only on earlier tokens"  # the tying suite's four causality checks, and m2's


def causality_checks(graded, milestone: str) -> dict[str, dict]:
    checks = {c["name"]: c for c in graded.milestone(milestone)["checks"] if CAUSAL in c["name"]}
    assert checks, graded.milestone(milestone)["checks"]
    return checks


@pytest.mark.slow
def test_a_lookahead_under_a_huge_shift_fails_the_leak_probe(tmp_path: Path):
    folder = Variant("shifted-lookahead", edits={TYING: [(RETURN, LOOKAHEAD)]}).build(tmp_path / "submission")
    graded = grade(folder, "-m", "tying")
    assert graded.returncode == 0, graded.stderr
    checks = causality_checks(graded, "tying")
    leak = next(c for name, c in checks.items() if name.endswith("[no_future_leak]"))
    assert not leak["passed"] and leak["score"] == 0, leak
    assert "leaks from the future" in leak["message"] and "nats of log-probability" in leak["message"], leak
    for probe in ("prefix_consistent", "gradient"):  # the gradient: one_hot(idx) leaks through no gradient at all
        found = next(c for name, c in checks.items() if name.endswith(f"[{probe}]"))
        assert not found["passed"] and "leaks from the future" in found["message"], found
    earned = {name: c["score"] for name, c in checks.items() if c["score"]}
    assert list(earned) == [next(n for n in checks if n.endswith("[batch_independent]"))], earned


@pytest.mark.slow
def test_an_honest_model_whose_logits_are_shifted_keeps_every_causality_check(tmp_path: Path):
    edits = {TYING: [(RETURN, HONEST)], MODEL: [(RETURN, HONEST)]}
    folder = Variant("honest-shift", edits=edits).build(tmp_path / "submission")
    graded = grade(folder, "-m", "tying", "-m", "m2")
    assert graded.returncode == 0, graded.stderr
    for milestone in ("tying", "m2"):
        checks = causality_checks(graded, milestone)
        assert all(c["passed"] and c["score"] == c["max_score"] for c in checks.values()), checks


# A layer that adds the next position's input, detached: the worker's gradient matrix shows no leak (there is no
# gradient through it), so the gradient check passed on that alone; the outputs' probe now runs after it too.
DETACHED = """        out = self.proj(out)
        return torch.cat([out[:, :-1] + 0.5 * x.detach()[:, 1:], out[:, -1:]], 1)  # the next input, no gradient"""
GRADIENT_CHECK = "the gradient of output t with respect to any later input is exactly 0"


@pytest.mark.slow
def test_a_leak_with_no_gradient_fails_the_gradient_check(tmp_path: Path):
    edits = {"m1_attention.py": [("        return self.proj(out)", DETACHED)]}
    folder = Variant("detached-lookahead", edits=edits).build(tmp_path / "submission")
    graded = grade(folder, "-m", "m1")
    assert graded.returncode == 0, graded.stderr
    (check,) = [c for c in graded.milestone("m1")["checks"] if c["name"] == GRADIENT_CHECK]
    assert not check["passed"] and check["score"] == 0 and "leaks from the future" in check["message"], check

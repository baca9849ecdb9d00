"""In a built release, each of five common bugs loses public points with a message naming its cause, while
correct submissions written in another style keep full public marks.

Every submission here is the reference with exact text edits (helpers.Variant: an edit whose text is missing
fails loudly), graded by the release's own grader (one process for the module: tests/release_grader.py), on the
one milestone concerned. That the unmodified reference scores full public marks, and that the release still holds no
hidden text, is tests/e2e/test_release.py's.
"""

from __future__ import annotations

import dataclasses
import json
import os
import select
import subprocess
import sys
from pathlib import Path

import pytest

import corpus
from helpers import Variant, bug, cli, ok

pytestmark = pytest.mark.slow  # every test here grades whole submissions

BUGS = [
    bug(
        "m1-unscaled-scores",
        "m1",
        "divided by sqrt(d_k)",
        "m1_attention.py",
        ("scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)", "scores = q @ k.transpose(-2, -1)"),
    ),
    # CausalSelfAttention with no mask at all: causal_attention itself is right, so only the layer's check sees it
    bug(
        "m1-layer-without-mask",
        "m1",
        "information leaks from the future",
        "m1_attention.py",
        ("out, _ = causal_attention(q, k, v)", "out = F.scaled_dot_product_attention(q, k, v)"),
    ),
    bug(
        "m1-diagonal-masked",
        "m1",
        "the diagonal must be allowed",
        "m1_attention.py",
        ("torch.tril(torch.ones(T, T, device=device))", "torch.tril(torch.ones(T, T, device=device), -1)"),
    ),
    bug(
        "m2-blocks-in-a-list",
        "m2",
        "nn.ModuleList",
        "m2_model.py",
        (
            "self.blocks = nn.ModuleList(GPTBlock(d, n_heads) for _ in range(n_layers))",
            "self.blocks = [GPTBlock(d, n_heads) for _ in range(n_layers)]",
        ),
    ),
    bug(
        "m2-one-block-repeated",
        "m2",
        "build each layer's own",
        "m2_model.py",
        (
            "self.blocks = nn.ModuleList(GPTBlock(d, n_heads) for _ in range(n_layers))",
            "self.blocks = nn.ModuleList([GPTBlock(d, n_heads)] * n_layers)",
        ),
    ),
    bug("m3-no-zero-grad", "m3", "gradients zeroed", "m3_train.py", ("        opt.zero_grad()\n", "")),
    bug(
        "m3-zero-grad-once-before-the-loop",
        "m3",
        "gradients zeroed",
        "m3_train.py",
        ("        opt.zero_grad()\n", ""),
        ("    losses = []\n", "    losses = []\n    opt.zero_grad()\n"),
    ),
    bug(
        "m4-first-tokens",
        "m4",
        "cropped to its last model.T tokens",
        "m4_generate.py",
        ("logits = model(idx[:, -model.T:])", "logits = model(idx[:, :model.T])"),
    ),
    # GQA and latent attention are compared with the student's own MHA: here the MHA is the wrong one, and the
    # message says what GQA was compared with, not "the reference".
    bug(
        "attnvar-mha-without-output-projection",
        "attnvar",
        "GQA with n_groups = n_heads differs from your multi_head_attention's output",
        "m10_attnvar.py",
        (
            "    return merge_heads(attend(q, k, v)) @ w_o\n\n\ndef grouped_query_attention",
            "    return merge_heads(attend(q, k, v))\n\n\ndef grouped_query_attention",
        ),
    ),
    bug(
        "sampling-temperature-on-probabilities",
        "sampling",
        "dividing the logits before the softmax",
        "m8_sampling.py",
        ("logits = filter_logits(logits / temperature, top_k, top_p)", "logits = filter_logits(logits, top_k, top_p)"),
        ("probs = F.softmax(logits, dim=-1)\n", "probs = F.softmax(logits, dim=-1) / temperature\n"),
    ),
    bug(
        "sampling-probabilities-to-the-temperature",
        "sampling",
        "dividing the logits before the softmax",
        "m8_sampling.py",
        ("logits = filter_logits(logits / temperature, top_k, top_p)", "logits = filter_logits(logits, top_k, top_p)"),
        ("probs = F.softmax(logits, dim=-1)\n", "probs = F.softmax(logits, dim=-1) ** temperature\n"),
    ),
    bug(
        "padding-counts-padding",
        "padding",
        "ignore_index=pad_id",
        "m9_padding.py",
        ("clm_loss(model(inp), tgt, ignore_index=pad_id)", "clm_loss(model(inp), tgt)"),
    ),
    # the lesson group checks the numbers the lesson prints, with all four files together
    bug(
        "lesson-with-a-triu-mask",
        "lesson",
        "the lesson prints 4.0511",
        "m1_attention.py",
        ("torch.tril(torch.ones(T, T, device=device))", "torch.triu(torch.ones(T, T, device=device))"),
    ),
    # an answer the grader cannot read as a number fails here, where the student can still fix its form
    bug("quiz-number-in-words", "quiz", "should be a number", "quiz.py", ("Q7 = 1e10", 'Q7 = "10 billion"')),
    bug("quiz-nan", "quiz", "finite number", "quiz.py", ("Q7 = 1e10", 'Q7 = float("nan")')),
    # a readable but wrong answer is told wrong from its locked hash, the answer itself not shipped
    bug("quiz-wrong-number", "quiz", "Q7: 100000000000.0 is not right", "quiz.py", ("Q7 = 1e10", "Q7 = 1e11")),
    bug(
        "kvmemory-wrong-number", "kvmemory", "Q_NUM1: 40 is not right", "m11_kvmemory.py", ("Q_NUM1 = 5", "Q_NUM1 = 40")
    ),
    bug("padding-on-the-left", "padding", "pads on the left", "m9_padding.py", ("[i, :len(s)]", "[i, L - len(s) :]")),
    bug(
        "padding-targets-not-shifted",
        "padding",
        "shifted by one",
        "m9_padding.py",
        (
            "inp, tgt = clm_inputs_targets(pad_batch(seqs, pad_id))",
            "batch = pad_batch(seqs, pad_id)\n    inp, tgt = batch[:, :-1], batch[:, :-1]",
        ),
    ),
]

# (milestone, variant): correct code in another style than the reference's.
CORRECT = [
    (
        "m1",
        ok(
            "m1-query-scaled-first-and-where",
            {
                "m1_attention.py": [
                    (
                        "scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)",
                        "scores = (q / math.sqrt(d_k)) @ k.transpose(-2, -1)",
                    ),
                    (
                        'scores = scores.masked_fill(causal_mask(T, q.device) == 0, float("-inf"))',
                        'scores = torch.where(causal_mask(T, q.device).bool(), scores, float("-inf"))',
                    ),
                ]
            },
        ),
    ),
    (
        "m1",
        ok(
            "m1-einsum-and-sdpa",
            {
                "m1_attention.py": [
                    (
                        "scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)",
                        'scores = torch.einsum("...qd,...kd->...qk", q, k) * d_k ** -0.5',
                    ),
                    (
                        "return weights @ v, weights",
                        "return F.scaled_dot_product_attention(q, k, v, is_causal=True), weights",
                    ),
                ]
            },
        ),
    ),
    (
        "m3",
        ok(
            "m3-model-zero-grad",
            {"m3_train.py": [("        opt.zero_grad()\n", "        model.zero_grad(set_to_none=True)\n")]},
        ),
    ),
    (
        "m3",
        ok(
            "m3-zeroed-after-the-step",
            {
                "m3_train.py": [
                    ("        opt.zero_grad()\n", ""),
                    ("        opt.step()\n", "        opt.step()\n        opt.zero_grad(set_to_none=False)\n"),
                ]
            },
        ),
    ),
    (
        "m4",
        ok(
            "m4-crop-by-length",
            {
                "m4_generate.py": [
                    ("logits = model(idx[:, -model.T:])", "logits = model(idx[:, max(0, idx.shape[1] - model.T):])"),
                    (
                        "next_token = logits[:, -1, :].argmax(dim=-1, keepdim=True)",
                        "next_token = torch.argmax(logits[:, -1], dim=-1).unsqueeze(1)",
                    ),
                ]
            },
        ),
    ),
    (
        "sampling",
        ok(
            "sampling-reciprocal-and-gumbel-max",
            {
                "m8_sampling.py": [
                    (
                        "logits = filter_logits(logits / temperature, top_k, top_p)",
                        "logits = filter_logits(logits * (1.0 / temperature), top_k, top_p)",
                    ),
                    (
                        "return torch.multinomial(probs, 1, generator=generator).squeeze(-1)",
                        "noise = torch.rand(probs.shape, generator=generator).clamp_min(1e-12)\n"
                        "    return (probs.log() - (-noise.log()).log()).argmax(dim=-1)",
                    ),
                ]
            },
        ),
    ),
    (
        "padding",
        ok(
            "padding-masked-mean",
            {
                "m9_padding.py": [
                    ("import torch.nn as nn\n", "import torch.nn as nn\nimport torch.nn.functional as F\n"),
                    (
                        "return clm_loss(model(inp), tgt, ignore_index=pad_id)",
                        'ce = F.cross_entropy(model(inp).transpose(1, 2), tgt, reduction="none")\n'
                        "    real = tgt != pad_id\n"
                        "    return (ce * real).sum() / real.sum()",
                    ),
                ]
            },
        ),
    ),
]


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("public-checks") / "gptkit-release"
    proc = cli("release", str(out))
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture(scope="module")
def release_grader(release: Path):
    """One process in the release grading every submission of this module with the release's own grader
    (tests/release_grader.py): what `grade check -m M --format json` prints there, without a process, torch and
    a fork server started for each of some fifty submissions."""
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).parents[1] / "release_grader.py")],
        cwd=release,
        env={**os.environ, "PYTHONPATH": str(release)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin and proc.stdout
    hello = json.loads(proc.stdout.readline() or "{}")
    assert Path(hello.get("grader", "/")).is_relative_to(release), f"not the release's grader: {hello}"
    yield proc
    proc.stdin.close()
    proc.wait(timeout=60)


def graded(release: Path, release_grader: subprocess.Popen, variant: Variant, milestone: str) -> dict:
    """The variant, built in the release, graded there on ``milestone`` alone: that milestone's report."""
    return graded_on(release, release_grader, variant, [milestone])[milestone]


def graded_on(release: Path, release_grader: subprocess.Popen, variant: Variant, milestones: list[str]) -> dict:
    """The variant, built in the release (once), graded there on ``milestones``: each one's report, by id."""
    folder = release / variant.name
    if not folder.exists():
        variant.build(folder)
    assert release_grader.stdin and release_grader.stdout
    release_grader.stdin.write(json.dumps([str(folder), milestones]) + "\n")
    release_grader.stdin.flush()
    ready, _, _ = select.select([release_grader.stdout], [], [], 300)
    assert ready, f"the release's grader gave no report for {variant.name} in 300 s"
    report = json.loads(release_grader.stdout.readline() or "{}")
    assert report.get("checks") == "public", report
    return {m["id"]: m for m in report["milestones"] if m["id"] in milestones}


def summary(result: dict) -> str:
    return f"{result['score']}/{result['max_score']}: " + "; ".join(
        c["message"][:300] for c in result["checks"] if not c["passed"]
    )


@pytest.mark.parametrize("variant", BUGS, ids=lambda v: v.name)
def test_common_bug_loses_public_points_and_names_its_cause(release, release_grader, variant):
    result = graded(release, release_grader, variant, variant.milestone)
    assert result["score"] < result["max_score"], summary(result)
    messages = [c["message"] for c in result["checks"] if not c["passed"]]
    assert any(variant.expect in m for m in messages), f"no message names {variant.expect!r}: {summary(result)}"


@pytest.mark.parametrize("milestone,variant", CORRECT, ids=lambda x: x.name if isinstance(x, Variant) else x)
def test_correct_code_in_another_style_keeps_full_public_marks(release, release_grader, milestone, variant):
    result = graded(release, release_grader, variant, milestone)
    assert result["score"] == result["max_score"], summary(result)


# (a corpus variant's name, a phrase naming the cause): common mistakes, each of which the FIRST failing public check
# must explain, since a release's `grade check` prints only that one without -v. The nine classic ones among
# them: triu, the softmax's dim, d for d_head in m1 and attnvar, unshifted targets in train, no zero_grad, no crop,
# the temperature after top-p, a KV cache's position off by one.
FIRST = [
    ("m1-no-scaling", "divided by sqrt(d_k)"),
    ("m1-mask-triu", "torch.triu"),
    ("m1-mask-used-inverted", "the mask is used inverted"),
    ("m1-mask-used-inverted-bool", "the mask is used inverted"),
    ("m1-softmax-over-queries", "the softmax must normalise over the keys"),
    ("m1-mask-buffer-8-unsliced", "mask[:T, :T]"),
    ("m1-scale-by-d", "not sqrt(d), the whole width"),
    ("attnvar-scale-by-d", "1 / sqrt(d_head)"),
    ("m3-no-zero-grad", "opt.zero_grad()"),
    ("m3-targets-not-shifted", "the targets are not shifted"),
    ("m3-train-targets-are-inputs", "targets inside train are not shifted"),
    ("m4-crops-first-tokens", "cropped to its last model.T tokens"),
    ("m4-no-cropping", "the last model.T tokens"),
    ("sampling-filter-before-temperature", "top-p ran before the temperature"),
    ("position-off-by-one", "one too far"),
    # concepts: what the passes were fed, the losses' sign and axis, a count that ignores the width
    ("parameter-tensors-counted", "parameter tensors"),
    ("teacher-forced-fed-the-whole-sequence", "fed the whole sequence"),
    ("prefix-holds-its-own-target", "holds the token it must predict"),
    ("nll-loss-on-raw-logits", "a loss below 0"),
    ("log-softmax-over-the-positions", "runs across the positions"),
    ("prefix-log-softmax-over-one-position", "an axis of size 1"),
]


@pytest.mark.parametrize("name,cause", FIRST, ids=[name for name, _ in FIRST])
def test_the_first_failing_public_check_names_the_cause(release, release_grader, name, cause):
    # built under its own folder name: BUGS above may hold a variant of the same name
    variant = dataclasses.replace(next(v for v in corpus.BUGGY if v.name == name), name=f"first-{name}")
    assert variant.milestone
    result = graded(release, release_grader, variant, variant.milestone)
    failed = [c["message"] for c in result["checks"] if not c["passed"]]
    assert failed, summary(result)
    assert cause in failed[0], f"the first failure does not name {cause!r}: {failed[0][:400]}\n{summary(result)}"


# (a corpus variant's name, a phrase naming the cause): mistakes of m1 and m2 that run, keep every shape and leak
# nothing, so that only reading the layer part by part shows them (grader/suites/wiring.py). In the release, the
# milestone's first failing public check names the cause.
READ_PART_BY_PART = [
    ("m1-split-heads-without-transpose", "split with a plain view or reshape"),
    ("m1-split-and-merge-heads-without-transpose", "split with a plain view or reshape"),
    ("m1-merge-heads-without-transpose", "merged without transposing back"),
    ("m2-no-attention-residual", "the residual around the attention is missing"),
    ("m2-no-feed-forward-residual", "the residual around the feed-forward is missing"),
    ("m2-post-norm", "post-norm"),
    ("m2-relu", "that is ReLU"),
    ("m2-layernorm-eps", "eps is 1e-6"),
    ("m2-layernorm-eps-0.1", "eps is 0.1"),
    ("m2-hand-written-layernorm", "its variance is the unbiased one"),
    ("m2-final-layernorm-eps", "eps is 1e-6"),
    ("m2-dropout-in-the-feed-forward", "dropout"),
    ("m1-dropout-after-the-projection", "dropout"),
]


def read_part_by_part(name: str) -> Variant:
    return dataclasses.replace(next(v for v in corpus.BUGGY if v.name == name), name=f"parts-{name}")


@pytest.mark.parametrize("name,cause", READ_PART_BY_PART, ids=[name for name, _ in READ_PART_BY_PART])
def test_a_mistake_read_part_by_part_is_named_first(release, release_grader, name, cause):
    variant = read_part_by_part(name)
    assert variant.milestone
    result = graded(release, release_grader, variant, variant.milestone)
    failed = [c["message"] for c in result["checks"] if not c["passed"]]
    assert failed, summary(result)
    assert cause in failed[0], f"the first failure does not name {cause!r}: {failed[0][:400]}\n{summary(result)}"


# The checks that run the student's own m1 and m2 in the release: a failure there caused by m1 or m2 must name that
# cause, never send the student to the exercise's own code or to a check that passes.
LATER = ["m3", "m4", "lesson", "kvcache", "concepts"]


@pytest.mark.parametrize("name,cause", READ_PART_BY_PART, ids=[name for name, _ in READ_PART_BY_PART])
def test_a_later_check_failing_on_it_names_the_same_cause(release, release_grader, name, cause):
    results = graded_on(release, release_grader, read_part_by_part(name), LATER)
    elsewhere = [(m, c["message"]) for m, r in results.items() for c in r["checks"] if not c["passed"]]
    # an eps of 1e-6 moves the lesson's losses by less than the 4 decimals printed: nothing later fails there
    assert elsewhere or name in SMALLER_THAN_THE_LESSON_SHOWS, f"no later check failed: {sorted(results)}"
    wrong = [f"{m}: {message[:300]}" for m, message in elsewhere if cause not in message]
    assert not wrong, "\n".join(wrong)


SMALLER_THAN_THE_LESSON_SHOWS = {"m2-layernorm-eps", "m2-final-layernorm-eps"}

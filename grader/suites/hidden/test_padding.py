"""Padded batches: right padding with a pad id, and a loss that ignores padding targets.

The loss runs on the grader's stand-in model (causal and position-dependent, so
left padding shows), and is compared with the loss the grader computes on each
sequence alone, unpadded. While this milestone is graded, ``m3_train`` is the
grader's own, so ``from m3_train import clm_loss`` is safe.
"""

import pytest
import torch
import torch.nn.functional as F

from grader.sandbox.worker.standin import make_standin
from grader.suites import checks
from grader.suites.hidden import diagnose

V, D, T = 29, 16, 8


def sequences(lengths: list[int], pad_id: int, seed: int) -> list[torch.Tensor]:
    """Random token sequences that never contain pad_id."""
    g = torch.Generator().manual_seed(seed)
    seqs = [torch.randint(0, V - 1, (n,), generator=g) for n in lengths]
    return [s + (s >= pad_id).long() for s in seqs]  # skip over pad_id


def padded(seqs: list[torch.Tensor], pad_id: int, left: bool = False) -> torch.Tensor:
    L = max(len(s) for s in seqs)
    batch = torch.full((len(seqs), L), pad_id)
    for i, s in enumerate(seqs):
        start = L - len(s) if left else 0
        batch[i, start : start + len(s)] = s
    return batch


# ---------------------------------------------------------------- pad_batch

PAD_CASES = [([3, 5, 2], 0), ([4], 7), ([1, 6, 6, 2], V - 1)]


@pytest.mark.points(2)
@pytest.mark.parametrize("lengths,pad_id", PAD_CASES, ids=["3-5-2-pad0", "one-sequence", "1-6-6-2-pad28"])
def test_pad_batch(padding, lengths, pad_id):
    """pad_batch right-pads every sequence with pad_id to the longest length"""
    seqs = sequences(lengths, pad_id, seed=len(lengths))
    got = checks.tensor(
        padding.call("pad_batch", seqs, pad_id), "pad_batch's result", (len(lengths), max(lengths)), torch.long
    )
    if torch.equal(got, padded(seqs, pad_id)):
        return
    if torch.equal(got, padded(seqs, pad_id, left=True)):
        checks.fail(
            "the padding is on the left: put each sequence first and the padding after it, on the right "
            "(a causal model then reads every real token at the same positions as unpadded)"
        )
    if torch.equal(got, padded(seqs, 0)):
        checks.fail(f"the padding is 0, not pad_id = {pad_id}: fill with pad_id")
    row = next(i for i in range(len(seqs)) if not torch.equal(got[i], padded(seqs, pad_id)[i]))
    checks.fail(
        f"row {row} is {got[row].tolist()}, expected {padded(seqs, pad_id)[row].tolist()} "
        f"(the sequence {seqs[row].tolist()}, then pad_id = {pad_id})"
    )


# ---------------------------------------------------------------- padded_loss


def unpadded_loss(model, seqs: list[torch.Tensor]) -> torch.Tensor:
    """Sum of every real target's cross-entropy, each sequence on its own, over the number of targets."""
    with torch.no_grad():
        losses = [F.cross_entropy(model(s[None, :-1])[0], s[1:], reduction="sum") for s in seqs]
    return torch.stack(losses).sum() / sum(len(s) - 1 for s in seqs)


def explain_loss(got: torch.Tensor, model, seqs: list[torch.Tensor], pad_id: int) -> str | None:
    def batch_loss(left=False, ignore="target"):
        batch = padded(seqs, pad_id, left)
        inp, tgt = batch[:, :-1], batch[:, 1:]
        keep = (tgt if ignore == "target" else inp) != pad_id if ignore else torch.ones_like(tgt, dtype=torch.bool)
        with torch.no_grad():
            ce = F.cross_entropy(model(inp).transpose(1, 2), tgt, reduction="none")
        return (ce * keep).sum() / keep.sum()

    def mean_of_means():
        with torch.no_grad():
            return torch.stack([F.cross_entropy(model(s[None, :-1])[0], s[1:]) for s in seqs]).mean()

    return diagnose.first_match(
        got,
        [
            ("the padding targets were counted: pass ignore_index=pad_id to the loss", lambda: batch_loss(ignore=None)),
            (
                "the padding is on the left, which shifts every position: pad on the right",
                lambda: batch_loss(left=True),
            ),
            (
                "the loss skipped positions whose INPUT is padding, but it must skip those whose TARGET is padding "
                "(the last real token's target is pad_id)",
                lambda: batch_loss(ignore="input"),
            ),
            (
                "that is the mean of per-sequence means, which weighs short sequences more: average over all real "
                "targets at once (one cross-entropy with ignore_index)",
                mean_of_means,
            ),
        ],
        atol=1e-5,
    )


LOSS_CASES = [([5, 3, 9], 0, 0), ([9, 2], V - 1, 1), ([2, 7, 4, 9], 13, 2)]


@pytest.mark.points(4)
@pytest.mark.parametrize("lengths,pad_id,seed", LOSS_CASES, ids=["5-3-9-pad0", "9-2-pad28", "2-7-4-9-pad13"])
def test_padded_loss_equals_unpadded_loss(padding, lengths, pad_id, seed):
    """padded_loss equals the mean cross-entropy over every real target of the unpadded sequences"""
    seqs = sequences(lengths, pad_id, seed)
    got = checks.tensor(
        padding.call("padded_loss", padding.standin(V, D, T, seed), seqs, pad_id), "padded_loss's result", ()
    )
    model = make_standin(V, D, T, seed)
    want = unpadded_loss(model, seqs)
    checks.assert_close_where(
        got, want, f"the loss (pad_id = {pad_id})", (), explain=lambda: explain_loss(got, model, seqs, pad_id)
    )


def test_padded_loss_without_padding(padding):
    """with sequences of one length (no padding), padded_loss is the plain causal-LM loss"""
    seqs = sequences([6, 6, 6], 0, seed=3)
    got = checks.tensor(padding.call("padded_loss", padding.standin(V, D, T, 3), seqs, 0), "padded_loss's result", ())
    model = make_standin(V, D, T, 3)
    batch = torch.stack(seqs)
    with torch.no_grad():
        want = F.cross_entropy(model(batch[:, :-1]).reshape(-1, V), batch[:, 1:].reshape(-1))
    checks.assert_close_where(got, want, "the loss", ())


def test_padded_loss_carries_gradients(padding):
    """padded_loss returns a scalar tensor that still carries gradients (no .item())"""
    loss = padding.call("padded_loss", padding.standin(V, D, T, 4), sequences([4, 2], 0, 4), 0, keep=True)
    if loss.short_type != "Tensor":
        checks.fail(
            f"padded_loss returned {checks.describe(loss)}: return the loss tensor itself, so that "
            "training can call .backward() on it"
        )
    if not loss.attr("requires_grad"):
        checks.fail("the loss does not require gradients: was it computed under torch.no_grad() or detached?")

"""The lmbudget evaluation, in the grading process: held-out windows and causality probes, in the same calls.

The model's forward (in the worker) sees one kind of row only: ``context`` tokens of held-out text. Three kinds
are shuffled together into every call, in an order drawn afresh for each run:

* the windows of split A and of split B (``eval_windows`` of each, at fixed starts), which are scored;
* probes (``probe_windows``): a real window of A or B whose inputs from a position ``cut`` on are
  replaced by those of another held-out window (from the same split, at starts halfway between the scored
  ones), so a probe reads as held-out text too. A causal model's log-probabilities before ``cut`` are the same
  on the probe as on its window (``grader/causal.py``: the kit's leak probe, grader/suites/causality.py's,
  compared shift-free with an absolute tolerance); any difference beyond rounding is a model that reads later
  inputs, such as the answer at ``idx[:, t + 1]``: "not causal".

The cuts cover every position (``probe_cuts``). A probe cut at ``c`` sees a lookahead from an output before
``c`` to an input at or after it, and nothing else: a model that reads ``idx[:, p + 1]`` at position ``p`` alone
is seen by the cut ``p + 1`` only, and one probe tests one cut of one window (two rows that agree up to ``c`` and
differ there test ``c``, whatever else they hold). So the cuts are dealt, not drawn: every run's probes take
each cut from 1 to ``context - 1`` at least once (``probe_windows`` is raised to ``context - 1`` where it is
smaller), and a lookahead at any one position, on every row, is "not causal" on every run, whatever the seed.
The windows probed are drawn: with ``probe_windows`` at two ``eval_windows`` (task.toml), every scored window is
probed once, at a cut the model cannot know, each cut on about ``2 eval_windows / (context - 1)`` windows; a
lookahead kept to some rows is then seen unless none of the windows probed at its cut is one of them.

So a model cannot tell A from B, nor a probe from a scored window: it must predict each row as if it were
scored and checked. Every comparison and the loss happen here; nothing about a row (its text, a position) goes
into a message.

The loss is summed row by row in the rows' own order (``math.fsum``, in double precision), not in the order of
the calls, so the order a run's seed deals them in changes nothing in it.

The rows are dealt to several copies of the trained model (``deal``), each restored from its saved bytes in a
fresh worker of its own, and a probe never goes to the copy that evaluates its window: a model that kept state
between rows (remembering the first output it gave for a prefix, and repeating it) would otherwise agree with
itself on every probe. Each copy gets scored rows and probes alike, in an order of its own.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from grader.causal import LOG_PROB_TOLERANCE, changed_before, log_probs
from grader.errors import Finding
from grader.lmbudget.corpus import Splits, windows

EVAL_BATCH = 32  # rows per forward call in the worker
PROBE_OFFSET = 0.5  # a probe's replacement text starts halfway between two scored windows
# Log-probabilities before a probe's cut may differ by rounding (another batch, another copy): this many nats, an
# absolute tolerance on a shift-free quantity (grader/causal.py says why this much, and what a leak gains under it).
PROBE_TOLERANCE = LOG_PROB_TOLERANCE


class BadOutput(Finding):
    """The model's output is not logits of the contract's shape ("no model"); the message says what was expected,
    never what came back (which the model chose)."""


class NotCausal(Finding):
    """A probe's outputs before its cut changed: the model reads later inputs."""


@dataclass(frozen=True, eq=False)
class Row:
    tokens: torch.Tensor  # (context + 1,): inputs are [:-1], a scored row's targets [1:]
    split: str  # "A" or "B"
    probe_of: int = -1  # a probe: the index of the row it changes; -1: a scored row
    cut: int = 0  # a probe's first changed input position


def plan(splits: Splits, eval_windows: int, probe_windows: int, context: int, seed: int) -> list[Row]:
    """The scored windows of A and B, then the probes; ``seed`` draws the probes (``shuffled`` the order)."""
    gen = torch.Generator().manual_seed(seed)
    rows: list[Row] = []
    others: dict[str, torch.Tensor] = {}
    for split, text in (("A", splits.a), ("B", splits.b)):
        ids = splits.encode(text)
        rows += [Row(w, split) for w in windows(ids, eval_windows, context + 1)]
        others[split] = windows(ids, eval_windows, context + 1, offset=PROBE_OFFSET)
    for original, cut in probe_cuts(len(rows), probe_windows, context, gen):
        row = rows[original]
        pool = others[row.split]
        other = pool[int(torch.randint(len(pool), (), generator=gen))]
        tokens = torch.cat([row.tokens[:cut], other[cut:]])
        if tokens[cut] == row.tokens[cut]:  # the input at the cut must change, or the probe tests nothing there
            tokens[cut] = (tokens[cut] + 1) % len(splits.vocab)
        rows.append(Row(tokens, row.split, probe_of=original, cut=cut))
    return rows


def probe_cuts(scored: int, probe_windows: int, context: int, gen: torch.Generator) -> list[tuple[int, int]]:
    """(window, cut) of each probe: ``max(probe_windows, context - 1)`` of them (none for 0, or no window), the
    cuts a shuffled round of 1 to ``context - 1`` after another, so that every cut comes at least once; the
    windows a shuffled round of the scored ones after another, so that none is probed twice before every other
    is probed once. The two rounds are drawn apart: which cut a window gets says nothing about the window."""
    places = context - 1  # a cut at c compares outputs 0..c-1: c = 0 compares nothing, c = context is past the end
    if probe_windows <= 0 or scored == 0 or places < 1:
        return []
    count = max(probe_windows, places)

    def rounds(n: int) -> list[int]:
        drawn: list[int] = []
        while len(drawn) < count:
            drawn += torch.randperm(n, generator=gen).tolist()
        return drawn[:count]

    originals = rounds(scored)
    return [(original, 1 + place) for original, place in zip(originals, rounds(places))]


def shuffled(count: int, seed: int) -> list[int]:
    return torch.randperm(count, generator=torch.Generator().manual_seed(seed + 1)).tolist()


def deal(rows: list[Row], copies: int, seed: int) -> list[list[int]]:
    """The rows' indices dealt to ``copies`` copies of the model, each list in an order of its own: the scored
    rows at random, each probe to a copy other than its window's (with one copy, every row to it)."""
    gen = torch.Generator().manual_seed(seed + 2)
    to = [int(torch.randint(copies, (), generator=gen)) if row.probe_of < 0 else -1 for row in rows]
    for i, row in enumerate(rows):
        if row.probe_of >= 0:
            other = int(torch.randint(max(1, copies - 1), (), generator=gen))
            to[i] = other + (copies > 1 and other >= to[row.probe_of])
    dealt = [[i for i, c in enumerate(to) if c == copy] for copy in range(copies)]
    return [[hand[j] for j in torch.randperm(len(hand), generator=gen).tolist()] for hand in dealt]


def evaluate(
    forwards: Callable[[torch.Tensor], Any] | Sequence[Callable[[torch.Tensor], Any]],
    rows: list[Row],
    vocab_size: int,
    hands: list[list[int]],
    between_calls: Callable[[], None] = lambda: None,
) -> dict[str, float]:
    """Bits per character on each split: ``forwards[k]`` evaluates the rows of ``hands[k]`` in that order,
    ``EVAL_BATCH`` a call, the copies taking turns; ``between_calls`` runs after each call (the caller's CPU
    allowance). BadOutput, NotCausal, or whatever a forward raises."""
    forwards = list(forwards) if isinstance(forwards, Sequence) else [forwards]
    calls = [
        (forwards[k], hand[start : start + EVAL_BATCH])
        for start in range(0, max(map(len, hands), default=0), EVAL_BATCH)
        for k, hand in enumerate(hands)
        if hand[start:]
    ]
    nats: dict[int, float] = {}  # each scored row's, summed in the rows' order below (not the calls'): the same
    # loss whatever order this run's seed dealt them in
    needed: dict[int, int] = {}  # the probes and their windows: how many leading positions a comparison reads
    for n, row in enumerate(rows):
        if row.probe_of >= 0:
            needed[n] = row.cut
            needed[row.probe_of] = max(needed.get(row.probe_of, 0), row.cut)
    kept: dict[int, torch.Tensor] = {}  # those positions' logits, copied out of the call's: with a probe for each
    # window every row is kept, so only the part compared (half a row, on average)
    for forward, batch in calls:
        x = torch.stack([rows[i].tokens[:-1] for i in batch])
        logits = checked(forward(x), (*x.shape, vocab_size)).float()
        for j, i in enumerate(batch):
            row = rows[i]
            if i in needed:
                kept[i] = logits[j, : needed[i]].clone()
            if row.probe_of < 0:
                nats[i] = F.cross_entropy(logits[j].double(), row.tokens[1:], reduction="sum").item()
        between_calls()
    for i, row in enumerate(rows):
        if row.probe_of >= 0:
            probe(kept[row.probe_of], kept[i], row.cut)
    losses = {}
    for split in ("A", "B"):
        scored = [i for i, row in enumerate(rows) if row.probe_of < 0 and row.split == split]
        total = math.fsum(nats[i] for i in scored if i in nats)
        losses[split] = _bits(total, sum(len(rows[i].tokens) - 1 for i in scored if i in nats))
    return losses


def checked(logits: Any, want: tuple[int, ...]) -> torch.Tensor:
    if not isinstance(logits, torch.Tensor) or tuple(logits.shape) != want or not logits.is_floating_point():
        raise BadOutput(
            f"the model's forward must return a floating-point logits tensor of shape (B, T, len(vocab)), here {want}"
        )
    return logits


def probe(base: torch.Tensor, other: torch.Tensor, cut: int) -> None:
    """NotCausal unless the log-probabilities before ``cut`` agree within ``PROBE_TOLERANCE`` nats. Compared as
    log-probabilities, not logits: a constant added to every logit changes nothing a softmax sees, so it must not
    widen the tolerance either (one of 1e6 hid a lookahead that scored 0.06 bits/char). A NaN or an
    infinite logit before the cut is a change (``changed_before``), never a pass."""
    if not bool(changed_before(log_probs(base)[None], log_probs(other)[None], cut).max() <= PROBE_TOLERANCE):
        raise NotCausal


def _bits(nats: float, count: int) -> float:
    loss = nats / max(1, count) / math.log(2)
    return loss if math.isfinite(loss) else math.inf


def new_seed() -> int:
    """A fresh seed for each run: which windows are probes, where they are cut, and the order of the rows."""
    return secrets.randbits(62)

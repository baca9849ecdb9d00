"""Probes that tell what a submission's ``generate_cached`` did, for the kvcache checks (hidden and public).

The student's code runs in the worker, so nothing inside a call can be watched from the grading process. Each
probe instead sets the call up so that one mistake shows in what comes back: in the tokens, or in the sizes an
error names.

- ``final_norm``: the final LayerNorm given weight 0 and a bias b outputs b at every position, so the model's
  logits are ``head(b)`` whatever came before, and every new token is the same known one. A pass whose tokens
  do not follow it did not feed ``model.ln``'s output to the head.
- ``cache_axis``: a model whose sizes all differ (batch 2, 3 heads of 8 features) and two prompts. With 5
  prompt tokens, a cache joined along another axis than the positions cannot be joined at all (5 positions
  cached, 1 new): torch.cat names the disagreeing sizes. With 1 prompt token the two agree, the join goes
  through, and the axis it joined along comes out doubled in the next error: 6 heads for the queries' 3.

Neither holds a correct cache: they need only the model's weights and the call.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import torch

from grader.sandbox.client import StudentError
from grader.sandbox.common.agreement import ErrorKind

if TYPE_CHECKING:
    from grader.sandbox.client import Remote
    from grader.sandbox.session import MilestoneView

# ------------------------------------------------------------------ the final LayerNorm

NORM_BATCH, NORM_PROMPT, NORM_NEW = 2, 2, 5  # one token from the prompt pass, four from cached steps
NORM_MARGIN = 4.0  # the logit by which head(b)'s top token leads the next: no rounding can tie them


def final_norm(view: MilestoneView, model: Remote, state: dict[str, torch.Tensor]) -> str | None:
    """Why the tokens ignore the final LayerNorm, or None where every pass applies ``model.ln`` before the head.

    ``model`` is a TinyGPT in the worker whose weights are ``state`` (its ``ln`` and ``head`` included); they
    are put back before this returns. A call that raises, or returns something other than tokens, tells
    nothing here: None.
    """
    head = state["head.weight"]
    b = torch.randn(head.shape[1], generator=torch.Generator().manual_seed(7))
    top = (head @ b).topk(2).values
    # the logits are linear in b: scaled so, the top one leads the next by the margin
    b = b * (NORM_MARGIN / max(float(top[0] - top[1]), 1e-6))
    z = int((head @ b).argmax())
    probe = dict(state)
    probe["ln.weight"], probe["ln.bias"] = torch.zeros_like(state["ln.weight"]), b.to(state["ln.bias"].dtype)
    start = torch.randint(0, head.shape[0], (NORM_BATCH, NORM_PROMPT), generator=torch.Generator().manual_seed(8))
    model.load(probe)
    try:
        out = view.call("generate_cached", model, start, NORM_NEW)
    except StudentError:
        return None
    finally:
        model.load(state)
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (NORM_BATCH, NORM_PROMPT + NORM_NEW):
        return None
    new = out[:, NORM_PROMPT:]
    prompt_pass, cached = bool((new[:, 0] == z).all()), bool((new[:, 1:] == z).all())
    if prompt_pass and cached:
        return None
    where = (
        "the cached steps apply model.head"
        if prompt_pass
        else "the prompt pass applies model.head"
        if cached
        else "both the prompt pass and the cached steps apply model.head"
    )
    return (
        f"{where} without the final LayerNorm (model.ln), to the last block's output. With model.ln's weight set "
        "to 0 and its bias to a vector b, model.ln outputs b at every position, so model.head(model.ln(x)) gives "
        f"the same logits whatever came before, and every new token is {z}; yours were "
        f"{new[0].tolist()} (batch row 0: the first from the prompt pass, the rest from cached steps). In every "
        "step, the prompt's and each cached one: logits = model.head(model.ln(x[:, -1]))"
    )


# ------------------------------------------------------------------ the axis the cache grows along

AXIS_VOCAB, AXIS_T = 31, 8
AXIS_BATCH, AXIS_HEADS, AXIS_D_HEAD, AXIS_PROMPT = 2, 3, 8, 5  # every size of the keys differs: (2, 3, t, 8)
# each size: the axis's name, and what one entry of it is called
AXES = {AXIS_BATCH: ("batch", "batch rows"), AXIS_HEADS: ("heads", "heads"), AXIS_D_HEAD: ("feature", "features")}

# torch's words for the sizes that disagree: a join (torch.cat), a broadcast, a batched matrix product
JOIN = re.compile(r"Sizes of tensors must match except in dimension (-?\d+)\. Expected size (\d+) but got size (\d+)")
BROADCAST = re.compile(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)")
BATCHED = re.compile(r"batch2 tensor to be: \[\d+, (\d+)\] but got: \[\d+, (\d+)\]")


def sizes_disagree(message: str) -> bool:
    """Whether an error's message is torch's for sizes that disagree (in a join, a broadcast or a product): the
    errors a cache joined along the wrong axis raises."""
    return any(pattern.search(message) for pattern in (JOIN, BROADCAST, BATCHED))


def cache_axis(view: MilestoneView) -> str | None:
    """Why the cache cannot hold the new token's keys, when it is joined along another axis than the positions;
    None where the probe does not show that (the call runs, or fails for another reason)."""
    model = view.new("TinyGPT", AXIS_VOCAB, AXIS_HEADS * AXIS_D_HEAD, AXIS_HEADS, 1, AXIS_T, module="m2_model", seed=0)
    joined = raised(view, model, AXIS_PROMPT)
    found = JOIN.search(joined or "")
    if not found or {int(found[2]), int(found[3])} != {AXIS_PROMPT, 1}:
        return None
    grown = doubled(raised(view, model, 1) or "")
    if grown:
        name, noun = AXES[grown]
        lead = (
            f"the cache grows along the {name} axis, not the positions axis. After a 1-token prompt, one cached "
            f"step left the keys with {2 * grown} {noun} for the queries' {grown}: the new token's keys were added "
            f"as more {noun}. And after"
        )
    else:
        lead = "the cache is not joined along the positions axis: after"
    return (
        f"{lead} a {AXIS_PROMPT}-token prompt, torch.cat could not join the cached keys ({AXIS_PROMPT} positions) "
        f"to the new token's (1 position) along dimension {found[1]}: they differ in their number of positions, "
        f"the very axis to join them along (the grader's probe: batch {AXIS_BATCH}, {AXIS_HEADS} heads of "
        f"{AXIS_D_HEAD} features). Append each step's keys and values along the positions axis, the one that "
        "holds t: torch.cat([past_k, k], dim=2) for keys of shape (B, n_heads, t, d_head) as the stub lays them "
        "out (dim=1 for (B, t, n_heads, d_head))"
    )


def raised(view: MilestoneView, model: Remote, prompt_len: int) -> str | None:
    """The message of the error one cached step raises after a prompt of ``prompt_len`` tokens, or None."""
    start = torch.randint(0, AXIS_VOCAB, (AXIS_BATCH, prompt_len), generator=torch.Generator().manual_seed(9))
    try:
        view.call("generate_cached", model, start, 2)
    except StudentError as e:
        return None if e.type == ErrorKind.NOT_IMPLEMENTED else e.message
    return None


def doubled(message: str) -> int | None:
    """The size of the keys' axis that a join doubled, read from the sizes ``message`` says disagree: one of the
    probe's sizes against twice it. None where no such pair is named."""
    pairs = [(int(a), int(b)) for pattern in (BROADCAST, BATCHED) for a, b in pattern.findall(message)]
    for a, b in pairs:
        for size in AXES:
            if {a, b} == {size, 2 * size}:
                return size
    return None

"""Variants for the `padding` exercise (m9_padding.py)."""

from corpus.core import EVERY_EARLIER_NAME
from helpers import bug, ok

M9 = "m9_padding.py"
FILL = "batch = torch.full((len(seqs), L), pad_id, dtype=torch.long)"
COPY = "batch[i, :len(s)] = s"
LOSS = "return clm_loss(model(inp), tgt, ignore_index=pad_id)"

BUGGY = [
    bug(
        "padding-targets-counted",
        "padding",
        "padding targets were counted",
        M9,
        (LOSS, "return clm_loss(model(inp), tgt)"),
    ),
    bug("left-padding", "padding", "on the left", M9, (COPY, "batch[i, L - len(s):] = s")),
    bug("pads-with-zero", "padding", "not pad_id", M9, (FILL, "batch = torch.zeros(len(seqs), L, dtype=torch.long)")),
    bug(
        "mean-of-sequence-means",
        "padding",
        "mean of per-sequence means",
        M9,
        (
            "    inp, tgt = clm_inputs_targets(pad_batch(seqs, pad_id))\n    " + LOSS,
            "    return torch.stack([clm_loss(model(s[None, :-1]), s[None, 1:]) for s in seqs]).mean()",
        ),
    ),
    bug(
        "skips-padding-inputs",
        "padding",
        "whose TARGET is padding",
        M9,
        (
            LOSS,
            """\
logits = model(inp)
    keep = inp != pad_id
    return F.cross_entropy(logits[keep], tgt[keep])""",
        ),
        ("import torch.nn as nn\n", "import torch.nn as nn\nimport torch.nn.functional as F\n"),
    ),
    bug("loss-as-a-float", "padding", "return the loss tensor itself", M9, (LOSS, LOSS + ".item()")),
]

CORRECT = [
    ok(
        "pad-sequence-and-masked-mean",
        {
            M9: [
                (
                    """    L = max(len(s) for s in seqs)
    """
                    + FILL
                    + """
    for i, s in enumerate(seqs):
        """
                    + COPY
                    + """
    return batch""",
                    "    return nn.utils.rnn.pad_sequence(seqs, batch_first=True, padding_value=pad_id)",
                ),
                (
                    LOSS,
                    """\
logp = model(inp).log_softmax(-1).gather(-1, tgt.unsqueeze(-1)).squeeze(-1)
    real = tgt != pad_id
    return -(logp * real).sum() / real.sum()""",
                ),
            ]
        },
    ),
    ok(
        "imports-every-earlier-name",
        {M9: [("from m3_train import clm_inputs_targets, clm_loss\n", EVERY_EARLIER_NAME.lstrip())]},
    ),
]

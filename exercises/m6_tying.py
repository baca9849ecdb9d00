"""Weight tying, and the lesson's GPT rebuilt from PyTorch's own layers.

1. Weight tying. The token table ``tok`` (vocab_size x d) turns ids into
   vectors; the head (``nn.Linear(d, vocab_size)``, weight vocab_size x d)
   turns vectors back into scores over the same vocabulary. GPT-2 uses ONE
   matrix for both: fewer parameters (38.6M of GPT-2 small's 163M), and every
   token's row learns from both ends.
2. The library-layer GPT. Everything you built by hand exists in PyTorch:
   ``nn.TransformerEncoderLayer`` is a whole block (attention, feed-forward,
   LayerNorms, residuals). With a causal mask it is a GPT block; an "encoder"
   only means that PyTorch does not force a mask on you.

Check yourself from the folder that holds this file::

    grade check -m tying
    python m6_tying.py          # GPT-2 small: 163,037,184 untied, 124,439,808 tied
"""
import torch
import torch.nn as nn


def tie_weights(model: nn.Module) -> nn.Module:
    """Make ``model.head.weight`` the very same ``nn.Parameter`` as ``model.tok.weight``; return ``model``.

    Assign the Parameter object itself. Copying the values (``.data``,
    ``.clone()``, ``nn.Parameter(...)``) makes two Parameters that merely start
    equal: still counted twice, and trained apart. Works on any model with a
    ``tok`` embedding and a bias-free ``head``, such as your ``TinyGPT``.
    """
    raise NotImplementedError("tie_weights: one assignment, then return the model")


class LibraryGPT(nn.Module):
    """The lesson's GPT from PyTorch layers: ``(B, t)`` token ids to ``(B, t, vocab_size)`` logits.

    Submodules: ``tok = nn.Embedding(vocab_size, d)``, ``pos = nn.Embedding(max_T, d)``,
    ``n_layers`` of ``nn.TransformerEncoderLayer(d, n_heads, 4 * d, dropout=0.0,
    activation="gelu", batch_first=True, norm_first=True)`` (an ``nn.TransformerEncoder``
    or an ``nn.ModuleList``), a final ``ln = nn.LayerNorm(d)``, and
    ``head = nn.Linear(d, vocab_size, bias=False)`` tied to ``tok``. Keep ``self.T = max_T``.

    Initialise like GPT-2: every ``nn.Linear`` and ``nn.Embedding`` weight from
    N(0, 0.02^2), biases 0 (``self.apply(fn)`` visits every submodule). Mind
    that ``nn.MultiheadAttention`` keeps its q, k, v projection as bare
    Parameters, ``in_proj_weight`` and ``in_proj_bias``.

    ``forward``: token plus position embeddings, the layers under a causal mask,
    then ``ln`` and ``head``. Make the mask with
    ``nn.Transformer.generate_square_subsequent_mask(t, device=idx.device)``: a
    float mask ADDED to the scores, 0 on and below the diagonal and -inf above
    it (not m1's 1/0 mask). Pass it together with ``is_causal=True``, which is
    only a hint that the mask is causal and never replaces it. The keyword
    depends on what you call: ``nn.TransformerEncoder.forward(src, mask=None,
    src_key_padding_mask=None, is_causal=None)`` takes ``mask=`` and hands it to
    every layer, while a single layer's ``nn.TransformerEncoderLayer.forward(src,
    src_mask=None, src_key_padding_mask=None, is_causal=False)`` takes
    ``src_mask=`` (with an ``nn.ModuleList``, call each layer with ``src_mask=``).
    """

    def __init__(self, vocab_size: int, d: int, n_heads: int, n_layers: int, max_T: int):
        super().__init__()
        raise NotImplementedError("LibraryGPT.__init__: tok, pos, the encoder layers, ln, head; init; tie")

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError("LibraryGPT.forward: embed, run the layers with a causal mask, ln, head")


if __name__ == "__main__":
    from m2_model import TinyGPT, count_parameters

    with torch.device("meta"):  # shapes only: no memory for 124M parameters
        untied = count_parameters(TinyGPT(50257, 768, 12, 12, 1024))
        tied = count_parameters(LibraryGPT(50257, 768, 12, 12, 1024))
    print(f"GPT-2 small: {untied:,} untied, {tied:,} tied, saving {untied - tied:,} ({1 - tied / untied:.1%})")

"""Milestone 2: the full TinyGPT.

You stack milestone 1's attention into a GPT: ``GPTBlock`` (attention plus a
feed-forward network, each with a residual), ``TinyGPT`` (embeddings, blocks,
a final LayerNorm and a linear head) and ``count_parameters``.

This file imports ``CausalSelfAttention`` from your ``m1_attention.py``, so
``python m2_model.py`` needs a working milestone 1. The grader, though, grades
m2 with its own trusted ``m1_attention``: a bug in your milestone 1 costs
points in m1 (and in ``lesson``, the end-to-end check that runs your four
files together), never in m2. (The student release's public checks have no
trusted m1: there they run yours.)

Check yourself from the folder that holds this file::

    grade check -m m2            # or, from one level up: grade check exercises -m m2
    python m2_model.py           # prints the parameter count

``TinyGPT(50, 64, 4, 2, 8)`` has 107,008 parameters.
"""
import torch
from torch import nn

# GPTBlock is built on your milestone 1 layer (unused until you write GPTBlock.__init__).
from m1_attention import CausalSelfAttention  # noqa: F401


class GPTBlock(nn.Module):
    """One pre-norm transformer block: (B, T, d) -> (B, T, d)."""

    def __init__(self, d: int, n_heads: int):
        """Create the block's submodules.

        Start with ``super().__init__()``. Then create, in this order (seeded
        values depend on it):

        - ``self.ln1 = nn.LayerNorm(d)``
        - ``self.attn = CausalSelfAttention(d, n_heads)``
        - ``self.ln2 = nn.LayerNorm(d)``
        - ``self.ffn``: an ``nn.Sequential`` of Linear(d, 4d), GELU, Linear(4d, d).
          The feed-forward widens to 4x, applies the nonlinearity, and comes back.
        """
        raise NotImplementedError("GPTBlock.__init__: create ln1, attn, ln2, ffn")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply the block to x of shape (B, T, d); the result is (B, T, d).

        Pre-norm means each sub-layer sees a normalised copy of x, while the
        residual adds its output to the un-normalised x:

            x = x + attn(ln1(x))
            x = x + ffn(ln2(x))

        The residual path lets gradients flow straight through deep stacks.
        """
        raise NotImplementedError("GPTBlock.forward: two pre-norm residual steps")


class TinyGPT(nn.Module):
    """A decoder-only transformer: token ids (B, t) -> logits (B, t, vocab_size)."""

    def __init__(self, vocab_size: int, d: int, n_heads: int, n_layers: int, max_T: int):
        """Create the model.

        Start with ``super().__init__()``. Then create the submodules in exactly
        this order, because seeded values (the lesson's parameters, losses and
        generated tokens) depend on the order random weights are drawn:

        - ``self.tok = nn.Embedding(vocab_size, d)``: one vector per token id.
        - ``self.pos = nn.Embedding(max_T, d)``: one vector per position.
        - ``self.blocks``: an ``nn.ModuleList`` of ``n_layers`` distinct
          ``GPTBlock(d, n_heads)`` (a new block each time, not one block
          repeated; a plain Python list would hide them from ``.parameters()``).
        - ``self.ln = nn.LayerNorm(d)``: the final normalisation.
        - ``self.head = nn.Linear(d, vocab_size, bias=False)``: scores per token.

        Also store ``self.T = max_T``: the longest input the model accepts
        (generation in milestone 4 reads it).
        """
        raise NotImplementedError("TinyGPT.__init__: create tok, pos, blocks, ln, head and set T")

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Map token ids idx (B, t), 1 <= t <= self.T, to logits (B, t, vocab_size).

        1. Token embeddings ``tok(idx)``: (B, t, d).
        2. Add position embeddings for positions ``torch.arange(t)`` (made on
           ``idx.device``): ``pos`` of those is (t, d) and broadcasts over B.
           Use the input's own length t, not max_T, so shorter inputs work.
        3. Run x through every block in order.
        4. Apply the final ``ln``, then ``head``: (B, t, vocab_size).
        """
        raise NotImplementedError("TinyGPT.forward: embed tokens and positions, run blocks, ln, head")


def count_parameters(model: nn.Module) -> int:
    """Return the total number of values in the model's parameters, as an int.

    Sum ``numel()`` over the parameters. A Parameter shared by two modules
    (for example tied embedding and head weights) must count once;
    ``model.parameters()`` already yields each Parameter only once.
    """
    raise NotImplementedError("count_parameters: sum numel() over model.parameters()")


if __name__ == "__main__":
    torch.manual_seed(42)
    model = TinyGPT(50, 64, 4, 2, 8)
    print("parameters:", count_parameters(model))  # lesson: 107008

"""Generation with a key/value cache.

m4's ``generate`` feeds the WHOLE sequence to the model at every step, so the
prompt and every token generated so far pass through every layer again and
again. For a 10-token prompt and 20 new tokens that is 10 + 11 + ... + 29 =
390 positions. Yet in a causal model nothing a position computes depends on
later tokens: its keys and values, in every layer, are the same at every step.
So keep them. A key/value cache feeds the prompt once, then only the newest
token, which attends over the kept keys and values: 10 + 19 = 29 positions for
the same 20 tokens, exactly the same tokens.

You write ``generate_cached`` (greedy generation with a cache) and
``positions_processed`` (the arithmetic above). The model is the lesson's
``TinyGPT``; you drive its submodules yourself instead of calling
``model(idx)``. While this exercise is graded, the grader uses its own
``m1_attention`` and ``m2_model``, so a bug there does not cost points here.

Check yourself from the folder that holds this file::

    grade check -m kvcache       # or, from one level up: grade check exercises -m kvcache
    python m7_kvcache.py         # prints the same tokens twice, then 390 and 29
"""
import torch
from torch import nn


def generate_cached(model: nn.Module, start: torch.Tensor, max_new: int = 5) -> torch.Tensor:
    """Append ``max_new`` greedy tokens to ``start``, as m4's ``generate``, with a key/value cache.

    Shape in: start (B, t) token ids. Shape out: (B, t + max_new), the prompt
    followed by the new tokens, exactly the tokens m4's ``generate`` returns.

    Run everything under ``torch.no_grad()``, and leave the model as you found
    it (no ``model.eval()`` left behind). Use the model's submodules, and
    CALL them (``block.attn.qkv(x)``, not its weight): ``model.tok``,
    ``model.pos``, for each block in ``model.blocks``: ``block.ln1``,
    ``block.attn.qkv``, ``block.attn.proj``, ``block.ln2``, ``block.ffn``; then
    ``model.ln`` and ``model.head``. With ``d`` the model width and
    ``n_heads = block.attn.n_heads``:

    0. No cropping: the last token fed sits at position t + max_new - 2, so if
       ``t + max_new - 1 > model.T`` raise ``ValueError`` before generating.
    1. Step 1 feeds the whole prompt, positions 0 .. t-1:
       ``x = model.tok(idx) + model.pos(positions)``, (B, t, d). In each block:
       ``q, k, v = block.attn.qkv(block.ln1(x)).split(d, dim=-1)``, each viewed
       as (B, t, n_heads, d // n_heads) and transposed to (B, n_heads, t, d_head).
       KEEP this layer's k and v: they are its cache. Attend as in m1 (scores
       divided by sqrt(d_head), causal mask, softmax, times v), merge the heads
       back to (B, t, d), apply ``block.attn.proj``, add the residual, then
       ``x = x + block.ffn(block.ln2(x))``. Finally ``model.head(model.ln(x))``
       at the LAST position gives the logits; the argmax is the first new token.
    2. Each later step feeds only the newest token, (B, 1), at its own
       position: t + i - 1 at step i (counting from 0). In each block, append
       its k and v to THAT layer's cache (``torch.cat`` on the position axis),
       then its single query attends over all cached keys: (B, n_heads, 1, n)
       scores, no mask needed (everything cached is in its past).
    3. The last new token is appended but never fed: nothing needs its logits.
    """
    raise NotImplementedError("generate_cached: feed the prompt once, then one token per step, reusing each "
                              "layer's keys and values")


def positions_processed(prompt_len: int, max_new: int, cached: bool) -> int:
    """How many token positions pass through the model to generate ``max_new`` tokens.

    Assume everything fits in the context (no cropping). Without a cache, each
    step feeds the whole sequence so far; with one, the prompt once, then one
    position per step. Either way the last new token is never fed. A 10-token
    prompt and 20 new tokens: 390 without a cache, 29 with one. ``max_new = 0``
    feeds nothing.
    """
    raise NotImplementedError("positions_processed: sum the lengths fed at each step")


if __name__ == "__main__":
    from m2_model import TinyGPT
    from m4_generate import generate

    torch.manual_seed(42)
    model = TinyGPT(50, 64, 4, 2, 8)
    start = torch.tensor([[5, 12, 3]])
    print("generate:       ", generate(model, start, 5)[0].tolist())  # lesson: [5, 12, 3, 42, 2, 38, 35, 35]
    print("generate_cached:", generate_cached(model, start, 5)[0].tolist())  # the same tokens
    print(positions_processed(10, 20, cached=False), positions_processed(10, 20, cached=True))  # 390 29

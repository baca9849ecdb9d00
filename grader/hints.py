"""Plain-words hints for the errors students' code raises most often."""

from __future__ import annotations

import re

HINTS = [
    (
        r"size of tensor a \(\d+\) must match the size of tensor b \(\d+\)",
        "two shapes disagree; if one of them has a fixed size (a mask, or the whole table of position "
        "embeddings), slice it to the input's length T (mask[:T, :T], pos(arange(T)))",
    ),
    (
        r"Sizes of tensors must match except in dimension",
        "torch.cat joins tensors that must agree in every other dimension; if one of them is a cache, is it "
        "this call's own (a default argument such as cache=[] is made once and kept between calls, and so is a cache "
        "kept on the model)?",
    ),
    # .view fails on a non-contiguous tensor (a slice of qkv's output, a transpose). Where the view also meant to
    # move an axis, .reshape alone runs and is silently wrong: say how axes move.
    (
        r"view size is not compatible with input tensor",
        "a view needs the tensor's memory in order: call .contiguous() first (or use .reshape). A view or reshape "
        "never moves an axis, though: (B, T, d) becomes (B, n_heads, T, d_head) by view(B, T, n_heads, d_head), "
        "then transpose(1, 2), and comes back by transpose(1, 2), then reshape(B, T, d)",
    ),
    (r"index out of range in self", "a token id or a position is outside its embedding table"),
    (r"mat1 and mat2 shapes cannot be multiplied", "a Linear layer got an input of the wrong width"),
    (
        r"Expected all tensors to be on the same device|is not on the expected device",
        "create new tensors on the input's device (device=x.device)",
    ),
    # Before the general signature hint: the call is the student's, the CausalSelfAttention often the grader's.
    (
        r"CausalSelfAttention\.forward\(\) (got an unexpected keyword argument|takes \d+ positional arguments? "
        r"but \d+ (were|was) given)",
        "m2 is graded with the grader's own m1, not yours, and its CausalSelfAttention.forward(x) takes only x, as "
        "the contract's signature says: a block that passes more (layer_past, a mask, a cache) fails there even "
        "where your own m1 accepts it, so call self.attn with x alone",
    ),
    (
        r"takes \d+ positional arguments? but \d+ (were|was) given|missing \d+ required positional argument|"
        r"got an unexpected keyword argument",
        "check the signature against the exercise's docstring",
    ),
]


def hint_for(message: str) -> str | None:
    return next((hint for pattern, hint in HINTS if re.search(pattern, message)), None)

"""Check yourself: the answers (reference), with the working in comments where there is any."""

# The causal mask ---------------------------------------------------------------

# Q1. In the 8 x 8 causal mask, torch.tril(torch.ones(8, 8)), how many entries are 1?
Q1 = 36  # 8 * 9 / 2: the lower triangle and the diagonal

# Q2. With that mask, the token at position 5 (counting from 0) may attend to how many positions?
Q2 = 6

# Q3. Are the blocked (0) entries of the causal mask "above" or "below" the diagonal?
Q3 = "above"

# Q4. Is the mask applied to the attention scores "before" or "after" the softmax?
Q4 = "before"

# Parameter counts ---------------------------------------------------------------

# Q5. How many parameters does one GPTBlock with d = 128 have (LayerNorms, attention, 4x feed-forward)?
Q5 = 198_272  # 12 d^2 + 13 d

# Q6. How many parameters does weight tying save in GPT-2 medium (vocabulary 50,257, d = 1024)?
Q6 = 51_463_168  # 50,257 x 1024

# Chinchilla (C = 6 N D, D = 20 N) ---------------------------------------------

# Q7. What is the compute-optimal parameter count N for a budget of C = 1.2e22 FLOPs?
Q7 = 1e10  # sqrt(C / 120)

# Q8. How many training tokens does the 20-tokens-per-parameter rule give GPT-2 small's
#     124,439,808 parameters?
Q8 = 2_488_796_160  # 20 N

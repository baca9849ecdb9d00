"""Check yourself: eight short questions on the causal mask, parameter counts and Chinchilla.

Replace each ``None`` with your answer: a number (``42``, ``2.5e9``; a
string such as ``"1,234"`` works too) or a word (``"yes"``). Numbers are
graded with a small relative tolerance, words on what they say: case,
punctuation and the question's own words around your answer do not matter.
Work them out on paper first, then check with your code.

    grade check -m quiz
"""

# The causal mask ---------------------------------------------------------------

# Q1. In the 8 x 8 causal mask, torch.tril(torch.ones(8, 8)), how many entries are 1?
Q1 = None

# Q2. With that mask, the token at position 5 (counting from 0) may attend to how many positions?
Q2 = None

# Q3. Are the blocked (0) entries of the causal mask "above" or "below" the diagonal?
Q3 = None

# Q4. Is the mask applied to the attention scores "before" or "after" the softmax?
Q4 = None

# Parameter counts ---------------------------------------------------------------

# Q5. How many parameters does one GPTBlock with d = 128 have (LayerNorms, attention, 4x feed-forward)?
Q5 = None

# Q6. How many parameters does weight tying save in GPT-2 medium (vocabulary 50,257, d = 1024)?
Q6 = None

# Chinchilla (C = 6 N D, D = 20 N) ---------------------------------------------

# Q7. What is the compute-optimal parameter count N for a budget of C = 1.2e22 FLOPs?
Q7 = None

# Q8. How many training tokens does the 20-tokens-per-parameter rule give GPT-2 small's
#     124,439,808 parameters?
Q8 = None

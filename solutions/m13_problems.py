"""Contest problems: four problems in the shape of a USAAIO round, each in parts on one stem, and a NumPy part.

Each problem sets one situation (a head size, some logits, a model and its cache, a compute budget) and asks
for it step by step: the numbers of a derivation are its checkpoints, graded one by one, so a slip in a late
step costs that step only. Work each on paper first; code may check you.

- Problem A, attention's scale and cost: the variance of a score q . k, after the 1/sqrt(d_k) scale, why
  the scale matters, the FLOPs of Q K^T, and how they grow with the context.
- Problem B, training a GPT: the gradient of softmax cross-entropy with respect to the logits on given
  numbers, and the compute of a training run (about 6 FLOPs per parameter per token).
- Problem C, generation and its cache: the bytes a KV cache holds, and the positions processed without
  and with it.
- Problem D, scaling laws: Chinchilla's compute-optimal model for a budget, and a judgement on GPT-3.

Replace each ``None`` with your answer: a letter (``"a"``) for a multiple choice, or a number (``42``,
``-0.25``, ``2.5e9``, or a string such as ``"1,234"``). Numbers are marked within 1% (the position counts of
problem C exactly), so give three significant figures at least.

The code part, under a rule: ``softmax_xent_grad(logits, targets)`` in **NumPy only**. ``logits`` is a
``(B, V)`` float array, ``targets`` a ``(B,)`` int array of class indices. Return ``(loss, grad)``: ``loss``
the mean over the B rows of ``-log softmax(logits[i])[targets[i]]`` (a float), and ``grad`` the gradient
of that mean with respect to ``logits``, a ``(B, V)`` float64 array (problem B, for a whole batch).
It must not overflow for large logits (1000 and more): subtract each row's maximum first.
The rule: no torch in this function or the helpers it calls. Importing torch there, calling a torch
function while it runs, or returning a torch tensor breaks it, and a broken rule scores the code part 0.

Check yourself from the folder that holds this file::

    grade check -m problems
    python m13_problems.py      # prints your softmax_xent_grad on a small example
"""

import numpy as np


def softmax_xent_grad(logits: np.ndarray, targets: np.ndarray) -> tuple[float, np.ndarray]:
    """The mean cross-entropy of ``logits`` (B, V) against ``targets`` (B,), and its gradient with respect to
    ``logits``, a (B, V) float64 array; NumPy only."""
    z = np.asarray(logits, dtype=np.float64)
    rows = np.arange(z.shape[0])
    t = np.asarray(targets)
    shifted = z - z.max(axis=1, keepdims=True)  # exp of the largest is exp(0): no overflow at any size
    log_p = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    loss = -log_p[rows, t].mean()
    grad = np.exp(log_p)
    grad[rows, t] -= 1.0  # p - y, y one-hot at the target
    return float(loss), grad / z.shape[0]  # the loss is a mean over the rows, and so is its gradient


# Check yourself --------------------------------------------------------------------------------

# Problem A: attention's scale and cost

# Q_A1. A query q and a key k each have d_k = 64 independent entries of mean 0 and variance 1. What is the
#   variance of the score q . k (before any scaling)?
Q_A1 = 64

# Q_A2. The same scores are divided by sqrt(d_k), as in scaled dot-product attention (d_k = 64). What is their
#   variance now?
Q_A2 = 1

# Q_A3. Why does scaled dot-product attention divide the scores by sqrt(d_k)?
#   (a) the scale makes the attention causal, so that no position can read the scores of later tokens
#   (b) the scale makes each row of attention weights sum to 1, as a probability distribution must
#   (c) unscaled scores spread as sqrt(d_k), so their softmax turns nearly one-hot, with almost no gradient
#   (d) dividing by sqrt(d_k) halves the memory that the T x T score matrix takes during training
Q_A3 = "c"

# Q_A4. One head computes the whole T x T score matrix Q K^T for T = 1,024 tokens and d_k = 64 (before the
#   mask). How many FLOPs is that, counting a multiply and an add as 2 FLOPs?
Q_A4 = 134_217_728

# Q_A5. The context grows from T = 1,024 to 2 x 1,024 tokens (d_k = 64 stays). By how many times do the FLOPs
#   of Q K^T, and the memory of the score matrix, grow?
Q_A5 = 4

# Problem B: training a GPT

# Q_B1. Logits z = [2.0, 1.0, 0.1] over 3 classes, the target is class 0 (counting from 0), and the loss is
#   the cross-entropy -log softmax(z)[0]. What is dL/dz_0, the gradient at the target's logit (3 significant
#   figures)?
Q_B1 = -0.341

# Q_B2. Logits z = [2.0, 1.0, 0.1] over 3 classes, the target is class 0 (counting from 0), and the loss is
#   the cross-entropy -log softmax(z)[0]. What is dL/dz_2, the gradient at the logit of class 2 (3 significant
#   figures)?
Q_B2 = 0.0986

# Q_B3. A GPT of N = 1.24e8 parameters is trained on D = 1e10 tokens. About how many FLOPs does the training
#   take (forward and backward passes)?
Q_B3 = 7.44e18

# Q_B4. Where does the 6 of "6 N FLOPs per token" come from?
#   (a) a small GPT has 6 layers, and each layer touches all N parameters once per token
#   (b) 2 FLOPs per parameter forward (multiply, add), 4 backward (gradients of activations and weights)
#   (c) the forward pass, the backward pass and the optimizer step cost 2 FLOPs each per token
#   (d) Adam keeps 6 numbers for each parameter, and each of them is updated once per token
Q_B4 = "b"

# Problem C: generation and its cache

# Q_C1. A GPT with 12 layers of width d_model = 768 (multi-head attention) generates with a KV cache in
#   float16. How many bytes does the cache hold for one sequence of 1,024 tokens?
Q_C1 = 37_748_736

# Q_C2. The same model generates 20 new tokens greedily from a prompt of 10 tokens, the context never cropped.
#   Without a cache each step runs the model on the whole context so far. How many positions does it process
#   in all?
Q_C2 = 390

# Q_C3. With a KV cache, the first step processes the prompt's 10 positions and every later step only the
#   newest token. How many positions does generating the 20 tokens process in all?
Q_C3 = 29

# Problem D: scaling laws

# Q_D1. A compute budget of C = 5.88e23 FLOPs. With C = 6 N D and Chinchilla's D = 20 N, how many parameters N
#   should the model have?
Q_D1 = 7e10

# Q_D2. For the same budget, C = 5.88e23 FLOPs, how many training tokens D?
Q_D2 = 1.4e12

# Q_D3. GPT-3 has 175e9 parameters and was trained on 300e9 tokens. By Chinchilla's rule, which holds?
#   (a) under-trained: 1.7 tokens per parameter, far below 20; a smaller model on more tokens would do better
#   (b) over-trained: at 300e9 tokens it saw far more data than a model of its size could make use of
#   (c) compute-optimal: for its training budget, 175e9 parameters is what Chinchilla's rule prescribes
#   (d) nothing can be said: the rule needs the model's final training loss, not only its N and D
Q_D3 = "a"


if __name__ == "__main__":
    logits = np.array([[2.0, 1.0, 0.1], [0.0, 0.0, 0.0]])
    targets = np.array([0, 2])
    loss, grad = softmax_xent_grad(logits, targets)
    print("loss:", round(loss, 4))  # (0.4170 + 1.0986) / 2 = 0.7578
    print("grad:", np.round(grad, 4).tolist())
    print("rows of grad sum to 0:", np.allclose(grad.sum(axis=1), 0))

"""Variants for `problems` (m13_problems.py): the usual wrong checkpoints and NumPy bugs, torch where NumPy is the
rule, and right answers written differently."""

from helpers import bug, ok

M13 = "m13_problems.py"
SHIFT = "    shifted = z - z.max(axis=1, keepdims=True)"
TARGET = "    grad[rows, t] -= 1.0"
RETURN = "    return float(loss), grad / z.shape[0]"
BODY_START = "    z = np.asarray(logits, dtype=np.float64)\n"
# torch where the rule says NumPy: the same numbers, so only the rule can cost the points
TORCH_BODY = """    import torch

    z = torch.as_tensor(logits, dtype=torch.float64)
    log_p = torch.log_softmax(z, dim=1)
    rows = torch.arange(z.shape[0])
    t = torch.as_tensor(targets)
    grad = log_p.exp()
    grad[rows, t] -= 1.0
    return float(-log_p[rows, t].mean()), (grad / z.shape[0]).numpy()
    z = np.asarray(logits, dtype=np.float64)
"""
CODE_POINTS = 5  # the code part: both of softmax_xent_grad's checks

BUGGY = [
    # problem A
    bug("variance-is-sqrt-dk", "problems", "that is the score's standard deviation", M13, ("Q_A1 = 64", "Q_A1 = 8")),
    bug("variance-without-the-sum", "problems", "variances add", M13, ("Q_A1 = 64", "Q_A1 = 1")),
    bug("scale-divides-the-variance-once", "problems", "not by c", M13, ("Q_A2 = 1", "Q_A2 = 8")),
    bug(
        "score-flops-without-the-add",
        "problems",
        "a multiply and an add are 2 FLOPs",
        M13,
        ("Q_A4 = 134_217_728", "Q_A4 = 67_108_864"),
    ),
    bug("attention-cost-linear-in-t", "problems", "both of its sides grow", M13, ("Q_A5 = 4", "Q_A5 = 2")),
    bug("scale-makes-it-causal", "problems", "the mask makes attention causal", M13, ('Q_A3 = "c"', 'Q_A3 = "a"')),
    # problem B
    bug("gradient-y-minus-p", "problems", "the gradient is p - y, not y - p", M13, ("Q_B1 = -0.341", "Q_B1 = 0.341")),
    bug("gradient-without-the-target", "problems", "at the target y = 1", M13, ("Q_B1 = -0.341", "Q_B1 = 0.659")),
    bug(
        "gradient-other-class-minus-one",
        "problems",
        "at another class it is 0",
        M13,
        ("Q_B2 = 0.0986", "Q_B2 = -0.901"),
    ),
    bug("two-n-flops-per-token", "problems", "the forward pass alone", M13, ("Q_B3 = 7.44e18", "Q_B3 = 2.48e18")),
    bug("six-n-without-the-tokens", "problems", "multiply by the D tokens", M13, ("Q_B3 = 7.44e18", "Q_B3 = 7.44e8")),
    bug("six-is-the-optimizer", "problems", "the optimizer's step", M13, ('Q_B4 = "b"', 'Q_B4 = "c"')),
    # problem C
    bug(
        "cache-without-k-and-v", "problems", "the factor 2 is missing", M13, ("Q_C1 = 37_748_736", "Q_C1 = 18_874_368")
    ),
    bug(
        "cache-of-one-layer",
        "problems",
        "every layer keeps its own cache",
        M13,
        ("Q_C1 = 37_748_736", "Q_C1 = 3_145_728"),
    ),
    bug("cache-in-bits", "problems", "that counts bits", M13, ("Q_C1 = 37_748_736", "Q_C1 = 301_989_888")),
    bug(
        "no-cache-context-fixed",
        "problems",
        "the context grows by one token each step",
        M13,
        ("Q_C2 = 390", "Q_C2 = 200"),
    ),
    bug("cache-feeds-the-last-token", "problems", "never fed back", M13, ("Q_C3 = 29", "Q_C3 = 30")),
    # problem D
    bug("chinchilla-without-20-tokens", "problems", "C = 6 N x 20 N = 120 N^2", M13, ("Q_D1 = 7e10", "Q_D1 = 3.13e11")),
    bug("chinchilla-no-square-root", "problems", "take the square root", M13, ("Q_D1 = 7e10", "Q_D1 = 4.9e21")),
    bug("chinchilla-tokens-are-n", "problems", "that is N", M13, ("Q_D2 = 1.4e12", "Q_D2 = 7e10")),
    bug(
        "gpt3-compute-optimal",
        "problems",
        "compute-optimal is about 20 tokens per parameter",
        M13,
        ('Q_D3 = "a"', 'Q_D3 = "c"'),
    ),
    # the NumPy part
    bug(
        "code-y-minus-p", "problems", "the sign is flipped", M13, (RETURN, "    return float(loss), -grad / z.shape[0]")
    ),
    bug("code-sum-for-the-mean", "problems", "not the sum's p - y", M13, (RETURN, "    return float(loss), grad")),
    bug("code-target-not-subtracted", "problems", "subtract 1 there", M13, (TARGET, "    pass")),
    bug("code-no-max-subtracted", "problems", "exp(1000) overflows", M13, (SHIFT, "    shifted = z")),
    bug(
        "code-uses-torch",
        "problems",
        "rule broken (NumPy only, no torch)",
        M13,
        (BODY_START, TORCH_BODY),
        lost=CODE_POINTS,
    ),
    bug(
        "code-returns-a-torch-tensor",
        "problems",
        "softmax_xent_grad returned a torch tensor",
        M13,
        ("import numpy as np\n", 'import numpy as np\n\nas_tensor = __import__("torch").from_numpy\n'),
        (RETURN, "    return float(loss), as_tensor(grad / z.shape[0])"),
        lost=CODE_POINTS,
    ),
]

CORRECT = [
    ok(
        "one-hot-and-logsumexp",
        {
            M13: [
                (
                    TARGET,
                    "    grad = grad - np.eye(z.shape[1])[t]",
                ),
                (RETURN, "    return np.float64(loss), grad / len(t)"),
            ]
        },
    ),
    ok(
        "answers-written-otherwise",
        {
            M13: [
                ('Q_A3 = "c"', 'Q_A3 = "C"'),
                ("Q_A4 = 134_217_728", "Q_A4 = 2 * 1024**2 * 64"),
                ("Q_B1 = -0.341", 'Q_B1 = "-0.34100"'),
                ("Q_B3 = 7.44e18", 'Q_B3 = "7.44e18"'),
                ("Q_C1 = 37_748_736", 'Q_C1 = "37,748,736"'),
                ("Q_D1 = 7e10", "Q_D1 = (5.88e23 / 120) ** 0.5"),
                ("Q_D2 = 1.4e12", "Q_D2 = np.float64(1.4e12)"),
            ]
        },
    ),
]

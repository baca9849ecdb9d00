"""Public checks for `scaling`: the lesson's numbers."""

from grader.suites import checks


def test_public_tinygpt_count(scaling):
    """(public) the lesson's TinyGPT by formula: gpt_parameter_count(50, 64, 2, 8) gives 107,008"""
    checks.equal(scaling.call("gpt_parameter_count", 50, 64, 2, 8), 107_008, "gpt_parameter_count(50, 64, 2, 8)")


def test_public_gpt2_small(scaling):
    """(public) GPT-2 small, tied: 124,439,808 parameters"""
    layers, d, _ = scaling.call("gpt2_config", "small")
    checks.equal(
        scaling.call("gpt_parameter_count", 50257, d, layers, 1024, tied=True),
        124_439_808,
        "GPT-2 small's tied parameter count",
    )


def test_public_chinchilla(scaling):
    """(public) chinchilla_optimal(5.88e23) is about (70e9, 1.4e12)"""
    n, tokens = scaling.call("chinchilla_optimal", 5.88e23)
    checks.relative_close(checks.number(n, "N"), 70e9, "N", 1e-3)
    checks.relative_close(checks.number(tokens, "D"), 1.4e12, "D", 1e-3)

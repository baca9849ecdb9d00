"""Public check for the lesson group: your four files together (the milestones' public checks, end to end)."""

from grader.suites import checks


def test_public_files_work_together(lesson):
    """(public) your TinyGPT, built from your attention, has the lesson's 107,008 parameters"""
    model = lesson.new("TinyGPT", 50, 64, 4, 2, 8, module="m2_model")
    checks.equal(lesson.call("count_parameters", model, module="m2_model"), 107_008, "the parameter count")

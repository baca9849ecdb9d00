"""Variants for the `quiz` (quiz.py): common wrong answers, and right ones written differently."""

from helpers import bug, ok

QUIZ = "quiz.py"

BUGGY = [
    bug("mask-without-diagonal", "quiz", "strictly lower triangle", QUIZ, ("Q1 = 36", "Q1 = 28")),
    bug("mask-after-softmax", "quiz", "no longer sum to 1", QUIZ, ('Q4 = "before"', 'Q4 = "after"')),
    # a wrong direction or order said in a phrase is still wrong, with its own feedback
    bug("blocked-below-the-diagonal", "quiz", "earlier positions", QUIZ, ('Q3 = "above"', 'Q3 = "below the diagonal"')),
    bug("mask-after-the-softmax", "quiz", "no longer sum to 1", QUIZ, ('Q4 = "before"', 'Q4 = "after the softmax"')),
    bug("block-without-biases", "quiz", "add the biases", QUIZ, ("Q5 = 198_272", "Q5 = 196_608")),
    bug("chinchilla-without-20", "quiz", "D = 20 N is missing", QUIZ, ("Q7 = 1e10", "Q7 = 4.47e10")),
    bug("not-a-number", "quiz", "should be a number", QUIZ, ("Q6 = 51_463_168", 'Q6 = "about 51 million"')),
    # every comparison with NaN is False: a NaN answer must not pass a tolerance test
    bug("nan-answer", "quiz", "should be a finite number", QUIZ, ("Q5 = 198_272", 'Q5 = float("nan")')),
]

CORRECT = [
    ok(
        "quiz-answers-as-strings-and-approximations",
        {
            QUIZ: [
                ('Q3 = "above"', 'Q3 = "Above the diagonal"'),
                ("Q6 = 51_463_168", 'Q6 = "51,463,168"'),
                ("Q7 = 1e10", "Q7 = 1.0e10 + 1e7"),
                ("Q8 = 2_488_796_160", "Q8 = 2.49e9"),
            ]
        },
    ),
    # the right direction and order in the lesson's words and in others
    ok(
        "quiz-words-as-phrases",
        {QUIZ: [('Q3 = "above"', 'Q3 = "above the main diagonal"'), ('Q4 = "before"', 'Q4 = "prior to the softmax"')]},
    ),
    ok(
        "quiz-words-as-other-phrases",
        {QUIZ: [('Q3 = "above"', 'Q3 = "upper triangular"'), ('Q4 = "before"', 'Q4 = "before softmax"')]},
    ),
    ok(
        "quiz-words-as-more-phrases",
        {QUIZ: [('Q3 = "above"', 'Q3 = "strictly upper triangle"'), ('Q4 = "before"', 'Q4 = "ahead of the softmax"')]},
    ),
]

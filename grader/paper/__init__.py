"""Contest-shaped papers: a paper file (parts, points, rules, a time limit), a paper notebook's sitting (its
parts and its student's numbers) and rendering a student's notebook. A timed practice session on a paper is
grader/practice/, above this package and the contest's; a student's numbers are grader/variants.py's."""

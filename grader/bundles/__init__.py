"""What the kit hands to other systems: a Gradescope autograder, a student release, an nbgrader course."""

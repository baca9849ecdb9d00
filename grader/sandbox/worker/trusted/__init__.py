"""The grader's own earlier milestones, sent as source to the workers that grade later ones.

Never imported: ``grader.sandbox.session.trusted_source`` reads ``<milestone>.py`` here. Hidden from
students: a student release drops this whole folder (``grader/bundles/release.py``).
"""

"""The public checks: what a student release runs. The lesson's own numbers and basic shapes, nothing hidden."""

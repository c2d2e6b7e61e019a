"""Placeholder, being written."""
MODES = ("recurrent", "parallel", "chunk", "assoc")
def linear_recurrence(*a, **k): raise NotImplementedError

"""Trace in, things for people out: head summaries and rollout, subword merging, export,
the step-by-step walk-through, and the small numeric demos of the concept pages."""

"""Prompt-cache warming: request traces, the replay of a trace under a warming policy through
the one cache model, the policies themselves, the offline optimum they are measured against,
and the keeper that keeps live Sessions warm through `session.generate(warming=True)`."""

"""Shared fixtures of the reliability suite (fault matrix, soak, fuzz, crash, concurrency).

Each module keeps its own fixtures where it can; only what several modules share goes here.
"""

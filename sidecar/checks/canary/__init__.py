"""The canary verdict: a new version against the one it replaces, from Triton's statistics and from events."""

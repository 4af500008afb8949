"""The model probe: a known request per model over Triton's API, its answer checked (docs/actions.md)."""

"""The tracing governor: keeps Triton's trace rate within what the sidecar and Triton can afford."""

"""Statistics shared by every check: two-sample tests and ECDFs, the KS distribution, sketches and bounded windows."""

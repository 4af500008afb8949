"""The batching advisor: dynamic batching settings against the batch sizes and queue time Triton reports."""

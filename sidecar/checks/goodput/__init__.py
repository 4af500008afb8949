"""The goodput check: the share of LLM requests meeting every configured SLO, with burn-rate alerts."""

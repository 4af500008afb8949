"""Business-metric checks (a mean or quantile of an event field against its baseline)."""

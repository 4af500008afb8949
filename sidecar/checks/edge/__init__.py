"""Edge checks: the cache hit-ratio SLA, the p99.9 tail of edge latency and purges that did not take."""

"""Edge sources: CDN and edge-cache access logs, tailed from JSON Lines files or pushed to ``POST /v1/edge``."""

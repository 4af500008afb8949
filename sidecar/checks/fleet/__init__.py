"""Fleet bins: per-sidecar counters of current values in bins frozen at each drift reference's quantiles, so a
rule engine (Prometheus, vmalert) can merge drift across replicas (docs/fleet.md)."""

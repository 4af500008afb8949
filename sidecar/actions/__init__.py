"""Actions: a layer above the checks that takes their findings and acts through injected clients (Triton's
model control, NVML, a webhook), dry-run by default and guarded (docs/actions.md). Checks never act; actions
never decide: a finding is the decision, the configured trigger maps it to a step."""

"""Diagnoses: what is wrong with the Triton deployment around the sidecar, and what to do about it.

``rules`` holds the verdicts as pure functions over two probes of Triton (``observe``); ``runner`` is the
check that probes on an interval, evaluates the rules and turns each verdict into a finding of kind
``diagnosis``; ``doctor`` runs the same rules once for ``sidecar doctor``.
"""

"""Grafana dashboards (grafanalib) and provisioning files for the sidecar, generated as code.

``python -m dashboards.generate --out dashboards`` (or ``sidecar dashboards``) writes them; ``--check`` fails when
the committed files are stale. The modules: ``common`` (variables, targets, layout), one module per dashboard
(``serving``, ``gpu``, ``drift``, ``business``, ``health``), ``generate`` and ``configref`` (docs/configuration.md).
"""

"""Exporters: everything that ships data out of the sidecar (Alertmanager, audit events to SQLite and
Elasticsearch), sharing one bounded, retrying sender (``exporters.sender``)."""

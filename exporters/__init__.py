"""Exporters: everything that ships data out of the sidecar (alert notices to Alertmanager, audit events to
SQLite and Elasticsearch, spans to an OTLP endpoint). Each delivers through the one retry loop
(``exporters.sender``, over a queue from ``exporters.queues`` or the durable ``exporters.outbox``), counts
through ``exporters.telemetry`` and authenticates through ``exporters.httpauth``; see docs/exporters.md."""

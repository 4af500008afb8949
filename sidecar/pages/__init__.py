"""Server-rendered pages for on-call: ``/`` (status), ``/alerts``, ``/traces`` and ``/traces/{trace_id}``.

Every page is a Jinja2 template under ``templates/`` rendered with autoescape on, so a name a client controls
(span, model, label, change text) is always text, never markup. CSS is served from ``static/``: no CDN, so the
pages work with no internet.
"""

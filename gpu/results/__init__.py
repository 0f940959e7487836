"""The results layer: what happens to measured runs, on CPU alone (no device, no worker, no Streamlit).

``store`` (SQLite or PostgreSQL), ``catalog`` (stored and bundled runs), ``imports`` and ``runfiles`` (files in and
out, their manifests), ``compare`` (verdicts beyond within-run and run-to-run noise) and ``report`` (the review
report). Never imports ``gpu.device`` or ``gpu.service``.
"""

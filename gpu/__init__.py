"""PinPoint's GPU side, in layers; a module imports only from its own layer or the ones below it
(tests/test_layers.py checks it):

=============  ====================================================================================
layer          what
=============  ====================================================================================
core           stats, units, text, errors, schema, overlap and occupancy arithmetic
device         CUDA context and compilation, memory ledger, timing, telemetry, limits, libcuda binding
experiments    one declaration per experiment over one sweep harness; the registry of them all
results        store, catalog, imports, compare, report (CPU only)
service        worker process, client, messages, backends (live and replay)
present        charts, headlines, takeaways, claims, talks (CPU only)
bench          the headless runner, ``python -m gpu.bench``
=============  ====================================================================================

Nothing in this package imports Streamlit. PyCUDA is imported only inside the worker process (``gpu.device``
builds the context), so every other module works on a machine without a GPU; ``results`` and ``present`` never
import ``device`` or ``service``.
"""

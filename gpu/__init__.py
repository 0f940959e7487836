"""PinPoint's GPU side, in layers; a module imports only from its own layer or the ones it sits on
(tests/test_layers.py checks it): core ← device; core ← experiments; device + experiments ← sweeps ← service ←
fleet; experiments ← results ← present, service, fleet; bench on top.

=============  ====================================================================================
layer          what
=============  ====================================================================================
core           stats, units, text, errors, schema, overlap and occupancy arithmetic
device         CUDA context and compilation, memory ledger, timing, telemetry, limits, libcuda binding
experiments    one package per experiment, experiments/<name>/: its declaration (axes, labels, checks; no device
               code), its sweep.py (sweeps layer), its kernels and its view.py (present layer); the registry
sweeps         the one sweep harness every experiment's sweep.py measures over (worker only)
results        store, catalog, imports, compare, report (CPU only)
service        worker process, client, messages, backends (live and replay)
fleet          one suite over several GPUs (Dask)
present        shared charts, headlines, takeaways, claims, talks (CPU only); each experiment's view.py
bench          the headless runner, ``python -m gpu.bench``
=============  ====================================================================================

Nothing in this package imports Streamlit. PyCUDA is imported only inside the worker process (``gpu.device``
builds the context), so every other module works on a machine without a GPU; ``experiments``, ``results`` and
``present`` never import ``device``, ``sweeps`` (an experiment's sweep.py included) or ``service``
(tests/test_import_purity.py loads them in a fresh interpreter and checks that nothing of ``device``, ``sweeps`` or
PyCUDA came with them).
"""

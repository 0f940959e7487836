"""The results layer: what happens to measured runs, on CPU alone (no device, no worker, no Streamlit), in rooms.

``persistence`` (the runs store in SQLite or PostgreSQL: engine, migrations, the runs repository, changes, leases,
the audit trail), ``exchange`` (runs as files between machines: imports and their contract, another store's SQLite
file, run files and their manifests, the runner's output, the catalog of stored and bundled runs) and ``analysis``
(Compare's verdicts and bands, the CI gate, the review report, a point's conditions in words, is-this-normal). The
page analyses sit beside their views: the Peers page's in the peers experiment's package (``gpu.experiments.peers``:
``matrix``, ``cost``), the Fleet and Roofline pages' in ``gpu.present``. Never imports ``gpu.device``,
``gpu.sweeps`` or ``gpu.service``.
"""

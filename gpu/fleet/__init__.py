"""Fleets: a suite measured on every GPU of a Dask cluster, each (GPU, experiment) run stored as it finishes.

``cluster`` opens the cluster (a LocalCluster with one worker per visible GPU, dask-jobqueue's SLURMCluster with one
job per node, or a running scheduler's address); ``task`` is what a Dask worker runs (PinPoint's own GPU worker
process, on the one GPU that worker owns); ``run`` places one task per GPU and experiment, follows them, stores each
finished run, reports failed GPUs with their reason and resumes a fleet id. The scheduling is Dask's, except for
node runs (a suite's ``gpus = "node"``: all GPUs of a node together), which ``run`` phases per node after the node's
one-GPU runs (``nodes``); ``progress`` is the terminal's view of a fleet and its summary table; ``resume``
checks that a resumed fleet id measures what it measured before.

This layer sits above ``service`` (it drives the same worker process the app uses) and below ``present``.
"""

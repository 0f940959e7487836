"""The service layer: how the app reaches the GPU. ``worker`` (the process that owns the CUDA context and runs
experiments), ``client`` (jobs, progress, cancel, from the app's side), ``messages`` (what the two send each other)
and ``backends`` (live through the worker, or replay of recorded runs: one interface). ``locks`` and ``host_locks``:
one job at a time on a GPU, within the process and across the machine's processes.
"""

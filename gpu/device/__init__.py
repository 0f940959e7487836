"""The device layer: everything that talks to the GPU, used only inside the worker process.

``context`` (the CUDA context, kernel compilation once per process, the job's allocation scope), ``memory`` (the
allocation ledger), ``timing`` (event timer, stream hold, kernel timer: the one home of timing), ``telemetry``
(NVML), ``limits`` (device and host limits, git commit), ``libcuda`` (the one ctypes binding to the driver, turning
CUresult codes into typed errors) and ``driver_occupancy``. PyCUDA is imported here (lazily) and in the worker only.
"""

"""PinPoint's GPU layer: experiments, timing, the worker process and the backends.

Nothing in this package imports Streamlit. PyCUDA is imported only inside the worker process
(``gpu.context`` builds the context), so every other module works on a machine without a GPU.
"""

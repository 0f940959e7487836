"""Plotly figures, one module per page family: ``transfers`` (and the shared axes and stage sizing), ``kernels``,
``memory`` and ``streams``."""

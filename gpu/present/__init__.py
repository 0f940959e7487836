"""The presentation layer: figures and words from measured rows, without Streamlit. ``charts`` (Plotly figures per
page), ``headlines`` and ``takeaways`` (the lines under and above a chart), ``claims`` and ``talks`` (the built-in
talk). Never imports ``gpu.device`` or ``gpu.service``.
"""

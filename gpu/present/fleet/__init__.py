"""The Fleet page's analyses, beside its figures (``gpu.present.charts.fleet``, ``gpu.present.charts.fleet_links``):
the boards side by side (``boards``), what a fleet's runs were asked for (``plan``) and each node's links against
the fleet (``links``). No Streamlit, no CUDA."""

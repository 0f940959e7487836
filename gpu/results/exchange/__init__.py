"""Runs as files between machines: reading runner files into the store (``imports``, through the import contract of
``contract``; another store's SQLite file through ``sqlite_store``), run files, their manifests and safe CSV
(``runfiles``), the runner's output (``run_output``) and every run PinPoint can show, stored or bundled
(``catalog``). No Streamlit, no CUDA."""

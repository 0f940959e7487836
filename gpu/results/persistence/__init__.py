"""The runs store's persistence: the database engine (``database``), its tables and migrations (``migrations``), the
runs repository (``store``), the changes after a save and their audit rows (``changes``), fleet leases (``leases``),
the trail's export (``audit``), PostgreSQL roles (``db_roles``) and the runner's commands over them
(``admin_commands``). No Streamlit, no CUDA."""

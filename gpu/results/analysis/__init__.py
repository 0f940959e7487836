"""What runs say, judged: Compare's verdicts (``compare``), its history and run-to-run bands (``bands``), the point
vocabulary (``points``), default pairs (``pairing``), the CI gate (``check``), the review report (``report``), a
point's conditions in words (``causes``) and is-this-normal (``normal``). No Streamlit, no CUDA."""

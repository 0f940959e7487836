"""The bottom layer: arithmetic and vocabulary that every other layer shares, with no GPU, store or page in sight.

``stats`` (sampling loop, summaries, verdict statistics), ``units`` (sizes), ``text`` (one style for words and
numbers), ``errors`` (one hierarchy, rooted at ``PinPointError``), ``schema`` (the results table), ``overlap``
(stream-overlap bounds and the best pipeline) and ``occupancy`` (the occupancy calculator). Imports nothing above.
"""

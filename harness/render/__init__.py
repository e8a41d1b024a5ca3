"""Renderers: the records of a results folder as results/COMPATIBILITY.md (table) and
results/index.html (page, with its static files in static/), and the statement of what works on
each hardware that both show (support). They only render: they read evidence and the catalog."""

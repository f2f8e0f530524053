"""Views of a program for people: listings, summaries, diffs and pictures.

`summary` (feeds, parameters, loss candidates, backward?, op types),
`paddle_text` (Paddle's own `print(program)` listing), `diff` (programs
compared op by op), `graph` (what a picture shows), `dot` (Graphviz) and
`html` (a self-contained page). Views read programs; they change nothing.
May import: `pybackward.base`, `pybackward.legacy`, `pybackward.pir`, `pybackward.ops` (facts only).
"""

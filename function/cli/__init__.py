"""Command lines: the pattern every package's `python -m` uses (base), and the engine's own commands,
synth, speakers and verify (serve and invoke live in function.local)."""

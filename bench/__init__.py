"""Benchmarks of our onnxruntime engine beside upstream CosyVoice in PyTorch (`python -m bench`).

Nothing is imported here: timed child processes start with `python -m bench.child`, and this package's
import is part of what they pay before their first mark.
"""

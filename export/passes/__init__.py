"""Passes over exported ONNX graphs, in the order export.build runs them on an artifact's copy: quantize
(int8/int4 weights and activations), optimize (onnxruntime's fusions, saved as standard and contrib
operators), tabulate (an int8 elementwise region as a lookup table), split_products (a weight product cut
by a Split as one product per part); rewrite is the graph rebuild the last two share."""

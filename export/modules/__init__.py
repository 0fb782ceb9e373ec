"""Export-friendly torch modules: upstream v1's computation with upstream's parameter names, written so
torch.onnx traces them into the graphs function.cosyvoice.contract names."""

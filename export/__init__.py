"""CosyVoice-300M model directory → an artifact the runtime (function/) loads, in the export's steps:

    config, checkpoints   cosyvoice.yaml and the .pt files read (assets: whisper's tokenizer files)
    modules/              export-friendly torch modules with upstream's parameter names
    graphs/               each part (llm, flow, vocoder, the front end's models) to its ONNX graphs
    passes/               quantize, optimize, tabulate, split_products on an artifact's copy
    writer                the graphs and one page-aligned weights file, atomically, with the manifest
    build                 the one export path through the steps; cli, the command; fake, random models

torch is imported here and only here; the contract both sides agree on lives in function.cosyvoice.
"""

"""The speech engine: CosyVoice-300M's pipeline on onnxruntime, text → speech tokens → mel → waveform.

  artifact, contract, params, graphs   the exported model: manifest, ONNX names and shapes, one session
                                       per graph bound by name
  threads                              how the engine's CPUs are split between its stages' sessions
  frontend/                            text: normalisation, splitting, whisper's BPE
  features, prompt                     prompt audio: mel and fbank features, speech tokens, speaker
  llm, sampling                        speech tokens from text (prefill, KV-cached decode, RAS sampling)
  flow, vocoder                        mel from speech tokens (flow matching), waveform from mel (HiFT)
  stream, run_ahead                    chunked streaming with context and seams; the LLM's own thread
  budget                               this instance's measured speed, to refuse what cannot finish
  perform                              a script (SSML's pieces) played piece by piece: pauses, speed,
                                       gain, marks timed by the samples before them
  engine                               Engine: a loaded model, requests in, chunks of audio out

Imports only function.core: no HTTP, Lambda, S3 or SQS here (tests/function/test_layout.py).
"""

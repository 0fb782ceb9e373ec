"""CosyVoice-300M text-to-speech as a serverless function: onnxruntime and numpy, no torch.

The packages, from the ground up; each imports only those above it in this list:

  core/       what the engine is driven by and every edge shares: the error shape, the frozen
              SynthesisOptions, clean text, scripts (SSML's pieces), the audio formats, the Deadline
  cosyvoice/  the speech engine: artifact and ONNX contract, text front end, LLM, flow, vocoder,
              streaming, the Engine; knows nothing of HTTP, Lambda, S3 or SQS (a test says so)
  audio/      the engine's chunks encoded into a format's bytes, resampled to the rate asked for
  markup/     SSML read into a script, and speech marks written out (Polly's lines, WebVTT, a stream)
  aws/        one cached boto3 client per service, and S3 storage
  voices/     who speaks: OpenAI's voice names, and the library of saved voices
  instance/   what one process holds: its settings, its one model, the artifact it loads, its startup record
  observe/    what an operator sees: each request's tally, the Prometheus metrics, Lambda's embedded
              metrics (EMF), the log lines
  service/    the one way through the service: wire schemas, the synthesis every edge calls, deadlines
  jobs/       long texts in S3 across invocations: the job store, the worker, the queue, SQS batches,
              the job routes
  api/        the HTTP API (FastAPI): /v1/tts, OpenAI's /v1/audio/speech, /v1/voices, API keys,
              admission, event streams
  awslambda/  the Lambda side: the handler (INIT at module scope), event shapes, the streaming runtime
  cli/        the command-line pattern and the engine's commands (synth, speakers, verify)
  local/      serving and invoking outside Lambda: the container HTTP server, the local Runtime API

`python -m function` lists the commands; the template's Handler is function.awslambda.handler.lambda_handler.
"""

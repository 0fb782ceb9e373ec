"""What every edge shares around the engine: deployment settings, the wire schemas edges translate into
options, OpenAI's voice names, the process's one model (loaded once, borrowed by requests), artifact
loading from a directory or S3, the audio encoders, S3 storage, synchronous replies, and where each edge's
deadline comes from. Imports core and cosyvoice; no edge."""

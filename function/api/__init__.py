"""The HTTP API (FastAPI, served by Mangum inside Lambda and by uvicorn in containers): /v1/tts, OpenAI's
/v1/audio/speech and its event stream, speakers, probes, and admission control ahead of synthesis."""

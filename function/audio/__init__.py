"""Audio encoding: the engine's float32 chunks → the bytes of a format (wav, pcm, flac, ogg, opus, mp3), at
the rate a request asks for."""

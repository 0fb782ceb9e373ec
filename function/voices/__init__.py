"""Who speaks: OpenAI's voice names mapped onto built-in speakers, and the library of saved voices (a
recording cloned once, then named by its id wherever a speaker is named)."""

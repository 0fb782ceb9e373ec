"""Speech markup: SSML read into a script (function.core.script), and the speech marks the engine yields
written out as Polly's JSON lines, WebVTT captions, or a stream that sends each mark before its audio."""

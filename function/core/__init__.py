"""The small core the engine and every edge share: the error shape (errors), the frozen options a
request travels as (options), what its text is cleaned to (text), a marked-up request as pieces to say
(script: text, pauses, marks), the audio formats (formats) and the deadline it must finish by (deadline).
Imports nothing else of the package."""

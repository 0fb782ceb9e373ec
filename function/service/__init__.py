"""The one way through the service: every edge translates its wire format (function.service.schema) into
options and its transport's allowances; function.service.synthesis does the rest once (saved voices, the
output, the engine call, encoding, size limits); function.service.deadlines says when each edge's time
runs out."""

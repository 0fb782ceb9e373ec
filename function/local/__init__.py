"""Local entry points: the HTTP server (serve), and the Lambda runtime loop against a local Runtime API
(invoke), which also stands in for SnapStart restores by forking."""

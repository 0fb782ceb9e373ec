"""The Lambda side: the handler (INIT at module scope, SnapStart hooks, dispatch by event shape), the
event shapes and the direct invoke (events), and the runtime that streams Function URL replies
(streaming/)."""

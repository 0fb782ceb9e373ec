"""Long texts as jobs: kept in S3 (store), worked segment by segment within each invocation's deadline
(worker), continued through SQS (queue), received as SQS batches (batch), submitted and read over HTTP
(routes, included by function.api.app)."""

"""Long texts as jobs: kept in S3 (store), split into parts (plan) spoken on many workers at once
(worker), joined once (join), announced at their end (notify), carried by SQS (queue), received as SQS
batches on Lambda (batch) or by a container's queue worker (consumer), submitted and read over HTTP
(routes, included by function.api.app)."""

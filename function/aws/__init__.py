"""The AWS services a deployment configures: one cached boto3 client per service, and S3 storage
(write-once objects, streamed multipart uploads, presigned URLs)."""

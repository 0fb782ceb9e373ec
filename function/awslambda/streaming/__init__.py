"""The Lambda runtime that streams Function URL responses (`python -m function.awslambda.streaming`).

awslambdaric only posts whole responses, so Mangum's replies are buffered (6 MB, the caller waits for
the last sample). Lambda's Runtime API has a streaming response mode for runtimes other than Node.js; this
package is a small runtime client that speaks it, in place of awslambdaric, for the whole function:

  client.py        the Runtime API wire: /invocation/next, buffered replies and errors, the INIT and
                   SnapStart endpoints, a chunked streaming reply with error trailers; the context
  function_url.py  a Function URL event through the FastAPI app, forwarded as it is made: the JSON
                   prelude (status, headers, cookies), 8 NUL bytes, then each body chunk; an error after
                   the start goes out as the error trailers
  runtime.py       the process: INIT is function.awslambda.handler's (model at module scope, SnapStart
                   hooks), the SnapStart handshake as awslambdaric does it, then the loop: Function URL
                   events stream, every other event (HTTP API, SQS, direct) is answered buffered
                   by `lambda_handler`

Lambda starts it through `bootstrap` (AWS_LAMBDA_EXEC_WRAPPER on the zip function) or the image's
ImageConfig entry point; see template.yaml's response-streaming section.
"""

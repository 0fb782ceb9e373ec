"""`python -m function.lambda_stream`: the streaming runtime (see function.lambda_stream)."""

from function.lambda_stream.runtime import main

main()

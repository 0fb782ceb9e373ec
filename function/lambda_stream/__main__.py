"""`python -m function.lambda_stream`: the streaming runtime (see function.lambda_stream).

Arguments are ignored: the image's CMD (the handler's name) follows its ImageConfig entry point, and the
handler is always function.handler's.
"""

from function.lambda_stream.runtime import main

main()

"""`python -m function.awslambda.streaming`: the streaming runtime (see function.awslambda.streaming).

Arguments are ignored: the image's CMD (the handler's name) follows its ImageConfig entry point, and the
handler is always function.awslambda.handler's.
"""

from function.awslambda.streaming.runtime import main

main()

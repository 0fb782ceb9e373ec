"""What an operator sees of a running instance: Prometheus metrics, each request's log line, and inside
Lambda each request's and job message's CloudWatch embedded metrics (EMF).

    tally     what one unit of work (a request, a job message) did: characters, audio seconds, time to
              first audio, compute time; filled by the service path (function.service.synthesis)
    metrics   the Prometheus metrics (prometheus_client) and how a finished unit is counted in them
    embedded  the EMF document of a finished unit, inside Lambda
    lines     where log lines go: stdout, written behind the request under `serve` and the worker
    jobs      the queue's work: each message's outcome, the jobs' ends, the sweeper's re-drives

Recording only adds to counters in memory; the one write per unit is its log line. COSYVOICE_METRICS=off
turns the metrics off (the log lines stay).
"""

"""The queue worker's long poll (function.jobs.consumer._receive), against a stub SQS client whose receive
the test holds open or answers.

GIVEN a worker waiting in a long poll for a message
WHEN it is asked to stop while SQS has not answered, or before it polls; SQS answers with a message; SQS
refuses the receive
THEN it gives the poll up at once and takes nothing, or never polls; it returns the message; the error is
raised on the worker's own thread.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from botocore.exceptions import ClientError

from function.instance.settings import Settings
from function.jobs import consumer
from function.jobs.consumer import Stopping

SETTINGS = Settings(artifact="unused", output_bucket="unused", job_queue_url="https://sqs.example/queue")
HELD_SECONDS = 30  # how long the stub holds a poll open: only a poll that ignores the stop waits it out


class HeldPoll:
    """An SQS client whose receive waits until the test answers it."""

    def __init__(self, answer: dict[str, Any] | Exception) -> None:
        self.answer = answer
        self.release = threading.Event()
        self.asked = threading.Event()
        self.polls: list[dict[str, Any]] = []

    def receive_message(self, **request: Any) -> dict[str, Any]:
        self.polls.append(request)
        self.asked.set()
        self.release.wait(HELD_SECONDS)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


@pytest.fixture
def sqs(monkeypatch: pytest.MonkeyPatch) -> HeldPoll:
    client = HeldPoll({"Messages": [{"MessageId": "m", "ReceiptHandle": "r", "Body": "{}"}]})
    monkeypatch.setattr("function.aws.clients.sqs_client", lambda: client)
    return client


def test_a_stop_gives_up_the_poll_at_once_and_takes_nothing(sqs: HeldPoll) -> None:
    stopping = Stopping()
    taken: list[list[dict[str, Any]]] = []
    worker = threading.Thread(target=lambda: taken.append(consumer._receive(SETTINGS, stopping)))
    worker.start()
    assert sqs.asked.wait(HELD_SECONDS)
    stopping.request()
    worker.join(HELD_SECONDS)
    assert not worker.is_alive() and not sqs.release.is_set()  # it returned while SQS still held the poll
    assert taken == [[]]
    sqs.release.set()


def test_a_worker_asked_to_stop_before_it_polls_asks_sqs_for_nothing(sqs: HeldPoll) -> None:
    stopping = Stopping()
    stopping.request()
    assert consumer._receive(SETTINGS, stopping) == [] and sqs.polls == []


def test_a_message_sqs_answers_with_is_returned(sqs: HeldPoll) -> None:
    sqs.release.set()
    assert consumer._receive(SETTINGS, Stopping()) == sqs.answer["Messages"]  # type: ignore[index]
    (request,) = sqs.polls
    assert request["QueueUrl"] == SETTINGS.job_queue_url and request["MaxNumberOfMessages"] == 1
    assert request["VisibilityTimeout"] == SETTINGS.job_lease_seconds


def test_a_refused_receive_is_raised_on_the_workers_thread(sqs: HeldPoll) -> None:
    sqs.answer = ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, "ReceiveMessage")
    sqs.release.set()
    with pytest.raises(ClientError, match="AccessDenied"):
        consumer._receive(SETTINGS, Stopping())

"""The interruption queue on SQS: EventBridge rules send EC2 and AWS Health events to it
(``deploy/aws-iam-policy.json`` grants receive and delete on it). Long polling; a message is
deleted once handled (or found malformed), so the queue holds only what is still to do."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from cloud.aws.errors import translate

MAX_WAIT = 20  # SQS's longest poll


class SqsQueue:
    def __init__(self, sqs: Any, name: str) -> None:
        self.sqs = sqs
        self.name = name
        self._url: str | None = None

    def _call(self, operation: str, **params: Any) -> Any:
        """One SQS call; a failure is the project's CloudError (the loop polls again at its next interval)."""
        try:
            return getattr(self.sqs, operation)(**params)
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc) from None

    def _queue_url(self) -> str:
        if self._url is None:
            self._url = self._call("get_queue_url", QueueName=self.name)["QueueUrl"]
        return self._url

    def receive(self, wait: float) -> list[tuple[str, str]]:
        """Raises CloudError (the loop logs it and polls again at its next interval)."""
        reply = self._call("receive_message", QueueUrl=self._queue_url(), MaxNumberOfMessages=10, WaitTimeSeconds=int(min(max(wait, 0), MAX_WAIT)))
        return [(m["ReceiptHandle"], m.get("Body", "")) for m in reply.get("Messages", [])]

    def delete(self, receipt: str) -> None:
        self._call("delete_message", QueueUrl=self._queue_url(), ReceiptHandle=receipt)

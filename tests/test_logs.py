"""Logs that cannot leak: third-party loggers quiet unless named, and every line redacted."""

from __future__ import annotations

import base64
import logging
import os
import signal
import subprocess
import sys
import time

import boto3
import pytest
from moto.server import ThreadedMotoServer
from test_aws_e2e import CONFIG, until
from test_cli_service import free_port, wait_for

from cloud.base import CONTROLLER_TAG
from nodemanager.logs import REDACTED, THIRD_PARTY, Redactor, setup_logging

SESSION_TOKEN = "FwoGZXIvYXdzEPlantedSessionToken0123456789abcdefXYZ"
ACCESS_KEY = "ASIAPLANTED0KEY0ID01"
SECRET_KEY = "planted/secret+access+key0123456789abcdef"
USER_DATA_SECRET = "planted-bootstrap-token-77f3e1"
STATUS_TOKEN = "planted-status-bearer-token-5d2a"


@pytest.mark.parametrize(
    "line",
    [
        "Sending http request: <AWSPreparedRequest headers={'X-Amz-Security-Token': b'"
        + SESSION_TOKEN
        + "', 'Authorization': b'AWS4-HMAC-SHA256 Credential="
        + ACCESS_KEY
        + "/20261127/us-east-1/ec2/aws4_request, SignedHeaders=host, Signature=0a1b2c'}>",
        "Making request with params: {'body': {'Action': 'RunInstances', 'UserData': '" + base64.b64encode(USER_DATA_SECRET.encode()).decode() + "'}}",
        "body=Action=RunInstances&UserData=" + base64.b64encode(USER_DATA_SECRET.encode()).decode() + "&Version=2016-11-15",
        "send: b'GET /api/v1/pods HTTP/1.1\\r\\nauthorization: Bearer " + STATUS_TOKEN + "\\r\\n'",
        "aws_session_token = " + SESSION_TOKEN,
    ],
)
def test_credential_patterns_are_redacted(line):
    redacted = Redactor()(line)
    assert REDACTED in redacted
    for secret in (SESSION_TOKEN, ACCESS_KEY, STATUS_TOKEN, base64.b64encode(USER_DATA_SECRET.encode()).decode(), "0a1b2c"):
        assert secret not in redacted


def test_literal_secrets_are_redacted_wherever_they_appear_and_short_ones_are_not():
    redactor = Redactor()
    redactor.add(SECRET_KEY, "abc", None, "")
    assert redactor(f"oops {SECRET_KEY} in a traceback") == f"oops {REDACTED} in a traceback"
    assert redactor("abc stays") == "abc stays"


def test_third_party_loggers_stay_at_warning_unless_named():
    try:
        setup_logging("debug", ["urllib3"])
        assert logging.getLogger("botocore").getEffectiveLevel() == logging.WARNING
        assert logging.getLogger("kubernetes.client.rest").getEffectiveLevel() == logging.WARNING
        assert logging.getLogger("urllib3").getEffectiveLevel() == logging.DEBUG
        assert set(THIRD_PARTY) >= {"botocore", "boto3", "urllib3", "kubernetes"}
    finally:
        setup_logging("warning")


@pytest.mark.heavy
def test_a_debug_run_with_botocore_named_logs_no_planted_secret(tmp_path):
    """``run --log-level debug --debug-logger botocore --debug-logger urllib3`` against a moto
    server, with planted credentials, user data and a status token: its whole output holds
    none of them, though botocore logs every request's headers and body."""
    ec2_port, status_port = free_port(), free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=ec2_port)
    server.start()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env |= {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_SESSION_TOKEN": SESSION_TOKEN, "AWS_DEFAULT_REGION": "us-east-1"}
    env["NM_STATUS_TOKEN"] = STATUS_TOKEN
    workload = tmp_path / "workload.yaml"
    workload.write_text("pods:\n  - {name: job, count: 2, duration: 2s, pod: {containers: [{name: c, resources: {requests: {cpu: 500m}}}]}}\n")
    config = CONFIG.format(ec2_port=ec2_port, status_port=status_port, workload=workload)
    config = config.replace("refreshPrices: false}", f'refreshPrices: false, userData: "#!/bin/bash\\necho {USER_DATA_SECRET} {{node_name}}"}}')
    config = config.replace(f'status: {{listen: "127.0.0.1:{status_port}"}}', f'status: {{listen: "127.0.0.1:{status_port}", bearerTokenEnv: NM_STATUS_TOKEN}}')
    (tmp_path / "provider.yaml").write_text(config)
    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=f"http://127.0.0.1:{ec2_port}", aws_access_key_id="t", aws_secret_access_key="t")
    command = [sys.executable, "-m", "nodemanager.cli", "run", "--config", str(tmp_path / "provider.yaml"), "--log-level", "debug"]
    command += ["--debug-logger", "botocore", "--debug-logger", "urllib3"]
    log_path = tmp_path / "run.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(command, env=env, stderr=log, stdout=log, text=True)
        try:
            wait_for(f"http://127.0.0.1:{status_port}/readyz", time.monotonic() + 30)

            def booted() -> bool:
                reply = ec2.describe_instances(Filters=[{"Name": f"tag:{CONTROLLER_TAG}", "Values": ["e2e"]}])
                return len([i for r in reply["Reservations"] for i in r["Instances"]]) >= 2

            until(booted, 30, "the boots")
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=15) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            server.stop()
    output = log_path.read_text()
    assert "RunInstances" in output  # botocore did log the requests
    assert REDACTED in output
    encoded = base64.b64encode(f"#!/bin/bash\necho {USER_DATA_SECRET}".encode()).decode()[:24]
    for secret in (SESSION_TOKEN, ACCESS_KEY, SECRET_KEY, USER_DATA_SECRET, STATUS_TOKEN, encoded):
        assert secret not in output, secret

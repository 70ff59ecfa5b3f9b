"""deploy/ files: the IAM policy allows exactly what the code calls (EC2, pricing, and the
interruption queue's SQS calls, scoped to that queue)."""

from __future__ import annotations

import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# boto3 method -> IAM action
_ACTIONS = {
    "run_instances": "ec2:RunInstances",
    "create_fleet": "ec2:CreateFleet",
    "create_launch_template": "ec2:CreateLaunchTemplate",
    "terminate_instances": "ec2:TerminateInstances",
    "describe_instances": "ec2:DescribeInstances",
    "describe_images": "ec2:DescribeImages",
    "describe_subnets": "ec2:DescribeSubnets",
    "describe_spot_price_history": "ec2:DescribeSpotPriceHistory",
    "describe_instance_types": "ec2:DescribeInstanceTypes",
    "describe_instance_type_offerings": "ec2:DescribeInstanceTypeOfferings",
    "describe_capacity_reservations": "ec2:DescribeCapacityReservations",
    "get_products": "pricing:GetProducts",
    "get_queue_url": "sqs:GetQueueUrl",
    "receive_message": "sqs:ReceiveMessage",
    "delete_message": "sqs:DeleteMessage",
    "describe_cluster": "eks:DescribeCluster",
}


def called_operations() -> set[str]:
    """Every boto3 operation named in the AWS code: calls, paginators and _call/_checked."""
    found = set()
    for path in [*REPO.glob("cloud/aws/*.py"), REPO / "cloud" / "catalog_gen.py"]:
        text = path.read_text()
        found |= set(re.findall(r'_(?:call|checked)\("([a-z_]+)"', text))
        found |= set(re.findall(r'get_paginator\("([a-z_]+)"\)', text))
        found |= set(re.findall(r"self\.sqs\.([a-z_]+)\(", text))
        found |= set(re.findall(r"\beks\.([a-z_]+)\(", text))
    return found


def test_policy_allows_every_call_the_code_makes_and_nothing_else():
    policy = json.loads((REPO / "deploy" / "aws-iam-policy.json").read_text())
    allowed = set()
    for statement in policy["Statement"]:
        assert statement["Effect"] == "Allow"
        actions = statement["Action"]
        allowed |= {actions} if isinstance(actions, str) else set(actions)
    needed = {_ACTIONS[op] for op in called_operations()} | {"ec2:CreateTags", "iam:PassRole"}  # tags at launch, instance profile
    assert called_operations() <= set(_ACTIONS)  # every operation is known to this test
    assert allowed == needed


def _resources(statement: dict) -> list[str]:
    return statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]


def test_destructive_actions_are_scoped_to_this_controllers_tag():
    policy = json.loads((REPO / "deploy" / "aws-iam-policy.json").read_text())
    for statement in policy["Statement"]:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        if "ec2:TerminateInstances" in actions:
            assert statement["Condition"]["StringEquals"] == {"aws:ResourceTag/nodemanager.io/controller-id": "CONTROLLER_ID"}
        if "ec2:CreateTags" in actions:
            assert statement["Condition"]["StringEquals"] == {"ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"]}
        if {"ec2:CreateFleet", "ec2:CreateLaunchTemplate"} & set(actions) and any(":instance/" in r or ":fleet/" in r for r in _resources(statement)):
            assert statement["Condition"]["StringEquals"] == {"aws:RequestTag/nodemanager.io/controller-id": "CONTROLLER_ID"}
        assert "*" not in actions

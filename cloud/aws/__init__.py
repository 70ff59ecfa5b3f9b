"""The AWS cloud: EC2 boots and terminations, prices, the interruption queue (boto3)."""

"""The node controller's loops, the dispenser and the executors it boots through."""

from nodemanager.controller.boots import boot_token
from nodemanager.controller.dispenser import NO_BINDING, NOT_YET, NodeDispenser, NodeReply
from nodemanager.controller.executor import InlineExecutor
from nodemanager.controller.node_controller import LOOPS, NodeController

__all__ = ["LOOPS", "NOT_YET", "NO_BINDING", "InlineExecutor", "NodeController", "NodeDispenser", "NodeReply", "boot_token"]

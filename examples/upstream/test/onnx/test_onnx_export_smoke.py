# Example upstream-style test file for testcurator, written in PyTorch's conventions for
# ONNX exporter tests. Not copied from PyTorch. The exporter needs the onnx and onnxscript
# packages; without them the whole module is skipped (nothing here needs a network).
from __future__ import annotations

import importlib.util
import sys
import unittest

import torch
from torch.testing._internal.common_utils import run_tests, TestCase

HAS_ONNX = all(importlib.util.find_spec(m) is not None for m in ("onnx", "onnxscript"))
if not HAS_ONNX:
    if __name__ == "__main__":
        print("onnx/onnxscript not installed, skipping tests", file=sys.stderr)
        sys.exit(0)
    raise unittest.SkipTest("onnx/onnxscript not installed")

import onnx  # noqa: E402


class TestExportSmoke(TestCase):
    def test_export_linear(self):
        model = torch.nn.Linear(3, 2).eval()
        program = torch.onnx.export(model, (torch.randn(1, 3),), dynamo=True)
        proto = program.model_proto
        onnx.checker.check_model(proto)
        self.assertEqual(len(proto.graph.input), 1)

    def test_export_relu_opset(self):
        program = torch.onnx.export(torch.nn.ReLU(), (torch.randn(4),), dynamo=True)
        ops = {node.op_type for node in program.model_proto.graph.node}
        self.assertIn("Relu", ops)


if __name__ == "__main__":
    run_tests()

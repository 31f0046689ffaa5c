# Example upstream-style test file for testcurator, written in PyTorch's conventions for
# device-generic compiler tests. Not copied from PyTorch. The compiled functions use the
# "aot_eager" backend (dynamo + AOTAutograd, no code generation), so they run on any device
# that implements the ops, and fast; the eager references use other ops than the compiled
# graphs, which is what the op map's "compile" source shows.
import torch
import torch.nn.functional as F
from torch.testing._internal.common_device_type import dtypes, instantiate_device_type_tests
from torch.testing._internal.common_utils import run_tests, TestCase


def _silu_inplace(x):
    return F.silu(x.clone(), inplace=True)


class TestCompiledOps(TestCase):
    @dtypes(torch.float32)
    def test_compiled_silu_matches_reference(self, device, dtype):
        x = torch.randn(16, device=device, dtype=dtype)
        compiled = torch.compile(_silu_inplace, backend="aot_eager", fullgraph=True)
        self.assertEqual(compiled(x), x * torch.sigmoid(x))

    @dtypes(torch.float32)
    def test_compiled_backward(self, device, dtype):
        x = torch.randn(4, 8, device=device, dtype=dtype, requires_grad=True)
        compiled = torch.compile(lambda t: F.gelu(t).sum(), backend="aot_eager")
        compiled(x).backward()
        ref = x.detach().requires_grad_()
        F.gelu(ref).sum().backward()
        self.assertEqual(x.grad, ref.grad)

    def test_eager_only(self, device):
        self.assertEqual(torch.ones(3, device=device).neg().sum().item(), -3.0)


instantiate_device_type_tests(TestCompiledOps, globals())

if __name__ == "__main__":
    run_tests()

"""Call keys and replayable examples: what the capture writes is what the probe rebuilds."""

from __future__ import annotations

import json

import pytest
import torch

from testcurator.plugin.callspec import (
    MAX_CHARS,
    alias_roles,
    argument,
    call_key,
    call_words,
    dispatch_op,
    error_signature,
    example,
    is_host_call,
    is_raise_call,
    layout_op,
    raise_call,
    raised_call,
    rebuild,
    split_key,
    to_device,
    twin_call,
    write_call,
)


def test_key_names_the_op_and_every_tensor_dtype_in_order() -> None:
    x, i = torch.ones(2), torch.zeros(2, dtype=torch.long)
    assert call_key("aten::index.Tensor", (x, [None, i]), {}) == "aten::index.Tensor(float32,int64)"
    assert call_key("aten::cumsum.out", (x, 0), {"out": x.double()}) == "aten::cumsum.out(float32,float64)"
    assert split_key("aten::cumsum.out(float32,float64)") == ("aten::cumsum.out", ("float32", "float64"))
    assert split_key("aten::empty.memory_format()") == ("aten::empty.memory_format", ())


def test_a_sparse_argument_names_its_layout_in_the_key() -> None:
    # One example per key: a sparse clone must not stand for every dense clone(float32).
    sparse = torch.sparse_coo_tensor(torch.tensor([[0, 1]]), torch.ones(2), (3,))
    assert call_key("aten::clone", (sparse,), {}) == "aten::clone[sparse_coo](float32)"
    assert call_key("aten::add.Tensor", (torch.ones(3), [sparse]), {}) == "aten::add.Tensor[sparse_coo](float32,float32)"
    assert call_key("aten::clone", (torch.ones(3),), {}) == "aten::clone(float32)"
    assert dispatch_op(split_key("aten::add.Tensor[sparse_coo](float32)")[0]) == "aten::add.Tensor"


def test_a_layout_op_is_a_call_on_another_layout_that_no_sparse_flag_may_have_marked() -> None:
    calls = ("aten::_embedding_bag_backward[sparse_coo](float32,int64)", "aten::add.Tensor(float32,float32)",
             "aten::_indices[sparse_coo](float32)", "raises:RuntimeError:aten::clone[sparse_csr](float32)",
             "writes:aten::_indices[sparse_coo](float32)")
    # Not the strided call, nor a twin, nor an op whose marker may be its sparse flag's.
    assert [layout_op(c) for c in calls] == [None, None, "aten::_indices[sparse_coo]", None, None]


@pytest.mark.parametrize("sparse", [False, True])
def test_a_backward_whose_sparse_flag_is_set_is_keyed_sparse(sparse: bool) -> None:
    # Dense inputs either way; sparse=True builds a sparse COO gradient (the device's sparse
    # kernels), and one example must not stand for both.
    from testcurator.plugin.recorder import recorder_class

    weight = torch.randn(5, 3, requires_grad=True)
    with recorder_class()() as recorder:
        torch.nn.functional.embedding_bag(torch.tensor([0, 2, 1]), weight, torch.tensor([0, 1]),
                                          sparse=sparse).sum().backward()
    backward = {k for k in recorder.calls if k.startswith("aten::_embedding_bag_backward")}
    marker = "[sparse_coo]" if sparse else ""
    assert backward == {f"aten::_embedding_bag_backward{marker}(float32,int64,int64,int64,int64,int64)"}
    assert call_key("aten::embedding_backward", (torch.ones(2, 3), torch.zeros(2, dtype=torch.long), 5, -1, False),
                    {"sparse": sparse}).startswith("aten::embedding_backward" + marker + "(")
    assert dispatch_op(split_key(next(iter(backward)))[0]) == "aten::_embedding_bag_backward"


def test_rebuild_keeps_shapes_strides_dtypes_scalars_and_small_integer_values() -> None:
    base = torch.randn(3, 4)
    args = (base.t(), torch.tensor([2, 0]), 1.5, [0, 1], torch.float16, torch.device("cpu"), None)
    kwargs = {"out": torch.empty(2, dtype=torch.bfloat16), "expanded": torch.randn(3, 1).expand(3, 5)}
    text = example(args, kwargs)
    assert text is not None
    got, got_kw = rebuild(text)
    assert got[0].shape == (4, 3) and got[0].stride() == (1, 4) and got[0].dtype == torch.float32
    assert got[1].tolist() == [2, 0]  # indices keep their values: they must stay in range
    assert got[2:] == [1.5, [0, 1], torch.float16, torch.device("cpu"), None]
    assert got_kw["out"].dtype == torch.bfloat16 and got_kw["expanded"].stride() == (1, 0)
    # The same example gives the same fresh values: CPU and device replay the same inputs.
    assert torch.equal(rebuild(text)[0][0], got[0])
    moved = to_device(got, "meta")
    assert moved[0].device.type == "meta" and moved[0].stride() == (1, 4) and moved[5] == torch.device("meta")


@pytest.mark.parametrize("value", [
    torch.Generator(), torch.randn(4, 4).to_sparse_csr(), torch.empty(1 << 21, dtype=torch.uint8), list(range(5000)),
], ids=["generator", "sparse csr", "too many elements", "too long"])
def test_what_cannot_be_replayed_gets_no_example(value: object) -> None:
    assert example((value,), {}) is None


@pytest.mark.parametrize("coalesce", [True, False], ids=["coalesced", "uncoalesced"])
def test_a_sparse_coo_argument_is_rebuilt_with_its_indices_and_moves_as_sparse(coalesce: bool) -> None:
    # embedding_bag's sparse gradient is read with _indices/_values: the device needs sparse kernels.
    sparse = torch.sparse_coo_tensor(torch.tensor([[0, 1, 1], [2, 0, 2]]), torch.ones(3), (2, 3))
    sparse = sparse.coalesce() if coalesce else sparse
    text = example((sparse,), {})
    assert text is not None
    (got,), _ = rebuild(text)
    assert got.layout == torch.sparse_coo and got.shape == (2, 3) and got.is_coalesced() == coalesce
    assert got._indices().tolist() == sparse._indices().tolist() and got._values().dtype == torch.float32
    moved = to_device([got], "meta")[0]
    assert moved.layout == torch.sparse_coo and moved.device.type == "meta"


def test_an_example_is_bounded_json() -> None:
    text = example((torch.ones(3),), {"dim": 0})
    assert text is not None and len(text) <= MAX_CHARS and json.loads(text)["kwargs"] == {"dim": 0}


def test_a_storage_argument_is_replayed_by_its_size_and_moves_with_the_call() -> None:
    # copy.deepcopy and torch.load rebuild tensors with set_ on a storage: the device must hold it.
    storage = torch.arange(3, dtype=torch.float32).untyped_storage()
    args = (torch.empty(0), storage, 0, [3], [1])
    text = example(args, {})
    assert text is not None and json.loads(text)["args"][1] == {"storage": 12}
    got, _ = rebuild(text)
    assert isinstance(got[1], torch.UntypedStorage) and got[1].nbytes() == 12
    moved = to_device(got, "meta")
    assert moved[1].device.type == "meta" and moved[0].device.type == "meta"
    kept = to_device(got + [torch.device("cpu")], "meta", move=False)  # a host call's tensors stay home
    assert kept[0].device.type == "cpu" and kept[1].device.type == "cpu" and kept[-1] == torch.device("meta")
    assert example((torch.empty(0), torch.empty(1 << 21, dtype=torch.uint8).untyped_storage()), {}) is None


def test_host_calls_are_the_pinning_ops_by_name() -> None:
    assert is_host_call("aten::_pin_memory(float32)") and is_host_call("aten::is_pinned(int64)")
    assert not is_host_call("aten::add.Tensor(float32,float32)") and not is_host_call("aten::_pin_memory_x(float32)")


def test_a_raising_twin_is_named_for_a_reader_as_the_call_and_its_raising_inputs() -> None:
    twin = raise_call("aten::polygamma(float32)", "RuntimeError")
    assert call_words(twin) == "aten::polygamma(float32) (the inputs that raised RuntimeError on CPU)"
    assert call_words("aten::polygamma(float32)") == "aten::polygamma(float32)"
    assert is_raise_call(twin) and not is_raise_call("aten::neg(float32)")
    # the call and the error a twin stands for, an op's "::" kept whole
    assert raised_call(twin) == ("aten::polygamma(float32)", "RuntimeError")
    assert raised_call("aten::neg(float32)") == ("aten::neg(float32)", "")


@pytest.mark.parametrize(("message", "same"), [
    ("Tensor must have a last dimension of size 2", True),
    ("Tensor must have a last dimension of size 3", True),  # sizes, values: the same check
    ("expand(torch.FloatTensor{[5, 1]}, size=[1]) at 0x7f3a9c: too few", False),  # another check
    ("Tensor must have a last dimension with stride 1", False),
])
def test_a_raising_twin_names_its_messages_check_whatever_sizes_and_types_it_names(message: str, same: bool) -> None:
    twin = raise_call("aten::view_as_complex(float32)", "RuntimeError", message)
    assert (twin == raise_call("aten::view_as_complex(float32)", "RuntimeError", "Tensor must have a last dimension of size 2")) is same
    assert raised_call(twin) == ("aten::view_as_complex(float32)", "RuntimeError") and twin_call(twin) == "aten::view_as_complex(float32)"
    assert call_words(twin) == "aten::view_as_complex(float32) (the inputs that raised RuntimeError on CPU)"
    assert error_signature("expand(openregFloatType{[5, 1]}, size=[1]) at 0x55e1: too few") == \
        error_signature("expand(torch.FloatTensor{[5, 1]}, size=[1]) at 0x7f3a9c: too few")


def test_a_writing_twin_is_named_for_a_reader_as_the_view_call_written_into() -> None:
    twin = write_call("aten::unfold(float32)")
    assert twin == "writes:aten::unfold(float32)" and call_words(twin) == "aten::unfold(float32) (a view the test writes into)"
    assert twin_call(twin) == "aten::unfold(float32)" and not is_raise_call(twin)
    assert twin_call(raise_call("aten::neg(float32)", "RuntimeError")) == "aten::neg(float32)"
    assert twin_call("aten::neg(float32)") == "aten::neg(float32)"


@pytest.mark.parametrize(("op", "roles"), [
    (torch.ops.aten.unfold.default, ((0, "self"), ())),  # Tensor(a) self -> Tensor(a)
    (torch.ops.aten.split.Tensor, ((0, "self"), ())),  # a list of views: Tensor(a)[]
    (torch.ops.aten.add_.Tensor, (None, ((0, "self"),))),  # in place
    (torch.ops.aten.add.out, (None, ((3, "out"),))),  # out=, keyword-only
    (torch.ops.aten.transpose_.default, (None, ())),  # an in-place view op changes the shape, not the values
    (torch.ops.aten.add.Tensor, (None, ())),
])
def test_alias_roles_read_the_view_input_and_the_written_arguments_from_the_schema(op: object, roles: tuple) -> None:
    assert alias_roles(op) == roles


def test_an_argument_is_found_by_position_or_by_name() -> None:
    assert argument((1, 2), {"out": 3}, (1, "other")) == 2
    assert argument((1, 2), {"out": 3}, (3, "out")) == 3
    assert argument((1,), {}, (3, "out")) is None

import re

from triton_iree import emit

from helpers import add_program, facts_and_module


def test_module_abi_and_dispatch_form():
    k = add_program(1024)
    _, text = facts_and_module(k)
    emit.verify(text, k.name)
    sig = re.search(r"func\.func @add_kernel\((.*)\) -> \((.*)\) \{", text)
    args, results = sig.group(1), sig.group(2)
    assert args.count("tensor<?xf32>") == 3
    assert "{iree.abi.output = 0 : index}" in args.split(",")[2]
    assert "%grid_x: i32, %grid_y: i32, %grid_z: i32" in args
    assert results == "tensor<?xf32>"
    assert text.count("flow.dispatch.workgroups") == 1
    assert "flow.dispatch.workgroup.id[0]" in text
    # a full-tile version with static slices beside the masked one
    assert "sizes = [1024]" in text and "scf.if" in text


def test_emitted_modules_are_deterministic():
    _, a = facts_and_module(add_program(256))
    _, b = facts_and_module(add_program(256))
    assert a == b

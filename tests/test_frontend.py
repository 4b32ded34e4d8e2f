import pytest

from triton_iree import frontend
from triton_iree.backend import compiler

import kernels as K
from helpers import ADD_SIG


def test_ttir_is_printed_in_generic_form_with_locations():
    text = compiler.kernel_ttir(K.add_kernel, ADD_SIG, dict(BLOCK_SIZE=128))
    assert '"tt.func"()' in text and '"tt.load"' in text and '"tt.store"' in text
    assert "kernels.py" in text          # source locations survive
    assert "triton_iree_print_generic" not in text


def test_check_generic_rejects_custom_form():
    custom = "module {\n  tt.func public @k() {\n    tt.return\n  }\n}\n"
    with pytest.raises(RuntimeError, match="not printed in generic form"):
        frontend.check_generic(custom)

"""Frontend: Triton's own passes, and TTIR as generic MLIR text.

Triton parses the Python kernel and produces TTIR; we only choose the upstream 'ttir' passes
and print the result in MLIR's *generic* op form, which `iree.compiler.ir` can parse without
knowing the `tt` dialect.
"""
from __future__ import annotations

import re

from triton._C.libtriton import ir, passes

from . import compat

# Set on the module only while printing; it has no dialect prefix, so the module fails
# verification and MLIR falls back to the generic printer. Stripped from the text after.
_GENERIC_MARKER = "triton_iree_print_generic"
_CUSTOM_FORM = re.compile(r"^\s*(?:%[^=\n]+=\s*)?(?:tt|arith|scf|math|cf)\.[a-z_.]+\b", re.M)


def make_ttir(mod, metadata: dict, options) -> object:
    """The upstream 'ttir' stage: inline, rewrite block pointers and descriptors, clean up."""
    pm = ir.pass_manager(mod.context)
    pm.enable_debug()
    passes.common.add_inliner(pm)
    compat.add_block_pointer_rewrite(pm)
    passes.ttir.add_rewrite_tensor_descriptor_to_pointer(pm)
    passes.common.add_canonicalizer(pm)
    passes.ttir.add_combine(pm)
    passes.ttir.add_reorder_broadcast(pm)
    passes.common.add_cse(pm)
    passes.common.add_symbol_dce(pm)
    passes.ttir.add_loop_unroll(pm)
    pm.run(mod, "make_ttir")
    return mod


def generic_text(mod) -> str:
    """TTIR `mod` printed in generic op form, with source locations.

    Raises if the printer did not produce generic form, so that a Triton upgrade that changes
    the printing behaviour fails loudly here rather than somewhere in the reader.
    """
    mod.set_attr(_GENERIC_MARKER, ir.builder(mod.context).get_bool_attr(True))
    text = mod.str()
    text = re.sub(r"\{" + _GENERIC_MARKER + r" = true\} ", "", text)
    text = re.sub(r"(, )?" + _GENERIC_MARKER + r" = true(, )?", lambda m: ", " if m.group(1) and m.group(2) else "", text)
    check_generic(text)
    return text


def check_generic(text: str) -> None:
    m = _CUSTOM_FORM.search(text)
    if m is not None or '"tt.func"' not in text:
        snippet = m.group(0).strip() if m else text[:200]
        raise RuntimeError(
            "TTIR was not printed in generic form (Triton's printer changed?); "
            f"first custom-form line: {snippet!r}")

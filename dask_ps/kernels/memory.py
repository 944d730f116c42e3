"""Memory hints for numba kernels: :func:`prefetch`, a software prefetch of an array element.

Kernels that probe large tables at addresses known some iterations ahead (the shards' hash
index; the per-sample steps' weight rows of the samples ahead) ask for the cache line early,
so that several misses overlap instead of stalling the loop one at a time.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["prefetch"]


@intrinsic
def prefetch(typingctx, arr, i):
    """``prefetch(arr, i)``: hint that ``arr[i]`` (1-D) or the start of row ``arr[i]`` (2-D)
    will be read soon (``0 <= i < len(arr)``, unchecked); LLVM's ``llvm.prefetch`` (read, high
    locality, data cache). No effect on results; callable from numba-compiled code only."""
    if not (isinstance(arr, types.Array) and arr.ndim in (1, 2)
            and isinstance(i, types.Integer)):
        return None
    sig = types.void(arr, i)

    def codegen(context, builder, signature, args):
        aryty, ity = signature.args
        ary = context.make_array(aryty)(context, builder, args[0])
        index = [context.cast(builder, args[1], ity, types.intp)]
        if aryty.ndim == 2:
            index.append(context.get_constant(types.intp, 0))
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, index, wraparound=False)
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = builder.module.declare_intrinsic("llvm.prefetch", [i8p], fnty)
        builder.call(fn, [builder.bitcast(ptr, i8p), ir.Constant(i32, 0), ir.Constant(i32, 3),
                          ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen

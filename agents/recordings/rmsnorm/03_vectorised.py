"""CuTeDSL port: one CTA per row kept in registers, 128-bit loads and stores where the width allows (scalars for odd widths), fp32 sum of squares through warp shuffles and shared memory. Compiled once per dtype and shape class; rows and width are runtime values."""

import cutlass
import cutlass.cute as cute
import cutlass.torch as cutlass_torch
import torch
from cutlass.cute.runtime import from_dlpack, make_fake_compact_tensor, make_fake_stream
from cutlass.memory import SmemAllocator

EPS = 1e-6
WARP = 32
MAX_THREADS = 1024
VECTOR_BYTES = 16  # one 128-bit access
TARGET_VECTORS = {True: 4, False: 16}  # per thread: 4 x 128-bit vectors, or 16 scalars for odd widths
MAX_RESIDENT = {True: 4, False: 32}  # per thread at 1024 threads (32768 columns); wider rows are read twice

_CUTE_DTYPES = {torch.float32: cutlass.Float32, torch.float16: cutlass.Float16, torch.bfloat16: cutlass.BFloat16}


@cute.jit
def load_vectors(
    mX: cute.Tensor,
    rX: cute.Tensor,
    base: cutlass.Int32,
    first: cutlass.Int32,
    nvec: cutlass.Int32,
    THREADS: cutlass.Constexpr,
    PER_THREAD: cutlass.Constexpr,
):
    """rX[None, k] = vector first + k * THREADS of the row at base; zeros past the row's end."""
    rX.fill(0)
    for k in cutlass.range_constexpr(PER_THREAD):
        j = first + k * THREADS
        if j < nvec:
            rX[None, k].store(mX[base + j, None].load())


@cute.jit
def sum_of_squares(rX: cute.Tensor) -> cutlass.Float32:
    xf = rX.load().to(cutlass.Float32)
    return (xf * xf).reduce(cute.ReductionOp.ADD, cutlass.Float32(0.0), reduction_profile=0)


@cute.jit
def store_normalised(
    rX: cute.Tensor,
    mW: cute.Tensor,
    mY: cute.Tensor,
    base: cutlass.Int32,
    first: cutlass.Int32,
    nvec: cutlass.Int32,
    rstd: cutlass.Float32,
    THREADS: cutlass.Constexpr,
    PER_THREAD: cutlass.Constexpr,
):
    """y = x * rstd * w for the vectors load_vectors read, rounded once to the output type."""
    for k in cutlass.range_constexpr(PER_THREAD):
        j = first + k * THREADS
        if j < nvec:
            x = rX[None, k].load().to(cutlass.Float32)
            w = mW[j, None].load().to(cutlass.Float32)
            mY[base + j, None].store((x * rstd * w).to(mY.element_type))


@cute.kernel
def rmsnorm_kernel(
    mX: cute.Tensor,  # (rows * nvec, VEC): row r's vector j is mX[r * nvec + j, None]
    mW: cute.Tensor,  # (nvec, VEC)
    mY: cute.Tensor,  # like mX
    nvec: cutlass.Int32,  # vectors per row: cols // VEC
    nchunks: cutlass.Int32,  # passes of THREADS * PER_THREAD vectors over a row (1 when RESIDENT)
    VEC: cutlass.Constexpr,
    THREADS: cutlass.Constexpr,
    PER_THREAD: cutlass.Constexpr,
    RESIDENT: cutlass.Constexpr,
):
    tidx, _, _ = cute.arch.thread_idx()
    row, _, _ = cute.arch.block_idx()
    base = row * nvec
    chunk = THREADS * PER_THREAD
    # Thread tidx owns vectors tidx, tidx + THREADS, ... of each chunk: a warp's accesses are contiguous.
    rX = cute.make_rmem_tensor((VEC, PER_THREAD), mX.element_type)

    # Pass 1: sum of squares in fp32 (the zeros past the row's end add nothing).
    acc = cutlass.Float32(0.0)
    for c in cutlass.range(nchunks):  # a resident row is one chunk: rX keeps it for pass 2
        load_vectors(mX, rX, base, c * chunk + tidx, nvec, THREADS, PER_THREAD)
        acc = acc + sum_of_squares(rX)

    # Block reduction: butterfly shuffles leave every lane with its warp's sum; with several warps, lane 0
    # of each writes it to shared memory and every thread adds the partials in the same order.
    for shift in cutlass.range_constexpr(5):
        acc = acc + cute.arch.shuffle_sync_bfly(acc, offset=16 >> shift)
    total = acc
    if cutlass.const_expr(THREADS > WARP):
        warps = THREADS // WARP
        smem = SmemAllocator()
        partial = smem.allocate_tensor(cutlass.Float32, cute.make_layout(warps), byte_alignment=4)
        if tidx % WARP == 0:
            partial[tidx // WARP] = acc
        cute.arch.barrier()
        total = partial[0]
        for w in cutlass.range_constexpr(1, warps):
            total = total + partial[w]
    cols = nvec * VEC
    rstd = cute.math.rsqrt(total / cols.to(cutlass.Float32) + cutlass.Float32(EPS))

    # Pass 2: a resident row is still in rX; a wider one is read again, chunk by chunk (from L2, mostly).
    if cutlass.const_expr(RESIDENT):
        store_normalised(rX, mW, mY, base, tidx, nvec, rstd, THREADS, PER_THREAD)
    else:
        for c in cutlass.range(nchunks):
            load_vectors(mX, rX, base, c * chunk + tidx, nvec, THREADS, PER_THREAD)
            store_normalised(rX, mW, mY, base, c * chunk + tidx, nvec, rstd, THREADS, PER_THREAD)


@cute.jit
def rmsnorm(
    mX: cute.Tensor,
    mW: cute.Tensor,
    mY: cute.Tensor,
    rows: cutlass.Int32,
    nvec: cutlass.Int32,
    nchunks: cutlass.Int32,
    stream,
    VEC: cutlass.Constexpr,
    THREADS: cutlass.Constexpr,
    PER_THREAD: cutlass.Constexpr,
    RESIDENT: cutlass.Constexpr,
):
    rmsnorm_kernel(mX, mW, mY, nvec, nchunks, VEC, THREADS, PER_THREAD, RESIDENT).launch(
        grid=(rows, 1, 1), block=(THREADS, 1, 1), stream=stream
    )


def shape_class(cols: int, vec: int) -> tuple[int, int, bool]:
    """(threads, vectors per thread, resident) for a row of `cols` elements read `vec` at a time."""
    vectorised = vec > 1
    nvec = cols // vec
    want = -(-nvec // TARGET_VECTORS[vectorised])
    threads = min(max(1 << (want - 1).bit_length(), WARP), MAX_THREADS)
    per_thread = -(-nvec // threads)
    if per_thread <= MAX_RESIDENT[vectorised]:
        return threads, per_thread, True
    return MAX_THREADS, TARGET_VECTORS[vectorised], False


_compiled: dict[tuple, object] = {}


def _compiled_for(dtype: torch.dtype, vec: int, threads: int, per_thread: int, resident: bool):
    """One compile per dtype and shape class: the fake tensors' lengths are symbolic, so rows and width are
    runtime arguments."""
    key = (dtype, vec, threads, per_thread, resident)
    if key not in _compiled:
        elem = _CUTE_DTYPES[dtype]
        align = vec * (elem.width // 8)
        fake = [
            make_fake_compact_tensor(elem, (cute.sym_int32(), vec), stride_order=(1, 0), assumed_align=align)
            for _ in range(3)
        ]
        _compiled[key] = cute.compile(
            rmsnorm,
            *fake,
            cutlass.Int32(1),
            cutlass.Int32(1),
            cutlass.Int32(1),
            make_fake_stream(),
            vec,
            threads,
            per_thread,
            resident,
        )
    return _compiled[key]


def _as_vectors(t: torch.Tensor, vec: int):
    """t viewed as (numel // vec, vec) with the vector count dynamic, as the compiled function expects."""
    view = t.view(-1, vec)
    align = vec * t.element_size()
    return from_dlpack(view, assumed_align=align).mark_compact_shape_dynamic(mode=0, stride_order=(0, 1))


def custom_kernel(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    rows, cols = x.shape
    assert w.shape == (cols,) and x.dtype == w.dtype and x.is_contiguous() and w.is_contiguous()
    assert x.numel() < 2**31, "indices are 32-bit"
    y = torch.empty_like(x)
    if rows == 0 or cols == 0:
        return y
    vec = VECTOR_BYTES // x.element_size()
    vectorised = cols % vec == 0 and all(t.data_ptr() % VECTOR_BYTES == 0 for t in (x, w, y))
    if not vectorised:
        vec = 1
    threads, per_thread, resident = shape_class(cols, vec)
    nvec = cols // vec
    nchunks = -(-nvec // (threads * per_thread))
    compiled = _compiled_for(x.dtype, vec, threads, per_thread, resident)
    # Launch on torch's current stream, as a torch op would (CPU tensors only get as far as compiling).
    stream = cutlass_torch.current_stream() if x.is_cuda else 0
    compiled(_as_vectors(x, vec), _as_vectors(w, vec), _as_vectors(y, vec), rows, nvec, nchunks, stream)
    return y

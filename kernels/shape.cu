// Data-movement kernels of the layout ops (crates/oxiflow-core/src/ops/shape_ops.rs and the
// slicing half of ops/index.rs): Transpose, ConcatV2, Pack, Unpack, SplitV, Tile, ReverseV2,
// Pad, StridedSlice, StridedSliceGrad.
//
// Header-free (compiled at run time by NVRTC, which has no CUDA headers here). Entry points
// are `extern "C"` and named `{op}_{dtype}` (crates/oxiflow-cuda/src/launch/mod.rs,
// `entry_name`), dtype one of f32 f64 i32 i64 bool (bool is one byte, as Rust's `bool`).
// The launchers are in crates/oxiflow-cuda/src/launch/movement/mod.rs; the metadata structs
// below are mirrored there field for field (`#[repr(C)]`), so change both together.
//
// Every tensor is contiguous and row-major. Kernels use grid-stride loops over their
// output (or, for Unpack/SplitV, their input) elements; index arithmetic is done in 32-bit
// when the launcher says every count fits (`wide == 0`), in 64-bit otherwise.

#define OXI_MAX_RANK 8
#define OXI_MAX_PIECES 32

// One element-to-element map between an output of rank `rank` and an input. Which fields
// an op reads is listed at each kernel; the launcher zeroes the rest.
struct MapMeta {
    i64 out_dims[OXI_MAX_RANK];   // output dimensions
    i64 in_dims[OXI_MAX_RANK];    // Tile: input dims (modulus); Pad: input dims (bounds);
                                  // StridedSliceGrad: slice length per dimension
    i64 in_strides[OXI_MAX_RANK]; // input element stride per output dimension (may be < 0)
    i64 start[OXI_MAX_RANK];      // Pad: padding before; StridedSliceGrad: slice start
    i64 step[OXI_MAX_RANK];       // StridedSliceGrad: slice step (non-zero)
    i64 base;                     // input offset of output coordinate 0
    i64 total;                    // number of output elements
    int rank;
    int wide;                     // 1: 64-bit index arithmetic
};

// Up to OXI_MAX_PIECES tensors joined along one axis (ConcatV2, Pack) or cut from one
// tensor (SplitV, Unpack). The joined tensor is viewed as [outer, row]; piece p holds
// columns [col0 + offs[p], col0 + offs[p+1]) of every row, i.e. it is [outer, width_p]
// with width_p = offs[p+1] - offs[p] > 0. A launch handles one chunk of pieces; the
// launcher launches once per chunk.
struct PiecesMeta {
    u64 ptrs[OXI_MAX_PIECES];
    i64 offs[OXI_MAX_PIECES + 1];
    i64 outer;
    i64 row;   // row length of the joined tensor
    i64 col0;  // first column of this chunk
    int n;     // pieces in this chunk
    int wide;
};

// Transpose of the last two axes, x [batch, rows, cols] -> y [batch, cols, rows], through
// 32 x 32 tiles in shared memory so that both the reads and the writes are coalesced
// (TF's SwapDimension1And2InTensor3). Blocks are 32 x 8 threads, one tile per block and
// loop iteration; tiles_r = ceil(rows / 32), tiles_c = ceil(cols / 32).
struct SwapMeta {
    i64 batch;
    i64 rows;
    i64 cols;
    i64 tiles_r;
    i64 tiles_c;
    int wide;
    int _pad;
};

#define OXI_TILE 32
#define OXI_TILE_ROWS 8

// ------------------------------------------------------------------ index helpers

// Input offset of output element `t`: base + sum_d coord_d * in_strides[d].
template <typename I>
__device__ __forceinline__ i64 strided_offset(const MapMeta& m, I t) {
    i64 off = m.base;
    for (int d = m.rank - 1; d >= 0; --d) {
        I n = (I)m.out_dims[d];
        I c = t % n;
        t /= n;
        off += (i64)c * m.in_strides[d];
    }
    return off;
}

// Index of the piece that holds column `c` (0 <= c < offs[n]); offsets strictly increase.
__device__ __forceinline__ int find_piece(const PiecesMeta& m, i64 c) {
    int lo = 0, hi = m.n - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) >> 1;
        if (m.offs[mid] <= c) lo = mid; else hi = mid - 1;
    }
    return lo;
}

// ------------------------------------------------------------------ bodies

// y[t] = x[strided_offset(t)]: Transpose, ReverseV2, StridedSlice
// (reads out_dims, in_strides, base, total, rank).
template <typename T, typename I>
__device__ void strided_gather(const MapMeta& m, const T* __restrict__ x, T* __restrict__ y) {
    I total = (I)m.total;
    for (I t = (I)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (I)gridDim.x * blockDim.x) {
        y[t] = x[strided_offset<I>(m, t)];
    }
}

// Tile: input coordinate = output coordinate mod input dim
// (reads out_dims, in_dims, in_strides, total, rank).
template <typename T, typename I>
__device__ void tile_body(const MapMeta& m, const T* __restrict__ x, T* __restrict__ y) {
    I total = (I)m.total;
    for (I t = (I)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (I)gridDim.x * blockDim.x) {
        I r = t;
        i64 off = 0;
        for (int d = m.rank - 1; d >= 0; --d) {
            I n = (I)m.out_dims[d];
            I c = r % n;
            r /= n;
            off += (i64)(c % (I)m.in_dims[d]) * m.in_strides[d];
        }
        y[t] = x[off];
    }
}

// Pad with zeros: input coordinate = output coordinate - before, zero outside the input
// (reads out_dims, in_dims, in_strides, start = before, total, rank).
template <typename T, typename I>
__device__ void pad_body(const MapMeta& m, const T* __restrict__ x, T* __restrict__ y) {
    I total = (I)m.total;
    for (I t = (I)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (I)gridDim.x * blockDim.x) {
        I r = t;
        i64 off = 0;
        bool inside = true;
        for (int d = m.rank - 1; d >= 0; --d) {
            I n = (I)m.out_dims[d];
            i64 c = (i64)(r % n) - m.start[d];
            r /= n;
            inside = inside && c >= 0 && c < m.in_dims[d];
            off += c * m.in_strides[d];
        }
        y[t] = inside ? x[off] : (T)0;
    }
}

// StridedSliceGrad: y (the sliced tensor's shape) is dy where the output coordinate lies on
// the slice start[d] + k * step[d], 0 <= k < in_dims[d] (the slice length), zero elsewhere.
// dy is read at sum_d k_d * in_strides[d] (its row-major strides over the slice lengths,
// shrunk dimensions included with length 1). One pass over y, so no separate zero fill and
// no write conflicts. Reads out_dims, in_dims, in_strides, start, step, total, rank.
template <typename T, typename I>
__device__ void slice_grad_body(const MapMeta& m, const T* __restrict__ dy, T* __restrict__ y) {
    I total = (I)m.total;
    for (I t = (I)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (I)gridDim.x * blockDim.x) {
        I r = t;
        i64 off = 0;
        bool on = true;
        for (int d = m.rank - 1; d >= 0; --d) {
            I n = (I)m.out_dims[d];
            i64 q = (i64)(r % n) - m.start[d];
            r /= n;
            i64 s = m.step[d];
            if (s < 0) { q = -q; s = -s; }
            i64 k = q >= 0 ? q / s : -1;
            on = on && q >= 0 && k * s == q && k < m.in_dims[d];
            off += k * m.in_strides[d];
        }
        y[t] = on ? dy[off] : (T)0;
    }
}

// Join: out[o, col0 + c] = piece_p[o, c - offs[p]] over the chunk's columns.
template <typename T, typename I>
__device__ void join_body(const PiecesMeta& m, T* __restrict__ out) {
    I w = (I)m.offs[m.n];
    I total = (I)m.outer * w;
    for (I t = (I)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (I)gridDim.x * blockDim.x) {
        I o = t / w, c = t % w;
        int p = find_piece(m, (i64)c);
        I pw = (I)(m.offs[p + 1] - m.offs[p]);
        const T* src = (const T*)m.ptrs[p];
        out[o * (I)m.row + (I)m.col0 + c] = src[o * pw + (c - (I)m.offs[p])];
    }
}

// Cut: piece_p[o, c - offs[p]] = in[o, col0 + c] over the chunk's columns.
template <typename T, typename I>
__device__ void cut_body(const PiecesMeta& m, const T* __restrict__ in) {
    I w = (I)m.offs[m.n];
    I total = (I)m.outer * w;
    for (I t = (I)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (I)gridDim.x * blockDim.x) {
        I o = t / w, c = t % w;
        int p = find_piece(m, (i64)c);
        I pw = (I)(m.offs[p + 1] - m.offs[p]);
        T* dst = (T*)m.ptrs[p];
        dst[o * pw + (c - (I)m.offs[p])] = in[o * (I)m.row + (I)m.col0 + c];
    }
}

// Tiled transpose of the last two axes (SwapMeta); the loop over tiles is uniform across
// the block, so every thread reaches both barriers.
template <typename T, typename I>
__device__ void swap_tiled_body(const SwapMeta& m, const T* __restrict__ x, T* __restrict__ y) {
    __shared__ T tile[OXI_TILE][OXI_TILE + 1];
    I rows = (I)m.rows, cols = (I)m.cols, tiles_r = (I)m.tiles_r, tiles_c = (I)m.tiles_c;
    I ntiles = (I)m.batch * tiles_r * tiles_c;
    for (I k = blockIdx.x; k < ntiles; k += gridDim.x) {
        I tc = k % tiles_c;
        I tr = (k / tiles_c) % tiles_r;
        I b = k / (tiles_c * tiles_r);
        I r0 = tr * OXI_TILE, c0 = tc * OXI_TILE;
        for (int j = 0; j < OXI_TILE; j += OXI_TILE_ROWS) {
            I r = r0 + threadIdx.y + j, c = c0 + threadIdx.x;
            if (r < rows && c < cols) tile[threadIdx.y + j][threadIdx.x] = x[(b * rows + r) * cols + c];
        }
        __syncthreads();
        for (int j = 0; j < OXI_TILE; j += OXI_TILE_ROWS) {
            I c = c0 + threadIdx.y + j, r = r0 + threadIdx.x;
            if (c < cols && r < rows) y[(b * cols + c) * rows + r] = tile[threadIdx.x][threadIdx.y + j];
        }
        __syncthreads();
    }
}

// ------------------------------------------------------------------ entry points

// Map kernels: (MapMeta m, const T* x, T* y); 32/64-bit arithmetic chosen by m.wide.
#define OXI_MAP_ENTRY(NAME, BODY, T)                                                   \
    extern "C" __global__ void NAME(MapMeta m, const T* __restrict__ x, T* __restrict__ y) { \
        if (m.wide) BODY<T, u64>(m, x, y); else BODY<T, u32>(m, x, y);                   \
    }

// Join kernels: (PiecesMeta m, T* out); the pieces are read through m.ptrs.
#define OXI_JOIN_ENTRY(NAME, T)                                                        \
    extern "C" __global__ void NAME(PiecesMeta m, T* __restrict__ out) {               \
        if (m.wide) join_body<T, u64>(m, out); else join_body<T, u32>(m, out);         \
    }

// Cut kernels: (PiecesMeta m, const T* in); the pieces are written through m.ptrs.
#define OXI_CUT_ENTRY(NAME, T)                                                         \
    extern "C" __global__ void NAME(PiecesMeta m, const T* __restrict__ in) {          \
        if (m.wide) cut_body<T, u64>(m, in); else cut_body<T, u32>(m, in);             \
    }

// Tiled transpose helper entry `transpose_{dtype}_tiled`: (SwapMeta m, const T* x, T* y).
#define OXI_SWAP_ENTRY(NAME, T)                                                        \
    extern "C" __global__ void NAME(SwapMeta m, const T* __restrict__ x, T* __restrict__ y) { \
        if (m.wide) swap_tiled_body<T, u64>(m, x, y); else swap_tiled_body<T, u32>(m, x, y); \
    }

#define OXI_SHAPE_ENTRIES(SUF, T)                                        \
    OXI_MAP_ENTRY(transpose_##SUF, strided_gather, T)                    \
    OXI_SWAP_ENTRY(transpose_##SUF##_tiled, T)                           \
    OXI_MAP_ENTRY(reverse_v2_##SUF, strided_gather, T)                   \
    OXI_MAP_ENTRY(strided_slice_##SUF, strided_gather, T)                \
    OXI_MAP_ENTRY(tile_##SUF, tile_body, T)                              \
    OXI_MAP_ENTRY(pad_##SUF, pad_body, T)                                \
    OXI_MAP_ENTRY(strided_slice_grad_##SUF, slice_grad_body, T)          \
    OXI_JOIN_ENTRY(concat_v2_##SUF, T)                                   \
    OXI_JOIN_ENTRY(pack_##SUF, T)                                        \
    OXI_CUT_ENTRY(split_v_##SUF, T)                                      \
    OXI_CUT_ENTRY(unpack_##SUF, T)

OXI_SHAPE_ENTRIES(f32, float)
OXI_SHAPE_ENTRIES(f64, double)
OXI_SHAPE_ENTRIES(i32, int)
OXI_SHAPE_ENTRIES(i64, long long)
OXI_SHAPE_ENTRIES(bool, unsigned char)

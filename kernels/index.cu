// Indexing kernels (crates/oxiflow-core/src/ops/index.rs, ops/scatter.rs and the diagonal
// ops of ops/linalg.rs): GatherV2, GatherNd, ScatterNd, TensorScatterUpdate/Add/Sub,
// MatrixDiag, MatrixDiagPart.
//
// Header-free (compiled at run time by NVRTC). Entry points are `extern "C"` and named
// `{op}_{dtype}`: GatherV2/GatherNd/ScatterNd/TensorScatter* for f32 f64 i32 i64, MatrixDiag and
// MatrixDiagPart for f32 f64. The launchers are in crates/oxiflow-cuda/src/launch/movement/index.rs;
// the metadata structs below are mirrored there field for field (`#[repr(C)]`).
//
// Indices are Int32 or Int64 tensors (`idx64` says which) and are read as they are stored.
// Out-of-range indices follow TensorFlow's documented GPU behaviour, not its CPU error:
//   - GatherV2 / GatherNd write zeros for the output slice of a bad index
//     (tf.gather / tf.gather_nd: "on GPU, if an out of bound index is found, a 0 is stored
//     in the corresponding output value");
//   - ScatterNd and TensorScatter* skip the update of a bad index ("on GPU, if an out of
//     bound index is found, the index is ignored").
// In addition, when `bad` is not null the kernel records the lowest flat position of a bad
// index (GatherV2: position in `indices`; the others: the row of `indices`, i.e.
// its position in indices viewed as [rows, k]) with atomicMin into that 64-bit word, which
// the caller initialises to 0xFFFFFFFFFFFFFFFF. The launcher never synchronizes; a device
// that wants the CPU's error reads the word after the stream has run (see the launchers).

#define OXI_MAX_RANK 8

// GatherV2: params viewed as [outer, n, inner], indices as a flat list of `nidx`, output
// [outer, nidx, inner]; total = outer * nidx * inner.
struct GatherMeta {
    i64 outer;
    i64 n;
    i64 inner;
    i64 nidx;
    i64 total;
    int idx64;
    int wide;
};

// GatherNd / ScatterNd: `rows` index rows of `k` entries, each addressing the leading `k`
// dimensions `dims` of the indexed tensor (params for GatherNd, the output for ScatterNd),
// whose trailing slice has `inner` elements; total = rows * inner.
struct NdMeta {
    i64 dims[OXI_MAX_RANK];
    i64 rows;
    i64 inner;
    i64 total;
    int k;
    int idx64;
    int wide;
    int _pad;
};

// MatrixDiag: x [batch, n] -> y [batch, n, n] (total = batch * n * n).
// MatrixDiagPart: x [batch, rows, cols] -> y [batch, n], n = min(rows, cols)
// (total = batch * n).
struct DiagMeta {
    i64 rows;
    i64 cols;
    i64 n;
    i64 total;
    int wide;
    int _pad;
};

__device__ __forceinline__ i64 load_index(const void* p, i64 i, int idx64) {
    return idx64 ? ((const i64*)p)[i] : (i64)((const int*)p)[i];
}

__device__ __forceinline__ void flag_bad(u64* bad, i64 pos) {
    if (bad) atomicMin(bad, (u64)pos);
}

// Offset (in units of the trailing slice) of index row `r`, or -1 when an entry is out of
// range.
__device__ __forceinline__ i64 nd_row_offset(const NdMeta& m, const void* idx, i64 r) {
    i64 off = 0;
    for (int j = 0; j < m.k; ++j) {
        i64 v = load_index(idx, r * m.k + j, m.idx64);
        i64 d = m.dims[j];
        if (v < 0 || v >= d) return -1;
        off = off * d + v;
    }
    return off;
}

// ------------------------------------------------------------------ atomics for ScatterNd

__device__ __forceinline__ void atomic_add_elem(float* p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add_elem(double* p, double v) { atomicAdd(p, v); }  // sm_60+
__device__ __forceinline__ void atomic_add_elem(int* p, int v) { atomicAdd(p, v); }
// Two's-complement addition is the same for signed and unsigned 64-bit words.
__device__ __forceinline__ void atomic_add_elem(long long* p, long long v) {
    atomicAdd((u64*)p, (u64)v);
}

// ------------------------------------------------------------------ bodies

template <typename T, typename I>
__device__ void gather_body(const GatherMeta& m, const T* __restrict__ params, const void* __restrict__ idx,
                            T* __restrict__ out, u64* bad) {
    I total = (I)m.total, inner = (I)m.inner, nidx = (I)m.nidx, n = (I)m.n;
    for (I t = (I)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (I)gridDim.x * blockDim.x) {
        I j = t % inner;
        I r = t / inner;
        I q = r % nidx;
        I o = r / nidx;
        i64 v = load_index(idx, (i64)q, m.idx64);
        if (v >= 0 && v < m.n) {
            out[t] = params[(o * n + (I)v) * inner + j];
        } else {
            out[t] = (T)0;
            if (j == 0) flag_bad(bad, (i64)q);
        }
    }
}

template <typename T, typename I>
__device__ void gather_nd_body(const NdMeta& m, const T* __restrict__ params, const void* __restrict__ idx,
                               T* __restrict__ out, u64* bad) {
    I total = (I)m.total, inner = (I)m.inner;
    for (I t = (I)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (I)gridDim.x * blockDim.x) {
        I j = t % inner;
        I r = t / inner;
        i64 off = nd_row_offset(m, idx, (i64)r);
        if (off >= 0) {
            out[t] = params[(I)off * inner + j];
        } else {
            out[t] = (T)0;
            if (j == 0) flag_bad(bad, (i64)r);
        }
    }
}

// TensorScatterUpdate / Add / Sub: the output holds a copy of the tensor (the launcher
// enqueues a device-to-device copy first); `op` 0 replaces each index row's slice (of rows
// repeated, one write wins, unspecified which, as in TF), 1 adds to it, 2 subtracts.
// ScatterNd is `op` 1 on an output the launcher has zero-filled (a memset).
__device__ __forceinline__ float neg_elem(float v) { return -v; }
__device__ __forceinline__ double neg_elem(double v) { return -v; }
// Two's-complement negation, wrapping as the CPU kernels' wrapping_sub.
__device__ __forceinline__ int neg_elem(int v) { return (int)(0u - (unsigned)v); }
__device__ __forceinline__ long long neg_elem(long long v) { return (long long)(0ull - (u64)v); }

template <typename T, typename I>
__device__ void tensor_scatter_body(const NdMeta& m, const void* __restrict__ idx, const T* __restrict__ upd,
                                    T* __restrict__ out, u64* bad, int op) {
    I total = (I)m.total, inner = (I)m.inner;
    for (I t = (I)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (I)gridDim.x * blockDim.x) {
        I j = t % inner;
        I r = t / inner;
        i64 off = nd_row_offset(m, idx, (i64)r);
        if (off >= 0) {
            T* p = &out[(I)off * inner + j];
            if (op == 0) *p = upd[t];
            else if (op == 1) atomic_add_elem(p, upd[t]);
            else atomic_add_elem(p, neg_elem(upd[t]));
        } else if (j == 0) {
            flag_bad(bad, (i64)r);
        }
    }
}

template <typename T, typename I>
__device__ void matrix_diag_body(const DiagMeta& m, const T* __restrict__ x, T* __restrict__ y) {
    I total = (I)m.total, n = (I)m.n;
    for (I t = (I)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (I)gridDim.x * blockDim.x) {
        I c = t % n;
        I r = (t / n) % n;
        I b = t / (n * n);
        y[t] = r == c ? x[b * n + r] : (T)0;
    }
}

template <typename T, typename I>
__device__ void matrix_diag_part_body(const DiagMeta& m, const T* __restrict__ x, T* __restrict__ y) {
    I total = (I)m.total, n = (I)m.n, rows = (I)m.rows, cols = (I)m.cols;
    for (I t = (I)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (I)gridDim.x * blockDim.x) {
        I i = t % n;
        I b = t / n;
        y[t] = x[b * rows * cols + i * cols + i];
    }
}

// ------------------------------------------------------------------ entry points

#define OXI_TENSOR_SCATTER_ENTRY(NAME, T, OP)                                                          \
    extern "C" __global__ void NAME(NdMeta m, const void* __restrict__ idx, const T* __restrict__ upd,    \
                                    T* __restrict__ out, u64* bad) {                                   \
        if (m.wide) tensor_scatter_body<T, u64>(m, idx, upd, out, bad, OP);                            \
        else tensor_scatter_body<T, u32>(m, idx, upd, out, bad, OP);                                   \
    }

#define OXI_INDEX_ENTRIES(SUF, T)                                                                      \
    extern "C" __global__ void gather_v2_##SUF(GatherMeta m, const T* __restrict__ params,             \
                                               const void* __restrict__ idx, T* __restrict__ out,      \
                                               u64* bad) {                                             \
        if (m.wide) gather_body<T, u64>(m, params, idx, out, bad);                                     \
        else gather_body<T, u32>(m, params, idx, out, bad);                                            \
    }                                                                                                  \
    extern "C" __global__ void gather_nd_##SUF(NdMeta m, const T* __restrict__ params,                 \
                                               const void* __restrict__ idx, T* __restrict__ out,      \
                                               u64* bad) {                                             \
        if (m.wide) gather_nd_body<T, u64>(m, params, idx, out, bad);                                  \
        else gather_nd_body<T, u32>(m, params, idx, out, bad);                                         \
    }                                                                                                  \
    extern "C" __global__ void scatter_nd_##SUF(NdMeta m, const void* __restrict__ idx,                \
                                                const T* __restrict__ upd, T* __restrict__ out,        \
                                                u64* bad) {                                            \
        if (m.wide) tensor_scatter_body<T, u64>(m, idx, upd, out, bad, 1);                             \
        else tensor_scatter_body<T, u32>(m, idx, upd, out, bad, 1);                                    \
    }                                                                                                  \
    OXI_TENSOR_SCATTER_ENTRY(tensor_scatter_update_##SUF, T, 0)                                        \
    OXI_TENSOR_SCATTER_ENTRY(tensor_scatter_add_##SUF, T, 1)                                           \
    OXI_TENSOR_SCATTER_ENTRY(tensor_scatter_sub_##SUF, T, 2)

#define OXI_DIAG_ENTRIES(SUF, T)                                                                       \
    extern "C" __global__ void matrix_diag_##SUF(DiagMeta m, const T* __restrict__ x, T* __restrict__ y) { \
        if (m.wide) matrix_diag_body<T, u64>(m, x, y); else matrix_diag_body<T, u32>(m, x, y);         \
    }                                                                                                  \
    extern "C" __global__ void matrix_diag_part_##SUF(DiagMeta m, const T* __restrict__ x,             \
                                                      T* __restrict__ y) {                             \
        if (m.wide) matrix_diag_part_body<T, u64>(m, x, y);                                            \
        else matrix_diag_part_body<T, u32>(m, x, y);                                                   \
    }

OXI_INDEX_ENTRIES(f32, float)
OXI_INDEX_ENTRIES(f64, double)
OXI_INDEX_ENTRIES(i32, int)
OXI_INDEX_ENTRIES(i64, long long)

OXI_DIAG_ENTRIES(f32, float)
OXI_DIAG_ENTRIES(f64, double)

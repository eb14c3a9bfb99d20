// Reductions: Sum Mean Max Min Prod over any set of axes, ArgMax ArgMin over one axis, and
// Softmax and SoftmaxCrossEntropyWithLogits over the last axis. Header-free (NVRTC built-ins only).
//
// Entry points, for Sum Mean Max Min Prod with T in {f32, f64} and ArgMax ArgMin with T in
// {f32, f64, i32, i64} (`op` is the snake-case op name, launch::entry_name):
//
//   {op}_{T}(const T* x, Out* out, Red m)          one pass: input -> output
//   {op}_{T}_partial(const T* x, Acc* part, Red m)  pass 1 of 2: input -> per-segment partials
//   {op}_{T}_finish(const Acc* part, Out* out, Red m) pass 2 of 2: partials -> output
//   softmax_{f32,f64}(const T* x, T* y, long long rows, long long len)
//   softmax_cross_entropy_with_logits_{f32,f64}(const T* x, const T* labels, T* loss,
//                                               T* backprop, long long rows, long long len)
//
// Work decomposition (`Red`, mirrored by `RedMeta` in src/launch/meta.rs): the host
// collapses the input into kept axes (`k_*`, the output's order) and reduced axes (`r_*`),
// each with its element strides in the input. Every output element's `r_len` reduced
// elements are split into `segs` segments of `seg_len`; a task is one (segment, output)
// pair, numbered `s * num_out + o`, and partials are stored at that number, so pass 2 reads
// them as an input of shape [segs, num_out] reduced over axis 0. A task is done either by
// one block (`per_thread == 0`: the threads stride over the segment, then a tree
// reduction in shared memory; used when the innermost input axis is reduced, so loads are
// contiguous) or by one thread (`per_thread == 1`: used when the innermost axis is kept,
// so neighbouring threads read neighbouring elements). No atomics: results are
// deterministic for a given launch configuration.
//
// Semantics (crates/oxiflow-core/src/ops/{reduce,array,nn}.rs):
// - Max/Min propagate NaN (any NaN in the group gives NaN); identities are -inf / +inf.
// - Mean is the sum divided by the number of reduced elements (`count`).
// - ArgMax/ArgMin return the index of the first extremum; they follow the CPU's sequential
//   scan exactly: a NaN at index 0 wins (the scan never leaves it), any other NaN is never
//   chosen. As a total order this is associative, so the tree gives the scan's answer.
//   The output is Int64, or Int32 when `out_i64 == 0`.
// - Softmax: y = exp(x - max) / sum(exp(x - max)) per row, max ignoring NaN as the CPU's
//   `x > m` fold does.
// - SoftmaxCrossEntropyWithLogits (ops/loss.rs): per row, with s = x - max (max as Softmax's)
//   and lse = log(sum(exp(s))), loss = sum(labels * (lse - s)) and
//   backprop = exp(s) / sum(exp(s)) - labels.

#define MAX_RANK 8
#define MAX_BLOCK 256

struct Red {
    i64 num_out;
    i64 r_len;
    i64 seg_len;
    i64 segs;
    i64 count;
    int k_rank;
    int r_rank;
    int per_thread;
    int out_i64;
    i64 k_dims[MAX_RANK];
    i64 k_strides[MAX_RANK];
    i64 r_dims[MAX_RANK];
    i64 r_strides[MAX_RANK];
};

__device__ __forceinline__ i64 decode(i64 i, int rank, const i64* dims, const i64* strides) {
    if (rank == 0) return 0;
    if (rank == 1) return i * strides[0];
    i64 off = 0;
    for (int d = rank - 1; d >= 0; d--) {
        i64 c = i % dims[d];
        i /= dims[d];
        off += c * strides[d];
    }
    return off;
}

template <typename T> struct Lim;
template <> struct Lim<float>  { __device__ static float inf()  { return __int_as_float(0x7f800000); } };
template <> struct Lim<double> { __device__ static double inf() { return __longlong_as_double(0x7ff0000000000000LL); } };

// ------------------------------------------------------------------ ops
// Each op: Acc type, identity(), lift(x, r) (input element at reduced position r),
// combine(a, b), store(out, o, acc, m).

template <typename T> struct SumOp {
    typedef T Acc;
    __device__ static Acc identity() { return T(0); }
    __device__ static Acc lift(T x, i64) { return x; }
    __device__ static Acc combine(Acc a, Acc b) { return a + b; }
    __device__ static void store(void* out, i64 o, Acc a, const Red&) { ((T*)out)[o] = a; }
};
template <typename T> struct MeanOp : SumOp<T> {
    __device__ static void store(void* out, i64 o, T a, const Red& m) { ((T*)out)[o] = a / (T)m.count; }
};
template <typename T> struct ProdOp {
    typedef T Acc;
    __device__ static Acc identity() { return T(1); }
    __device__ static Acc lift(T x, i64) { return x; }
    __device__ static Acc combine(Acc a, Acc b) { return a * b; }
    __device__ static void store(void* out, i64 o, Acc a, const Red&) { ((T*)out)[o] = a; }
};
// reduce.rs max_of: `b > a || isnan(b) ? b : a` (NaN absorbs).
template <typename T> struct MaxOp {
    typedef T Acc;
    __device__ static Acc identity() { return -Lim<T>::inf(); }
    __device__ static Acc lift(T x, i64) { return x; }
    __device__ static Acc combine(Acc a, Acc b) { return (b > a || is_nan(b)) ? b : a; }
    __device__ static void store(void* out, i64 o, Acc a, const Red&) { ((T*)out)[o] = a; }
};
template <typename T> struct MinOp {
    typedef T Acc;
    __device__ static Acc identity() { return Lim<T>::inf(); }
    __device__ static Acc lift(T x, i64) { return x; }
    __device__ static Acc combine(Acc a, Acc b) { return (b < a || is_nan(b)) ? b : a; }
    __device__ static void store(void* out, i64 o, Acc a, const Red&) { ((T*)out)[o] = a; }
};

// (value, index) with index -1 for "no element yet". Plain struct: lives in shared memory.
template <typename T> struct ArgAcc { T v; i64 i; };

// Rank of an element in the CPU scan's order: 2 for a NaN at index 0 (always kept), 1 for
// numbers, 0 for any other NaN (never chosen).
template <typename T> __device__ __forceinline__ int arg_class(const ArgAcc<T>& a) {
    if (!is_nan(a.v)) return 1;
    return a.i == 0 ? 2 : 0;
}

template <typename T, bool MAX> struct ArgOp {
    typedef ArgAcc<T> Acc;
    __device__ static Acc identity() { Acc a; a.v = T(0); a.i = -1; return a; }
    __device__ static Acc lift(T x, i64 r) { Acc a; a.v = x; a.i = r; return a; }
    // `b` wins over `a`? A total order: class, then value (larger for ArgMax), then the
    // smaller index.
    __device__ static bool better(const Acc& b, const Acc& a) {
        int cb = arg_class(b), ca = arg_class(a);
        if (cb != ca) return cb > ca;
        if (cb == 1 && b.v != a.v) return MAX ? (b.v > a.v) : (b.v < a.v);
        return b.i < a.i;
    }
    __device__ static Acc combine(Acc a, Acc b) {
        if (a.i < 0) return b;
        if (b.i < 0) return a;
        return better(b, a) ? b : a;
    }
    __device__ static void store(void* out, i64 o, Acc a, const Red& m) {
        i64 idx = a.i < 0 ? 0 : a.i;
        if (m.out_i64) ((i64*)out)[o] = idx;
        else ((int*)out)[o] = (int)idx;
    }
};

// ------------------------------------------------------------------ the reduction

// ROLE 0: input -> output; 1: input -> partials; 2: partials -> output.
template <typename Op, typename In, int ROLE>
__device__ __forceinline__ typename Op::Acc fetch(const void* x, i64 off, i64 r) {
    if (ROLE == 2) return ((const typename Op::Acc*)x)[off];
    return Op::lift(((const In*)x)[off], r);
}

template <typename Op, int ROLE>
__device__ __forceinline__ void put(void* out, i64 task, i64 o, typename Op::Acc a, const Red& m) {
    if (ROLE == 1) ((typename Op::Acc*)out)[task] = a;
    else Op::store(out, o, a, m);
}

template <typename Op, typename In, int ROLE>
__device__ __forceinline__ void reduce(const void* __restrict__ x, void* __restrict__ out, const Red& m) {
    typedef typename Op::Acc Acc;
    const i64 tasks = m.num_out * m.segs;
    if (m.per_thread) {
        for (i64 b = (i64)blockIdx.x * blockDim.x + threadIdx.x; b < tasks; b += (i64)gridDim.x * blockDim.x) {
            i64 s = b / m.num_out, o = b - s * m.num_out;
            i64 base = decode(o, m.k_rank, m.k_dims, m.k_strides);
            i64 r0 = s * m.seg_len, r1 = r0 + m.seg_len < m.r_len ? r0 + m.seg_len : m.r_len;
            Acc acc = Op::identity();
            for (i64 r = r0; r < r1; r++) {
                acc = Op::combine(acc, fetch<Op, In, ROLE>(x, base + decode(r, m.r_rank, m.r_dims, m.r_strides), r));
            }
            put<Op, ROLE>(out, b, o, acc, m);
        }
        return;
    }
    __shared__ Acc sh[MAX_BLOCK];
    const unsigned t = threadIdx.x;
    for (i64 b = blockIdx.x; b < tasks; b += gridDim.x) {
        i64 s = b / m.num_out, o = b - s * m.num_out;
        i64 base = decode(o, m.k_rank, m.k_dims, m.k_strides);
        i64 r0 = s * m.seg_len, r1 = r0 + m.seg_len < m.r_len ? r0 + m.seg_len : m.r_len;
        Acc acc = Op::identity();
        for (i64 r = r0 + t; r < r1; r += blockDim.x) {
            acc = Op::combine(acc, fetch<Op, In, ROLE>(x, base + decode(r, m.r_rank, m.r_dims, m.r_strides), r));
        }
        sh[t] = acc;
        __syncthreads();
        // blockDim.x is a power of two <= MAX_BLOCK (the launcher guarantees it).
        for (unsigned w = blockDim.x / 2; w > 0; w >>= 1) {
            if (t < w) sh[t] = Op::combine(sh[t], sh[t + w]);
            __syncthreads();
        }
        if (t == 0) put<Op, ROLE>(out, b, o, sh[0], m);
        __syncthreads();
    }
}

#define REDUCE3(name, sfx, OP, T)                                                                           \
    extern "C" __global__ void name##_##sfx(const T* x, void* out, Red m) { reduce<OP, T, 0>(x, out, m); }           \
    extern "C" __global__ void name##_##sfx##_partial(const T* x, void* part, Red m) { reduce<OP, T, 1>(x, part, m); } \
    extern "C" __global__ void name##_##sfx##_finish(const void* part, void* out, Red m) { reduce<OP, T, 2>(part, out, m); }

#define REDUCE_FLOAT(name, OPT)                \
    REDUCE3(name, f32, OPT<float>, float)      \
    REDUCE3(name, f64, OPT<double>, double)

REDUCE_FLOAT(sum, SumOp)
REDUCE_FLOAT(mean, MeanOp)
REDUCE_FLOAT(prod, ProdOp)
REDUCE_FLOAT(max, MaxOp)
REDUCE_FLOAT(min, MinOp)

// ArgMax/ArgMin instantiations (a macro argument cannot hold the comma of a template).
typedef ArgOp<float, true> ArgMaxF32;
typedef ArgOp<double, true> ArgMaxF64;
typedef ArgOp<int, true> ArgMaxI32;
typedef ArgOp<long long, true> ArgMaxI64;
typedef ArgOp<float, false> ArgMinF32;
typedef ArgOp<double, false> ArgMinF64;
typedef ArgOp<int, false> ArgMinI32;
typedef ArgOp<long long, false> ArgMinI64;

REDUCE3(arg_max, f32, ArgMaxF32, float)
REDUCE3(arg_max, f64, ArgMaxF64, double)
REDUCE3(arg_max, i32, ArgMaxI32, int)
REDUCE3(arg_max, i64, ArgMaxI64, long long)
REDUCE3(arg_min, f32, ArgMinF32, float)
REDUCE3(arg_min, f64, ArgMinF64, double)
REDUCE3(arg_min, i32, ArgMinI32, int)
REDUCE3(arg_min, i64, ArgMinI64, long long)

// ------------------------------------------------------------------ Softmax

__device__ __forceinline__ float  m_exp(float x)  { return expf(x); }
__device__ __forceinline__ double m_exp(double x) { return exp(x); }

__device__ __forceinline__ float  m_log(float x)  { return logf(x); }
__device__ __forceinline__ double m_log(double x) { return log(x); }

// The sum of every thread's v over the block (blockDim.x a power of two), through sh.
template <typename T>
__device__ __forceinline__ T block_sum(T* sh, T v) {
    const unsigned t = threadIdx.x;
    sh[t] = v;
    __syncthreads();
    for (unsigned w = blockDim.x / 2; w > 0; w >>= 1) {
        if (t < w) sh[t] = sh[t] + sh[t + w];
        __syncthreads();
    }
    T r = sh[0];
    __syncthreads();
    return r;
}

// The max of row xr[0..len) over the block, NaN ignored (nn.rs: `if x > m { x } else { m }`
// from -inf), through sh.
template <typename T>
__device__ __forceinline__ T row_max(T* sh, const T* __restrict__ xr, i64 len) {
    const unsigned t = threadIdx.x;
    T mx = -Lim<T>::inf();
    for (i64 j = t; j < len; j += blockDim.x) { T v = xr[j]; mx = v > mx ? v : mx; }
    sh[t] = mx;
    __syncthreads();
    for (unsigned w = blockDim.x / 2; w > 0; w >>= 1) {
        if (t < w) { T o = sh[t + w]; sh[t] = o > sh[t] ? o : sh[t]; }
        __syncthreads();
    }
    mx = sh[0];
    __syncthreads();
    return mx;
}

// The row's max (row_max, into mx) and sum(exp(xr - mx)) over the block.
template <typename T>
__device__ __forceinline__ T row_exp_sum(T* sh, const T* __restrict__ xr, i64 len, T& mx) {
    mx = row_max(sh, xr, len);
    T part = T(0);
    for (i64 j = threadIdx.x; j < len; j += blockDim.x) part += m_exp(xr[j] - mx);
    return block_sum(sh, part);
}

// One block per row (grid-stride over rows); blockDim.x a power of two <= MAX_BLOCK.
template <typename T>
__device__ __forceinline__ void softmax(const T* __restrict__ x, T* __restrict__ y, i64 rows, i64 len) {
    __shared__ T sh[MAX_BLOCK];
    const unsigned t = threadIdx.x;
    for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {
        const T* xr = x + row * len;
        T* yr = y + row * len;
        T mx;
        const T sum = row_exp_sum(sh, xr, len, mx);
        for (i64 j = t; j < len; j += blockDim.x) yr[j] = m_exp(xr[j] - mx) / sum;
    }
}
extern "C" __global__ void softmax_f32(const float* x, float* y, i64 rows, i64 len) { softmax<float>(x, y, rows, len); }
extern "C" __global__ void softmax_f64(const double* x, double* y, i64 rows, i64 len) { softmax<double>(x, y, rows, len); }

// ------------------------------------------------------------------ SoftmaxCrossEntropyWithLogits

// One block per row (grid-stride over rows), as softmax; three block reductions per row:
// the max, the sum of exp(s), the loss.
template <typename T>
__device__ __forceinline__ void softmax_xent(const T* __restrict__ x, const T* __restrict__ lab, T* __restrict__ loss,
                                             T* __restrict__ bp, i64 rows, i64 len) {
    __shared__ T sh[MAX_BLOCK];
    const unsigned t = threadIdx.x;
    for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {
        const T* xr = x + row * len;
        const T* lr = lab + row * len;
        T* br = bp + row * len;
        T mx;
        const T sum = row_exp_sum(sh, xr, len, mx);
        const T lse = m_log(sum);
        T part = T(0);
        for (i64 j = t; j < len; j += blockDim.x) {
            const T s = xr[j] - mx;
            part += lr[j] * (lse - s);
            br[j] = m_exp(s) / sum - lr[j];
        }
        const T l = block_sum(sh, part);
        if (t == 0) loss[row] = l;
    }
}
extern "C" __global__ void softmax_cross_entropy_with_logits_f32(const float* x, const float* lab, float* loss, float* bp, i64 rows, i64 len) {
    softmax_xent<float>(x, lab, loss, bp, rows, len);
}
extern "C" __global__ void softmax_cross_entropy_with_logits_f64(const double* x, const double* lab, double* loss, double* bp, i64 rows, i64 len) {
    softmax_xent<double>(x, lab, loss, bp, rows, len);
}

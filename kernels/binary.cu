// Broadcasting binary kernels, comparisons, SelectV2, BroadcastTo and AddN.
//
// Header-free (NVRTC built-ins only). Entry points (launch::entry_name):
//
//   {add,sub,mul,real_div,pow,maximum,minimum,floor_div,floor_mod}_{f32,f64}(const T* a, const T* b, T* out, Bcast m)
//   {add,sub,mul,maximum,minimum}_i64(const i64* a, const i64* b, i64* out, Bcast m)
//   {equal,greater,greater_equal,less,less_equal}_{f32,f64,i64}(const T* a, const T* b, bool* out, Bcast m)
//   select_v2_{f32,f64,bool}(const bool* c, const T* x, const T* y, T* out, Bcast m)
//   broadcast_to_{f32,f64,i32,i64,bool}(const T* x, T* out, Bcast m)
//   add_n_{f32,f64}(Ptrs8 in, int count, T* out, long long n)
//
// NumPy broadcasting: `Bcast` (below; mirrored by `BcastMeta` in
// crates/oxiflow-cuda/src/launch/meta.rs) holds the output dims and, per operand, the
// element stride of each output axis (0 where the operand is broadcast). The host merges
// adjacent axes that are contiguous in every operand, so most launches have rank <= 2.
// `rank == 0` is the fast path: operand k's element is `i * strides[k][0]` (stride 1 for a
// full operand, 0 for a single element), no index arithmetic at all.
//
// Semantics mirror crates/oxiflow-core/src/ops/{math,nn}.rs: Maximum/Minimum propagate a
// NaN in `a` (`a > b || isnan(a) ? a : b`), comparisons are IEEE (false with NaN), Pow is
// `pow`, RealDiv is `/`. FloorDiv is `floor(a / b)`; FloorMod is `fmod(a, b)` moved by `b`
// when nonzero and of the other sign than `b` (the divisor's sign, Python's `%`; TF's
// google_floor_fmod, math.rs `FloorArith`); fmod is exact, so both match the CPU bit for
// bit. AddN adds its inputs left to right, as the CPU kernel.

#define MAX_RANK 8

struct Bcast {
    i64 n;                       // output elements
    int rank;                    // 0: flat fast path
    int pad_;
    i64 dims[MAX_RANK];          // output dims (collapsed)
    i64 strides[3][MAX_RANK];    // per operand, element strides per output axis
};

// Element offsets of output element `i` in up to 3 operands; `I` is the index type
// (32-bit when the output has fewer than 2^31 elements: cheaper division).
template <typename I, int NOPS>
__device__ __forceinline__ void offsets(const Bcast& m, i64 i, i64* off) {
    if (m.rank == 0) {
#pragma unroll
        for (int k = 0; k < NOPS; k++) off[k] = i * m.strides[k][0];
        return;
    }
#pragma unroll
    for (int k = 0; k < NOPS; k++) off[k] = 0;
    I rem = (I)i;
    for (int d = m.rank - 1; d >= 0; d--) {
        I dim = (I)m.dims[d];
        I c = rem % dim;
        rem = rem / dim;
#pragma unroll
        for (int k = 0; k < NOPS; k++) off[k] += (i64)c * m.strides[k][d];
    }
}

// ------------------------------------------------------------------ functors

// The i64 overloads compute in u64: wrapping on overflow is defined there (signed overflow
// is not in C++), and it is what the CPU kernels do.
struct Add {
    template <typename T> __device__ T operator()(T a, T b) const { return a + b; }
    __device__ i64 operator()(i64 a, i64 b) const { return (i64)((u64)a + (u64)b); }
};
struct Sub {
    template <typename T> __device__ T operator()(T a, T b) const { return a - b; }
    __device__ i64 operator()(i64 a, i64 b) const { return (i64)((u64)a - (u64)b); }
};
struct Mul {
    template <typename T> __device__ T operator()(T a, T b) const { return a * b; }
    __device__ i64 operator()(i64 a, i64 b) const { return (i64)((u64)a * (u64)b); }
};
struct RealDiv { template <typename T> __device__ T operator()(T a, T b) const { return a / b; } };
__device__ __forceinline__ float  m_pow(float a, float b)   { return powf(a, b); }
__device__ __forceinline__ double m_pow(double a, double b) { return pow(a, b); }
struct Pow     { template <typename T> __device__ T operator()(T a, T b) const { return m_pow(a, b); } };
__device__ __forceinline__ float  m_fmod(float a, float b)    { return fmodf(a, b); }
__device__ __forceinline__ double m_fmod(double a, double b)  { return fmod(a, b); }
struct FloorDiv { template <typename T> __device__ T operator()(T a, T b) const { return m_floor(a / b); } };
struct FloorMod {
    template <typename T> __device__ T operator()(T a, T b) const {
        T r = m_fmod(a, b);
        return (r != T(0) && ((r < T(0)) != (b < T(0)))) ? r + b : r;
    }
};
struct Maximum { template <typename T> __device__ T operator()(T a, T b) const { return (a > b || a != a) ? a : b; } };
struct Minimum { template <typename T> __device__ T operator()(T a, T b) const { return (a < b || a != a) ? a : b; } };
// TanhGrad(y, dy) = dy * (1 - y*y), SigmoidGrad(y, dy) = dy * y * (1 - y) (Eigen's
// scalar_tanh_gradient_op / scalar_sigmoid_gradient_op); operands of one shape.
struct TanhGrad    { template <typename T> __device__ T operator()(T y, T dy) const { return dy * (T(1) - y * y); } };
struct SigmoidGrad { template <typename T> __device__ T operator()(T y, T dy) const { return dy * y * (T(1) - y); } };
// ReluGrad(dy, y) = dy where y > 0, else 0 (TF's operand order; a select, as the CPU kernel:
// a NaN or infinite dy where y <= 0 gives 0, not TF's dy * 0)
struct ReluGrad    { template <typename T> __device__ T operator()(T dy, T y) const { return y > T(0) ? dy : T(0); } };

struct Equal        { template <typename T> __device__ bool operator()(T a, T b) const { return a == b; } };
struct Greater      { template <typename T> __device__ bool operator()(T a, T b) const { return a > b; } };
struct GreaterEqual { template <typename T> __device__ bool operator()(T a, T b) const { return a >= b; } };
struct Less         { template <typename T> __device__ bool operator()(T a, T b) const { return a < b; } };
struct LessEqual    { template <typename T> __device__ bool operator()(T a, T b) const { return a <= b; } };

// ------------------------------------------------------------------ kernels

// Elements per thread per loop iteration (see elementwise.cu): all loads first, then the
// stores; the launcher sizes the grid for n / UNROLL threads.
#define UNROLL 4

template <typename I, typename T, typename O, typename F>
__device__ __forceinline__ void binary_body(const T* __restrict__ a, const T* __restrict__ b, O* __restrict__ out, const Bcast& m) {
    F f;
    const i64 stride = (i64)gridDim.x * blockDim.x;
    i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + (UNROLL - 1) * stride < m.n; i += UNROLL * stride) {
        T va[UNROLL], vb[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            i64 off[2];
            offsets<I, 2>(m, i + u * stride, off);
            va[u] = a[off[0]];
            vb[u] = b[off[1]];
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) out[i + u * stride] = f(va[u], vb[u]);
    }
    for (; i < m.n; i += stride) {
        i64 off[2];
        offsets<I, 2>(m, i, off);
        out[i] = f(a[off[0]], b[off[1]]);
    }
}

template <typename T, typename O, typename F>
__device__ __forceinline__ void binary(const T* a, const T* b, O* out, const Bcast& m) {
    if (m.n <= 0x7fffffffLL) binary_body<unsigned int, T, O, F>(a, b, out, m);
    else binary_body<u64, T, O, F>(a, b, out, m);
}

#define BINARY(name, F)                                                                                  \
    extern "C" __global__ void name##_f32(const float* a, const float* b, float* out, Bcast m) {         \
        binary<float, float, F>(a, b, out, m);                                                           \
    }                                                                                                    \
    extern "C" __global__ void name##_f64(const double* a, const double* b, double* out, Bcast m) {     \
        binary<double, double, F>(a, b, out, m);                                                         \
    }

// Int64 entries of the ops TF registers an int64 GPU kernel for (Add, Sub, Mul, Maximum,
// Minimum and the comparisons).
#define BINARY_I64(name, F)                                                                              \
    extern "C" __global__ void name##_i64(const i64* a, const i64* b, i64* out, Bcast m) {               \
        binary<i64, i64, F>(a, b, out, m);                                                               \
    }

#define COMPARE(name, F)                                                                                 \
    extern "C" __global__ void name##_f32(const float* a, const float* b, bool* out, Bcast m) {          \
        binary<float, bool, F>(a, b, out, m);                                                            \
    }                                                                                                    \
    extern "C" __global__ void name##_f64(const double* a, const double* b, bool* out, Bcast m) {        \
        binary<double, bool, F>(a, b, out, m);                                                           \
    }                                                                                                    \
    extern "C" __global__ void name##_i64(const i64* a, const i64* b, bool* out, Bcast m) {              \
        binary<i64, bool, F>(a, b, out, m);                                                              \
    }

BINARY(add, Add)
BINARY(sub, Sub)
BINARY(mul, Mul)
BINARY(real_div, RealDiv)
BINARY(pow, Pow)
BINARY(maximum, Maximum)
BINARY(minimum, Minimum)
BINARY_I64(add, Add)
BINARY_I64(sub, Sub)
BINARY_I64(mul, Mul)
BINARY_I64(maximum, Maximum)
BINARY_I64(minimum, Minimum)
BINARY(floor_div, FloorDiv)
BINARY(floor_mod, FloorMod)
BINARY(tanh_grad, TanhGrad)
BINARY(sigmoid_grad, SigmoidGrad)
BINARY(relu_grad, ReluGrad)
COMPARE(equal, Equal)
COMPARE(greater, Greater)
COMPARE(greater_equal, GreaterEqual)
COMPARE(less, Less)
COMPARE(less_equal, LessEqual)

// SelectV2(c, x, y): x where c, else y; all three broadcast to the output.
template <typename I, typename T>
__device__ __forceinline__ void select_body(const bool* __restrict__ c, const T* __restrict__ x, const T* __restrict__ y,
                                            T* __restrict__ out, const Bcast& m) {
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < m.n; i += (i64)gridDim.x * blockDim.x) {
        i64 off[3];
        offsets<I, 3>(m, i, off);
        out[i] = c[off[0]] ? x[off[1]] : y[off[2]];
    }
}
template <typename T>
__device__ __forceinline__ void select_v2(const bool* c, const T* x, const T* y, T* out, const Bcast& m) {
    if (m.n <= 0x7fffffffLL) select_body<unsigned int, T>(c, x, y, out, m);
    else select_body<u64, T>(c, x, y, out, m);
}
extern "C" __global__ void select_v2_f32(const bool* c, const float* x, const float* y, float* out, Bcast m) { select_v2<float>(c, x, y, out, m); }
extern "C" __global__ void select_v2_f64(const bool* c, const double* x, const double* y, double* out, Bcast m) { select_v2<double>(c, x, y, out, m); }
extern "C" __global__ void select_v2_bool(const bool* c, const bool* x, const bool* y, bool* out, Bcast m) { select_v2<bool>(c, x, y, out, m); }

// BroadcastTo: out[i] = x[offset of i]; also used by the BatchMatMulV2 launcher to
// materialize a broadcast batch operand.
template <typename I, typename T>
__device__ __forceinline__ void bcast_body(const T* __restrict__ x, T* __restrict__ out, const Bcast& m) {
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < m.n; i += (i64)gridDim.x * blockDim.x) {
        i64 off[1];
        offsets<I, 1>(m, i, off);
        out[i] = x[off[0]];
    }
}
template <typename T>
__device__ __forceinline__ void broadcast_to(const T* x, T* out, const Bcast& m) {
    if (m.n <= 0x7fffffffLL) bcast_body<unsigned int, T>(x, out, m);
    else bcast_body<u64, T>(x, out, m);
}
extern "C" __global__ void broadcast_to_f32(const float* x, float* out, Bcast m) { broadcast_to<float>(x, out, m); }
extern "C" __global__ void broadcast_to_f64(const double* x, double* out, Bcast m) { broadcast_to<double>(x, out, m); }
extern "C" __global__ void broadcast_to_i32(const int* x, int* out, Bcast m) { broadcast_to<int>(x, out, m); }
extern "C" __global__ void broadcast_to_i64(const i64* x, i64* out, Bcast m) { broadcast_to<i64>(x, out, m); }
extern "C" __global__ void broadcast_to_bool(const bool* x, bool* out, Bcast m) { broadcast_to<bool>(x, out, m); }

// AddN: up to 8 inputs per launch (`Ptrs8`, device addresses); the launcher chains
// launches for more inputs, passing the partial sum as the first input of the next, so
// the additions happen left to right as on the CPU. Reading and writing `out` at the same
// index within one thread is safe.
struct Ptrs8 { u64 p[8]; };
template <typename T>
__device__ __forceinline__ void add_n(Ptrs8 in, int count, T* out, i64 n) {
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        T acc = ((const T*)in.p[0])[i];
        // Unrolled with constant indices, so `in` stays in registers (no local memory).
#pragma unroll
        for (int k = 1; k < 8; k++) {
            if (k < count) acc = acc + ((const T*)in.p[k])[i];
        }
        out[i] = acc;
    }
}
extern "C" __global__ void add_n_f32(Ptrs8 in, int count, float* out, i64 n) { add_n<float>(in, count, out, n); }
extern "C" __global__ void add_n_f64(Ptrs8 in, int count, double* out, i64 n) { add_n<double>(in, count, out, n); }

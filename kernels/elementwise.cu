// Elementwise unary kernels, OnesLike/ZerosLike and Cast.
//
// Compiled at run time by NVRTC (no #include: NVRTC has no CUDA headers here; the math
// functions are NVRTC built-ins). Entry points are `{op}_{dtype}` (launch::entry_name):
//
//   {op}_{f32,f64}(const T* x, T* y, long long n)          for the unary ops below
//   leaky_relu_{f32,f64}(const T* x, T* y, long long n, double alpha)
//   ones_like_{f32,f64}, zeros_like_{f32,f64}(T* y, long long n)
//   cast_{src}_{dst}(const S* x, D* y, long long n)        every pair of f32 f64 i32 i64 bool
//
// Semantics mirror the CPU kernels in crates/oxiflow-core/src/ops/{math,nn,array}.rs:
// - Relu: x > 0 ? x : 0 with NaN kept (TF's Relu, nn.rs `x > 0 || isnan(x)`); Relu6: clamp
//   to [0, 6] with NaN kept (Rust's clamp); Elu, Selu, LeakyRelu and Softplus give NaN for
//   NaN through their arithmetic (no compare may pick a constant for it);
// - Sign: -1, 0, 1, NaN kept, +0 for both zeros;
// - Floor: floor (NaN and infinities kept), as f32::floor / f64::floor;
// - Sigmoid, Softplus, Elu, Selu in the overflow-free forms of nn.rs;
// - Cast as Rust's `as`: float -> int truncates toward zero and saturates, NaN -> 0;
//   numbers -> bool are `x != 0`, bool -> numbers 0/1.
// Float32 is computed in single precision (the CPU computes Sigmoid, Selu and Softplus of
// Float32 in double and rounds; the difference is a few ulp).

// ------------------------------------------------------------------ math by type

__device__ __forceinline__ float  m_exp(float x)   { return expf(x); }
__device__ __forceinline__ double m_exp(double x)  { return exp(x); }
__device__ __forceinline__ float  m_expm1(float x) { return expm1f(x); }
__device__ __forceinline__ double m_expm1(double x){ return expm1(x); }
__device__ __forceinline__ float  m_log(float x)   { return logf(x); }
__device__ __forceinline__ double m_log(double x)  { return log(x); }
__device__ __forceinline__ float  m_log1p(float x) { return log1pf(x); }
__device__ __forceinline__ double m_log1p(double x){ return log1p(x); }
__device__ __forceinline__ float  m_sin(float x)   { return sinf(x); }
__device__ __forceinline__ double m_sin(double x)  { return sin(x); }
__device__ __forceinline__ float  m_cos(float x)   { return cosf(x); }
__device__ __forceinline__ double m_cos(double x)  { return cos(x); }
__device__ __forceinline__ float  m_tan(float x)   { return tanf(x); }
__device__ __forceinline__ double m_tan(double x)  { return tan(x); }
__device__ __forceinline__ float  m_tanh(float x)  { return tanhf(x); }
__device__ __forceinline__ double m_tanh(double x) { return tanh(x); }
__device__ __forceinline__ float  m_abs(float x)   { return fabsf(x); }
__device__ __forceinline__ double m_abs(double x)  { return fabs(x); }

// ------------------------------------------------------------------ unary functors

struct Abs      { template <typename T> __device__ T operator()(T x) const { return m_abs(x); } };
struct Neg      { template <typename T> __device__ T operator()(T x) const { return -x; } };
struct Square   { template <typename T> __device__ T operator()(T x) const { return x * x; } };
struct Sin      { template <typename T> __device__ T operator()(T x) const { return m_sin(x); } };
struct Cos      { template <typename T> __device__ T operator()(T x) const { return m_cos(x); } };
struct Tan      { template <typename T> __device__ T operator()(T x) const { return m_tan(x); } };
struct Tanh     { template <typename T> __device__ T operator()(T x) const { return m_tanh(x); } };
struct Exp      { template <typename T> __device__ T operator()(T x) const { return m_exp(x); } };
struct Log      { template <typename T> __device__ T operator()(T x) const { return m_log(x); } };
struct Sqrt     { template <typename T> __device__ T operator()(T x) const { return m_sqrt(x); } };
struct Floor    { template <typename T> __device__ T operator()(T x) const { return m_floor(x); } };
struct Softsign { template <typename T> __device__ T operator()(T x) const { return x / (T(1) + m_abs(x)); } };

// TF's Relu (nn.rs kernel_relu): NaN stays NaN, -0 and negatives give +0. A plain
// `x > 0 ? x : 0` would turn NaN into 0.
struct Relu {
    template <typename T> __device__ T operator()(T x) const { return (x > T(0) || is_nan(x)) ? x : T(0); }
};

// Rust's f64::clamp(0, 6): NaN stays NaN.
struct Relu6 {
    template <typename T> __device__ T operator()(T x) const {
        if (is_nan(x)) return x;
        return x < T(0) ? T(0) : (x > T(6) ? T(6) : x);
    }
};

// TF's Sign: NaN kept, both zeros -> +0.
struct Sign {
    template <typename T> __device__ T operator()(T x) const {
        if (is_nan(x)) return x;
        if (x == T(0)) return T(0);
        return x > T(0) ? T(1) : T(-1);
    }
};

// nn.rs sigmoid64: 1/(1+e^-x) for x >= 0, e^x/(1+e^x) otherwise (no overflow).
struct Sigmoid {
    template <typename T> __device__ T operator()(T x) const {
        if (x >= T(0)) return T(1) / (T(1) + m_exp(-x));
        T e = m_exp(x);
        return e / (T(1) + e);
    }
};

// nn.rs softplus64: max(x, 0) + log1p(exp(-|x|)).
struct Softplus {
    template <typename T> __device__ T operator()(T x) const {
        T m = x > T(0) ? x : T(0);
        return m + m_log1p(m_exp(-m_abs(x)));
    }
};

struct Elu {
    template <typename T> __device__ T operator()(T x) const { return x > T(0) ? x : m_expm1(x); }
};

// SELU constants of nn.rs (Klambauer et al. 2017).
struct Selu {
    template <typename T> __device__ T operator()(T x) const {
        const T alpha = T(1.6732632423543772848170429916717);
        const T scale = T(1.0507009873554804934193349852946);
        return x > T(0) ? scale * x : scale * alpha * m_expm1(x);
    }
};

// Elements per thread per loop iteration: the loads of UNROLL elements (a grid stride
// apart, so every load instruction of a warp is still coalesced) are issued before any
// store, keeping enough bytes in flight to approach the memory bandwidth. The launcher
// sizes the grid for n / UNROLL threads (launch::meta::grid_unrolled).
#define UNROLL 4

template <typename T, typename F>
__device__ __forceinline__ void unary(const T* __restrict__ x, T* __restrict__ y, i64 n) {
    F f;
    const i64 stride = (i64)gridDim.x * blockDim.x;
    i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + (UNROLL - 1) * stride < n; i += UNROLL * stride) {
        T v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) v[u] = x[i + u * stride];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) y[i + u * stride] = f(v[u]);
    }
    for (; i < n; i += stride) y[i] = f(x[i]);
}

#define UNARY(name, F)                                                                      \
    extern "C" __global__ void name##_f32(const float* x, float* y, i64 n) { unary<float, F>(x, y, n); }  \
    extern "C" __global__ void name##_f64(const double* x, double* y, i64 n) { unary<double, F>(x, y, n); }

UNARY(abs, Abs)
UNARY(neg, Neg)
UNARY(square, Square)
UNARY(sin, Sin)
UNARY(cos, Cos)
UNARY(tan, Tan)
UNARY(tanh, Tanh)
UNARY(exp, Exp)
UNARY(log, Log)
UNARY(sqrt, Sqrt)
UNARY(floor, Floor)
UNARY(relu, Relu)
UNARY(relu6, Relu6)
UNARY(sign, Sign)
UNARY(sigmoid, Sigmoid)
UNARY(softplus, Softplus)
UNARY(softsign, Softsign)
UNARY(elu, Elu)
UNARY(selu, Selu)

// LeakyRelu: x > 0 ? x : alpha * x, alpha (attr, default 0.2) rounded to T first as the
// CPU kernel does (`alpha as f32 * x`).
template <typename T>
__device__ __forceinline__ void leaky_relu(const T* __restrict__ x, T* __restrict__ y, i64 n, double alpha) {
    const T a = (T)alpha;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        T v = x[i];
        y[i] = v > T(0) ? v : a * v;
    }
}
extern "C" __global__ void leaky_relu_f32(const float* x, float* y, i64 n, double alpha) { leaky_relu<float>(x, y, n, alpha); }
extern "C" __global__ void leaky_relu_f64(const double* x, double* y, i64 n, double alpha) { leaky_relu<double>(x, y, n, alpha); }

// ------------------------------------------------------------------ OnesLike, ZerosLike

template <typename T>
__device__ __forceinline__ void fill(T* __restrict__ y, i64 n, T v) {
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) y[i] = v;
}
extern "C" __global__ void ones_like_f32(float* y, i64 n) { fill<float>(y, n, 1.0f); }
extern "C" __global__ void ones_like_f64(double* y, i64 n) { fill<double>(y, n, 1.0); }
extern "C" __global__ void zeros_like_f32(float* y, i64 n) { fill<float>(y, n, 0.0f); }
extern "C" __global__ void zeros_like_f64(double* y, i64 n) { fill<double>(y, n, 0.0); }

// ------------------------------------------------------------------ Cast

// Float -> integer as Rust's `as`: NaN -> 0, truncation toward zero, saturation at the
// integer type's bounds.
template <typename D, typename S> struct Conv { __device__ static D go(S x) { return (D)x; } };

template <typename S> __device__ __forceinline__ int f_to_i32(S x) {
    if (x != x) return 0;
    if (x >= (S)2147483648.0) return 2147483647;
    if (x <= (S)-2147483648.0) return (-2147483647 - 1);
    return (int)x;
}
template <typename S> __device__ __forceinline__ i64 f_to_i64(S x) {
    if (x != x) return 0;
    if (x >= (S)9223372036854775808.0) return 9223372036854775807LL;
    if (x <= (S)-9223372036854775808.0) return (-9223372036854775807LL - 1);
    return (i64)x;
}
template <> struct Conv<int, float>  { __device__ static int go(float x)  { return f_to_i32(x); } };
template <> struct Conv<int, double> { __device__ static int go(double x) { return f_to_i32(x); } };
template <> struct Conv<i64, float>  { __device__ static i64 go(float x)  { return f_to_i64(x); } };
template <> struct Conv<i64, double> { __device__ static i64 go(double x) { return f_to_i64(x); } };
// Numbers -> bool: x != 0 (NaN != 0 is true, as in Rust).
template <typename S> struct Conv<bool, S> { __device__ static bool go(S x) { return x != (S)0; } };
template <> struct Conv<bool, bool> { __device__ static bool go(bool x) { return x; } };
// bool -> numbers: 0 or 1.
template <typename D> struct Conv<D, bool> { __device__ static D go(bool x) { return x ? (D)1 : (D)0; } };

template <typename S, typename D>
__device__ __forceinline__ void cast(const S* __restrict__ x, D* __restrict__ y, i64 n) {
    const i64 stride = (i64)gridDim.x * blockDim.x;
    i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + (UNROLL - 1) * stride < n; i += UNROLL * stride) {
        S v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) v[u] = x[i + u * stride];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) y[i + u * stride] = Conv<D, S>::go(v[u]);
    }
    for (; i < n; i += stride) y[i] = Conv<D, S>::go(x[i]);
}

#define CAST(sn, S, dn, D) \
    extern "C" __global__ void cast_##sn##_##dn(const S* x, D* y, i64 n) { cast<S, D>(x, y, n); }
#define CAST_FROM(sn, S)          \
    CAST(sn, S, f32, float)       \
    CAST(sn, S, f64, double)      \
    CAST(sn, S, i32, int)         \
    CAST(sn, S, i64, long long)   \
    CAST(sn, S, bool, bool)

CAST_FROM(f32, float)
CAST_FROM(f64, double)
CAST_FROM(i32, int)
CAST_FROM(i64, long long)
CAST_FROM(bool, bool)

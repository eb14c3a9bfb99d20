// What every kernel file shares: integer type names and the math overloads more than one
// family uses. Not a kernel file itself (build.rs embeds only `.cu` files): it is put in
// front of each `.cu` source when that is compiled (crates/oxiflow-cuda/build.rs, with a
// `#line 1` so NVRTC's messages keep the file's own line numbers) and emulated
// (crates/oxiflow-cuda/tests/emulation/*.cpp, once per file's namespace, so it has no
// include guard). NVRTC built-ins only, as the kernel files.

typedef long long i64;
typedef unsigned long long u64;
typedef unsigned int u32;

// NaN test that survives fast-math style rewrites of `isnan` (IEEE: NaN != NaN).
template <typename T> __device__ __forceinline__ bool is_nan(T x) { return x != x; }

// Math by type: the float or double built-in, so templates call one name.
__device__ __forceinline__ float  m_floor(float x)  { return floorf(x); }
__device__ __forceinline__ double m_floor(double x) { return floor(x); }
__device__ __forceinline__ float  m_sqrt(float x)   { return sqrtf(x); }
__device__ __forceinline__ double m_sqrt(double x)  { return sqrt(x); }

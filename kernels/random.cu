// Random tensors: RandomStandardNormal and RandomUniform. Header-free.
//
// Counter-based generator Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy
// as 1, 2, 3", SC'11; the generator of TF's and cuRAND's GPU kernels): output block `g` of
// a run is philox(key = seed, counter = (g_lo, g_hi, stream_lo, stream_hi)), where `seed`
// is the node's 64-bit base seed (from its `seed`/`seed2` attrs, see
// src/launch/random.rs) and `stream` counts the node's runs, so every run draws fresh
// numbers and equal seeds give equal sequences. The values differ from the CPU kernel's
// ChaCha8 stream, as TF's GPU and CPU streams differ.
//
// Entry points (T = f32 or f64; `n` elements written to `y`):
//   random_uniform_{T}(T* y, long long n, unsigned long long seed, unsigned long long stream)
//       uniform in [0, 1): 24 random bits for f32, 53 for f64
//   random_standard_normal_{T}(T* y, long long n, unsigned long long seed, unsigned long long stream)
//       Box-Muller on pairs of uniforms in (0, 1]
// Each thread handles whole Philox blocks: 4 values per block for f32, 2 for f64.

struct U4 { u32 x, y, z, w; };

__device__ __forceinline__ U4 philox(u64 seed, u64 block, u64 stream) {
    const u32 M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
    u32 k0 = (u32)seed, k1 = (u32)(seed >> 32);
    U4 c;
    c.x = (u32)block; c.y = (u32)(block >> 32); c.z = (u32)stream; c.w = (u32)(stream >> 32);
#pragma unroll
    for (int r = 0; r < 10; r++) {
        u32 hi0 = __umulhi(M0, c.x), lo0 = M0 * c.x;
        u32 hi1 = __umulhi(M1, c.z), lo1 = M1 * c.z;
        U4 n;
        n.x = hi1 ^ c.y ^ k0;
        n.y = lo1;
        n.z = hi0 ^ c.w ^ k1;
        n.w = lo0;
        c = n;
        k0 += W0;
        k1 += W1;
    }
    return c;
}

// [0, 1) from the top 24 bits; (0, 1] by adding one ulp step.
__device__ __forceinline__ float u01_f32(u32 a) { return (float)(a >> 8) * 5.9604644775390625e-8f; }
__device__ __forceinline__ float u01_open_f32(u32 a) { return ((float)(a >> 8) + 1.0f) * 5.9604644775390625e-8f; }
// [0, 1) from 53 bits of two words.
__device__ __forceinline__ double u01_f64(u32 a, u32 b) {
    u64 bits = ((u64)(a >> 5) << 26) | (u64)(b >> 6);
    return (double)bits * 1.1102230246251565e-16;
}
__device__ __forceinline__ double u01_open_f64(u32 a, u32 b) {
    u64 bits = ((u64)(a >> 5) << 26) | (u64)(b >> 6);
    return ((double)bits + 1.0) * 1.1102230246251565e-16;
}

#define GRID_STRIDE(g, blocks) for (i64 g = (i64)blockIdx.x * blockDim.x + threadIdx.x; g < (blocks); g += (i64)gridDim.x * blockDim.x)

extern "C" __global__ void random_uniform_f32(float* y, i64 n, u64 seed, u64 stream) {
    i64 blocks = (n + 3) / 4;
    GRID_STRIDE(g, blocks) {
        U4 r = philox(seed, (u64)g, stream);
        u32 w[4] = {r.x, r.y, r.z, r.w};
        for (int k = 0; k < 4; k++) {
            i64 i = g * 4 + k;
            if (i < n) y[i] = u01_f32(w[k]);
        }
    }
}

extern "C" __global__ void random_uniform_f64(double* y, i64 n, u64 seed, u64 stream) {
    i64 blocks = (n + 1) / 2;
    GRID_STRIDE(g, blocks) {
        U4 r = philox(seed, (u64)g, stream);
        i64 i = g * 2;
        y[i] = u01_f64(r.x, r.y);
        if (i + 1 < n) y[i + 1] = u01_f64(r.z, r.w);
    }
}

extern "C" __global__ void random_standard_normal_f32(float* y, i64 n, u64 seed, u64 stream) {
    const float two_pi = 6.2831853071795864769f;
    i64 blocks = (n + 3) / 4;
    GRID_STRIDE(g, blocks) {
        U4 r = philox(seed, (u64)g, stream);
        float out[4];
        float rad0 = sqrtf(-2.0f * logf(u01_open_f32(r.x)));
        float th0 = two_pi * u01_f32(r.y);
        float rad1 = sqrtf(-2.0f * logf(u01_open_f32(r.z)));
        float th1 = two_pi * u01_f32(r.w);
        out[0] = rad0 * cosf(th0);
        out[1] = rad0 * sinf(th0);
        out[2] = rad1 * cosf(th1);
        out[3] = rad1 * sinf(th1);
        for (int k = 0; k < 4; k++) {
            i64 i = g * 4 + k;
            if (i < n) y[i] = out[k];
        }
    }
}

extern "C" __global__ void random_standard_normal_f64(double* y, i64 n, u64 seed, u64 stream) {
    const double two_pi = 6.2831853071795864769;
    i64 blocks = (n + 1) / 2;
    GRID_STRIDE(g, blocks) {
        U4 r = philox(seed, (u64)g, stream);
        double rad = sqrt(-2.0 * log(u01_open_f64(r.x, r.y)));
        double th = two_pi * u01_f64(r.z, r.w);
        i64 i = g * 2;
        y[i] = rad * cos(th);
        if (i + 1 < n) y[i + 1] = rad * sin(th);
    }
}

// Host emulation of the CUDA features the kernels of kernels/ use, so that they run on a
// CPU without a GPU (a dev check, scripts/emulate-kernels.sh): each block's threads are
// std::threads meeting at a std::barrier for __syncthreads(), blocks run one after another,
// __shared__ variables are function statics (one block at a time, so one copy suffices).
// Kernels are launched with small blocks (2..8 threads) so every tree level is exercised.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <barrier>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>
struct dim3 { unsigned x = 1, y = 1, z = 1; };
inline thread_local dim3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;
inline std::barrier<>* g_bar = nullptr;
inline void __syncthreads() { g_bar->arrive_and_wait(); }
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __restrict__
inline float __int_as_float(int i){ float f; memcpy(&f,&i,4); return f; }
inline double __longlong_as_double(long long i){ double d; memcpy(&d,&i,8); return d; }
inline unsigned __umulhi(unsigned a, unsigned b){ return (unsigned)(((unsigned long long)a*b)>>32); }
// Atomics under one lock; integer addition wraps as the GPU's does.
inline std::mutex g_atomic;
template<class T> T atomicAdd(T* p, T v) {
  std::lock_guard<std::mutex> l(g_atomic); T o = *p;
  if constexpr (std::is_integral_v<T>) *p = (T)((std::make_unsigned_t<T>)o + (std::make_unsigned_t<T>)v); else *p = o + v;
  return o;
}
inline unsigned long long atomicMin(unsigned long long* p, unsigned long long v) {
  std::lock_guard<std::mutex> l(g_atomic); unsigned long long o = *p; if (v < o) *p = v; return o;
}
template<class F> void launch(unsigned grid, unsigned block, F f) {
  gridDim = {grid,1,1}; blockDim = {block,1,1};
  for (unsigned b = 0; b < grid; b++) {
    std::barrier<> bar(block); g_bar = &bar;
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < block; t++) ts.emplace_back([=]{ blockIdx = {b,1,1}; threadIdx = {t,1,1}; f(); });
    for (auto& th: ts) th.join();
  }
}

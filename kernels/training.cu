// Training updates, in place. Header-free (NVRTC built-ins only).
//
// The formulas, and the order of their operations, are those of the CPU kernels in
// crates/oxiflow-core/src/ops/training.rs (TF's training_ops.cc `functor::Apply*`).
// Tensors `var` and its slots have `n` elements; hyperparameters are rank-0 device tensors
// of the variable's dtype (read by every thread: one cached load). Entry points:
//
//   apply_gradient_descent_{T}(T* var, const T* alpha, const T* delta, long long n)
//       var -= alpha * delta
//   apply_momentum_{T}(T* var, T* accum, const T* lr, const T* grad, const T* momentum,
//                      long long n, int use_nesterov)
//       accum = accum * momentum + grad
//       var -= lr * accum                      (Nesterov: var -= grad * lr + accum * momentum * lr)
//   apply_adam_{T}(T* var, T* m, T* v, const T* beta1_power, const T* beta2_power,
//                  const T* lr, const T* beta1, const T* beta2, const T* epsilon,
//                  const T* grad, long long n, int use_nesterov)
//       lr_t = lr * sqrt(1 - beta2_power) / (1 - beta1_power)
//       m += (grad - m) * (1 - beta1); v += (grad^2 - v) * (1 - beta2)
//       var -= lr_t * m / (sqrt(v) + epsilon)  (Nesterov: m * beta1 + (1 - beta1) * grad for m)
//   apply_rms_prop_{T}(T* var, T* ms, T* mom, const T* lr, const T* rho, const T* momentum,
//                      const T* epsilon, const T* grad, long long n)
//       ms += (grad^2 - ms) * (1 - rho)
//       mom = mom * momentum + lr * grad / sqrt(ms + epsilon); var -= mom
//   apply_adagrad_{T}(T* var, T* accum, const T* lr, const T* grad, long long n, int update_slots)
//       accum += grad^2 (when update_slots); var -= grad * lr * (1 / sqrt(accum))
//   apply_adadelta_{T}(T* var, T* accum, T* accum_update, const T* lr, const T* rho,
//                      const T* epsilon, const T* grad, long long n)
//       accum = accum * rho + grad^2 * (1 - rho)
//       update = sqrt(accum_update + epsilon) * (1 / sqrt(accum + epsilon)) * grad
//       var -= update * lr; accum_update = accum_update * rho + update^2 * (1 - rho)
//
// (`1 / sqrt` rather than CUDA's rsqrt, whose rounding differs from the CPU's.)
//
// T is f32 or f64.

#define GRID_STRIDE(i, n) for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (i64)gridDim.x * blockDim.x)

template <typename T>
__device__ __forceinline__ void gd(T* __restrict__ var, const T* __restrict__ alpha, const T* __restrict__ delta, i64 n) {
    const T a = *alpha;
    GRID_STRIDE(i, n) { var[i] = var[i] - a * delta[i]; }
}

template <typename T>
__device__ __forceinline__ void momentum(T* __restrict__ var, T* __restrict__ accum, const T* __restrict__ lr_p,
                                         const T* __restrict__ grad, const T* __restrict__ mom_p, i64 n, int nesterov) {
    const T lr = *lr_p, mom = *mom_p;
    GRID_STRIDE(i, n) {
        T g = grad[i];
        T a = accum[i] * mom + g;
        accum[i] = a;
        var[i] = nesterov ? var[i] - (g * lr + a * mom * lr) : var[i] - lr * a;
    }
}

template <typename T>
__device__ __forceinline__ void adam(T* __restrict__ var, T* __restrict__ m, T* __restrict__ v, const T* __restrict__ b1p_p,
                                     const T* __restrict__ b2p_p, const T* __restrict__ lr_p, const T* __restrict__ b1_p,
                                     const T* __restrict__ b2_p, const T* __restrict__ eps_p, const T* __restrict__ grad,
                                     i64 n, int nesterov) {
    const T one = T(1);
    const T b1p = *b1p_p, b2p = *b2p_p, lr = *lr_p, b1 = *b1_p, b2 = *b2_p, eps = *eps_p;
    const T lr_t = lr * m_sqrt(one - b2p) / (one - b1p);
    GRID_STRIDE(i, n) {
        T g = grad[i];
        T mi = m[i] + (g - m[i]) * (one - b1);
        T vi = v[i] + (g * g - v[i]) * (one - b2);
        m[i] = mi;
        v[i] = vi;
        T num = nesterov ? mi * b1 + (one - b1) * g : mi;
        var[i] = var[i] - lr_t * num / (m_sqrt(vi) + eps);
    }
}

template <typename T>
__device__ __forceinline__ void rmsprop(T* __restrict__ var, T* __restrict__ ms, T* __restrict__ mom, const T* __restrict__ lr_p,
                                        const T* __restrict__ rho_p, const T* __restrict__ momentum_p, const T* __restrict__ eps_p,
                                        const T* __restrict__ grad, i64 n) {
    const T one = T(1);
    const T lr = *lr_p, rho = *rho_p, momentum = *momentum_p, eps = *eps_p;
    GRID_STRIDE(i, n) {
        T g = grad[i];
        T s = ms[i] + (g * g - ms[i]) * (one - rho);
        T mo = mom[i] * momentum + lr * g / m_sqrt(s + eps);
        ms[i] = s;
        mom[i] = mo;
        var[i] = var[i] - mo;
    }
}

template <typename T>
__device__ __forceinline__ void adagrad(T* __restrict__ var, T* __restrict__ accum, const T* __restrict__ lr_p,
                                        const T* __restrict__ grad, i64 n, int update_slots) {
    const T one = T(1);
    const T lr = *lr_p;
    GRID_STRIDE(i, n) {
        T g = grad[i];
        T a = update_slots ? accum[i] + g * g : accum[i];
        accum[i] = a;
        var[i] = var[i] - g * lr * (one / m_sqrt(a));
    }
}

template <typename T>
__device__ __forceinline__ void adadelta(T* __restrict__ var, T* __restrict__ accum, T* __restrict__ accum_update,
                                         const T* __restrict__ lr_p, const T* __restrict__ rho_p, const T* __restrict__ eps_p,
                                         const T* __restrict__ grad, i64 n) {
    const T one = T(1);
    const T lr = *lr_p, rho = *rho_p, eps = *eps_p;
    GRID_STRIDE(i, n) {
        T g = grad[i];
        T a = accum[i] * rho + g * g * (one - rho);
        T au = accum_update[i];
        T update = m_sqrt(au + eps) * (one / m_sqrt(a + eps)) * g;
        accum[i] = a;
        var[i] = var[i] - update * lr;
        accum_update[i] = au * rho + update * update * (one - rho);
    }
}

#define TRAINING(sfx, T)                                                                                        \
    extern "C" __global__ void apply_gradient_descent_##sfx(T* var, const T* alpha, const T* delta, i64 n) {    \
        gd<T>(var, alpha, delta, n);                                                                            \
    }                                                                                                           \
    extern "C" __global__ void apply_momentum_##sfx(T* var, T* accum, const T* lr, const T* grad,               \
                                                    const T* momentum_, i64 n, int use_nesterov) {              \
        momentum<T>(var, accum, lr, grad, momentum_, n, use_nesterov);                                          \
    }                                                                                                           \
    extern "C" __global__ void apply_adam_##sfx(T* var, T* m, T* v, const T* beta1_power, const T* beta2_power, \
                                                const T* lr, const T* beta1, const T* beta2, const T* epsilon,  \
                                                const T* grad, i64 n, int use_nesterov) {                       \
        adam<T>(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, n, use_nesterov);         \
    }                                                                                                           \
    extern "C" __global__ void apply_rms_prop_##sfx(T* var, T* ms, T* mom, const T* lr, const T* rho,           \
                                                    const T* momentum_, const T* epsilon, const T* grad, i64 n) { \
        rmsprop<T>(var, ms, mom, lr, rho, momentum_, epsilon, grad, n);                                         \
    }                                                                                                           \
    extern "C" __global__ void apply_adagrad_##sfx(T* var, T* accum, const T* lr, const T* grad, i64 n,        \
                                                   int update_slots) {                                          \
        adagrad<T>(var, accum, lr, grad, n, update_slots);                                                      \
    }                                                                                                           \
    extern "C" __global__ void apply_adadelta_##sfx(T* var, T* accum, T* accum_update, const T* lr,            \
                                                    const T* rho, const T* epsilon, const T* grad, i64 n) {     \
        adadelta<T>(var, accum, accum_update, lr, rho, epsilon, grad, n);                                       \
    }

TRAINING(f32, float)
TRAINING(f64, double)

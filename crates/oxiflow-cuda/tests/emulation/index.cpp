// Emulated runs of kernels/index.cu (scripts/emulate-kernels.sh): TensorScatterUpdate, Add
// and Sub on a tensor the launcher has copied to the output, and ScatterNd (the same body
// on a zero-filled output), against naive loops: slices of
// k = 1 and k = 2 index rows, Int32 and Int64 indices, both index widths of the body
// (`wide`), Int32 subtraction wrapping at INT_MIN, and a bad row skipped with the lowest
// bad position recorded (TF's GPU behaviour; the caller turns it into the CPU's error).
#include "shim.h"
namespace ix {
#include "../../../../kernels/prelude.cuh"
#include "../../../../kernels/index.cu"
}
static int fails = 0;
#define CHECK(c, ...) do { if (!(c)) { fails++; printf("FAIL %d: ", __LINE__); printf(__VA_ARGS__); printf("\n"); } } while (0)

// NdMeta of indices [rows, k] into a tensor whose first k dimensions are `dims`.
static ix::NdMeta meta(int k, const long long* dims, long long rows, long long inner, int idx64, int wide) {
  ix::NdMeta m{}; m.k = k; for (int j = 0; j < k; j++) m.dims[j] = dims[j];
  m.rows = rows; m.inner = inner; m.total = rows * inner; m.idx64 = idx64; m.wide = wide; return m;
}

int main() {
  // rows of a [4, 3] float tensor; row 2 twice for add/sub (the sums are exact)
  for (int wide = 0; wide < 2; wide++) {
    const long long dims[1] = {4};
    float t[12]; for (int i = 0; i < 12; i++) t[i] = 0.5f * i - 2;
    float upd[9]; for (int i = 0; i < 9; i++) upd[i] = 10.0f + i;
    int idx[3] = {2, 0, 2};
    ix::NdMeta m = meta(1, dims, 3, 3, 0, wide);
    for (int op = 0; op < 3; op++) {
      float out[12]; memcpy(out, t, sizeof t);   // the launcher's device-to-device copy
      float want[12]; memcpy(want, t, sizeof t);
      for (int r = 0; r < 3; r++) for (int j = 0; j < 3; j++) {
        float& w = want[idx[r] * 3 + j];
        w = op == 0 ? upd[r * 3 + j] : op == 1 ? w + upd[r * 3 + j] : w - upd[r * 3 + j];
      }
      if (op == 0) launch(2, 2, [&]{ ix::tensor_scatter_update_f32(m, idx, upd, out, nullptr); });
      if (op == 1) launch(2, 2, [&]{ ix::tensor_scatter_add_f32(m, idx, upd, out, nullptr); });
      if (op == 2) launch(2, 2, [&]{ ix::tensor_scatter_sub_f32(m, idx, upd, out, nullptr); });
      for (int i = 0; i < 12; i++) {
        // Update of a repeated row keeps one of its writes, unspecified which
        bool ok = out[i] == want[i] || (op == 0 && i >= 6 && i < 9 && out[i] == upd[i - 6]);
        CHECK(ok, "f32 op %d wide %d: out[%d] = %f, want %f", op, wide, i, out[i], want[i]);
      }
    }
  }
  // elements of a [3, 4] Int32 tensor by k = 2 Int64 index rows; Sub wraps at INT_MIN
  { const long long dims[2] = {3, 4};
    int t[12]; for (int i = 0; i < 12; i++) t[i] = 100 * i;
    t[7] = -2147483647 - 1;
    long long idx[6] = {1, 3, 0, 0, 2, 1};
    int upd[3] = {1, -5, 7};
    ix::NdMeta m = meta(2, dims, 3, 1, 1, 0);
    int out[12]; memcpy(out, t, sizeof t);
    launch(1, 4, [&]{ ix::tensor_scatter_sub_i32(m, idx, upd, out, nullptr); });
    int want[12]; memcpy(want, t, sizeof t); want[7] = 2147483647; want[0] = 5; want[9] = 900 - 7;
    for (int i = 0; i < 12; i++) CHECK(out[i] == want[i], "i32 sub: out[%d] = %d, want %d", i, out[i], want[i]);
    memcpy(out, t, sizeof t);
    launch(1, 4, [&]{ ix::tensor_scatter_update_i32(m, idx, upd, out, nullptr); });
    memcpy(want, t, sizeof t); want[7] = 1; want[0] = -5; want[9] = 7;
    for (int i = 0; i < 12; i++) CHECK(out[i] == want[i], "i32 update: out[%d] = %d, want %d", i, out[i], want[i]); }
  // bad rows (-1 and 4 of 4) are skipped; the lowest bad row is recorded
  { const long long dims[1] = {4};
    double t[8]; for (int i = 0; i < 8; i++) t[i] = i;
    double upd[8]; for (int i = 0; i < 8; i++) upd[i] = 100 + i;
    long long idx[4] = {1, -1, 3, 4};
    ix::NdMeta m = meta(1, dims, 4, 2, 1, 1);
    double out[8]; memcpy(out, t, sizeof t);
    unsigned long long bad = ~0ULL;
    launch(2, 3, [&]{ ix::tensor_scatter_add_f64(m, idx, upd, out, &bad); });
    double want[8] = {0, 1, 2 + 100, 3 + 101, 4, 5, 6 + 104, 7 + 105};
    for (int i = 0; i < 8; i++) CHECK(out[i] == want[i], "f64 add with bad rows: out[%d] = %f, want %f", i, out[i], want[i]);
    CHECK(bad == 1, "lowest bad row recorded: %llu", bad); }
  // ScatterNd: the same body adding into a zero-filled output; repeated rows sum
  { const long long dims[1] = {3};
    float upd[6] = {1, 2, 3, 4, 5, 6}; int idx[3] = {2, 0, 2};
    ix::NdMeta m = meta(1, dims, 3, 2, 0, 0);
    float out[6] = {0, 0, 0, 0, 0, 0};   // the launcher's memset
    launch(2, 2, [&]{ ix::scatter_nd_f32(m, idx, upd, out, nullptr); });
    float want[6] = {3, 4, 0, 0, 1 + 5, 2 + 6};
    for (int i = 0; i < 6; i++) CHECK(out[i] == want[i], "scatter_nd: out[%d] = %f, want %f", i, out[i], want[i]); }
  printf("index emulation: %d failures\n", fails);
  return fails != 0;
}

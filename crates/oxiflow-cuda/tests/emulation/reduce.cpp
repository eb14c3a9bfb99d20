// Emulated runs of kernels/reduce.cu (scripts/emulate-kernels.sh): one- and two-pass plans,
// block and thread strategies, NaN rules of Max and ArgMax, multi-axis groups, empty
// groups, Softmax, SoftmaxCrossEntropyWithLogits; against naive loops.
#include "shim.h"
#include "../../../../kernels/prelude.cuh"
#include "../../../../kernels/reduce.cu"
#include <cassert>
#include <limits>
static int fails = 0;
#define CHECK(c, ...) do { if (!(c)) { fails++; printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); } } while (0)
Red meta(i64 num_out, i64 r_len, i64 seg_len, i64 segs, int per_thread, std::vector<std::pair<i64,i64>> k, std::vector<std::pair<i64,i64>> r, int out_i64=1) {
  Red m{}; m.num_out=num_out; m.r_len=r_len; m.seg_len=seg_len; m.segs=segs; m.count=r_len; m.per_thread=per_thread; m.out_i64=out_i64;
  m.k_rank=k.size(); m.r_rank=r.size();
  for (size_t i=0;i<k.size();i++){m.k_dims[i]=k[i].first;m.k_strides[i]=k[i].second;}
  for (size_t i=0;i<r.size();i++){m.r_dims[i]=r[i].first;m.r_strides[i]=r[i].second;}
  return m;
}
Red finish_meta(const Red& m1, int per_thread) {
  Red m = m1; m.r_len = m1.segs; m.seg_len = m1.segs; m.segs = 1; m.k_rank=1; m.r_rank=1; m.per_thread=per_thread;
  m.k_dims[0]=m1.num_out; m.k_strides[0]=1; m.r_dims[0]=m1.segs; m.r_strides[0]=m1.num_out; return m;
}
// naive references over groups given by offset lists
template<class F> void run(unsigned grid, unsigned block, F f) { launch(grid, block, f); }
int main() {
  // x [4, 37] row-major, reduce axis 1. values
  std::vector<float> x(4*37); for (int i=0;i<4*37;i++) x[i] = std::sin(i*0.7f)*3 + 0.001f*i;
  x[40] = NAN; // row 1 has a NaN at col 3
  auto rows = [&](int o){ std::vector<float> v; for(int j=0;j<37;j++) v.push_back(x[o*37+j]); return v; };
  for (int two = 0; two < 2; two++) for (int pt = 0; pt < 2; pt++) {
    Red m1 = two ? meta(4, 37, 13, 3, pt, {{4,37}}, {{37,1}}) : meta(4, 37, 37, 1, pt, {{4,37}}, {{37,1}});
    float sum[4], mx[4]; long long am[4], amin[4]; float mean[4];
    if (!two) {
      run(3, pt?4:8, [&]{ sum_f32(x.data(), sum, m1); });
      run(2, pt?4:8, [&]{ max_f32(x.data(), mx, m1); });
      run(5, pt?4:8, [&]{ arg_max_f32(x.data(), am, m1); });
      run(1, pt?4:8, [&]{ arg_min_f32(x.data(), amin, m1); });
      run(1, pt?4:8, [&]{ mean_f32(x.data(), mean, m1); });
    } else {
      float part[12]; ArgAcc<float> pa[12];
      for (int fin = 0; fin < 2; fin++) {
        Red m2 = finish_meta(m1, fin);
        run(2, pt?4:8, [&]{ sum_f32_partial(x.data(), part, m1); }); run(3, fin?2:4, [&]{ sum_f32_finish(part, sum, m2); });
        run(2, pt?4:8, [&]{ max_f32_partial(x.data(), part, m1); }); run(3, fin?2:4, [&]{ max_f32_finish(part, mx, m2); });
        run(2, pt?4:8, [&]{ arg_max_f32_partial(x.data(), pa, m1); }); run(3, fin?2:4, [&]{ arg_max_f32_finish(pa, am, m2); });
        run(2, pt?4:8, [&]{ arg_min_f32_partial(x.data(), pa, m1); }); run(3, fin?2:4, [&]{ arg_min_f32_finish(pa, amin, m2); });
        run(2, pt?4:8, [&]{ mean_f32_partial(x.data(), part, m1); }); run(3, fin?2:4, [&]{ mean_f32_finish(part, mean, m2); });
      }
    }
    for (int o=0;o<4;o++) {
      auto v = rows(o); double s=0; float M=-INFINITY; bool nan=false; int best=0, bmin=0;
      for (size_t j=0;j<v.size();j++){ s+=v[j]; if (v[j]!=v[j]) nan=true; else if (v[j]>M) M=v[j];
        if (v[j] > v[best]) best=j; if (v[j] < v[bmin]) bmin=j; }
      if (nan) { CHECK(std::isnan(sum[o]), "sum nan"); CHECK(std::isnan(mx[o]), "max nan two=%d pt=%d got %f", two, pt, mx[o]); }
      else { CHECK(std::fabs(sum[o]-s) < 1e-4, "sum %d: %f vs %f (two=%d pt=%d)", o, sum[o], s, two, pt); CHECK(mx[o]==M, "max"); CHECK(std::fabs(mean[o]-s/37) < 1e-5, "mean"); }
      CHECK(am[o]==best, "argmax row %d: %lld vs %d (two=%d pt=%d)", o, am[o], best, two, pt);
      CHECK(amin[o]==bmin, "argmin row %d: %lld vs %d", o, amin[o], bmin);
    }
  }
  // ArgMax NaN at index 0 wins; ties -> first; ints
  { float v[5] = {NAN, 1, 5, 2, 5}; long long r; Red m = meta(1,5,2,1,0,{},{{5,1}}); // seg_len ignored for segs=1? use full
    m.seg_len = 5; run(1, 4, [&]{ arg_max_f32(v, &r, m); }); CHECK(r==0, "nan first argmax %lld", r);
    float w[5] = {1, NAN, 5, 2, 5}; run(1, 4, [&]{ arg_max_f32(w, &r, m); }); CHECK(r==2, "tie/NaN argmax %lld", r);
    int iv[6] = {3, -1, 3, 7, 7, -1}; int r32; Red mi = meta(1,6,6,1,0,{},{{6,1}},0);
    run(1, 8, [&]{ arg_max_i32(iv, &r32, mi); }); CHECK(r32==3, "int argmax %d", r32);
    run(1, 8, [&]{ arg_min_i32(iv, &r32, mi); }); CHECK(r32==1, "int argmin %d", r32);
  }
  // [3,5,7] reduce axes 0 and 2 (k: [5] stride 7; r: [3,7] strides [35,1]); block strategy one pass; and column [37,4] axis 0 per-thread 2-pass
  { std::vector<double> x3(105); for (int i=0;i<105;i++) x3[i]=i*0.5-7; double out[5];
    Red m = meta(5, 21, 21, 1, 0, {{5,7}}, {{3,35},{7,1}});
    run(2, 8, [&]{ sum_f64(x3.data(), out, m); });
    for (int j=0;j<5;j++){ double s=0; for(int a=0;a<3;a++) for(int c=0;c<7;c++) s+=x3[a*35+j*7+c]; CHECK(std::fabs(out[j]-s)<1e-9, "sum02 %d", j); }
    double pr[5]; run(1, 4, [&]{ prod_f64(x3.data(), pr, m); });
    for (int j=0;j<5;j++){ double s=1; for(int a=0;a<3;a++) for(int c=0;c<7;c++) s*=x3[a*35+j*7+c]; CHECK(std::fabs(pr[j]-s)<=1e-9*std::fabs(s), "prod02 %d", j); }
    std::vector<double> c(37*4); for (int i=0;i<148;i++) c[i]=std::cos(i*1.3);
    Red m1 = meta(4, 37, 8, 5, 1, {{4,1}}, {{37,4}}); double part[20]; double cs[4]; double cm[4];
    for (int fin=0; fin<2; fin++) { Red m2 = finish_meta(m1, fin);
      run(1, 8, [&]{ sum_f64_partial(c.data(), part, m1); }); run(2, fin?2:8, [&]{ sum_f64_finish(part, cs, m2); });
      run(3, 2, [&]{ min_f64_partial(c.data(), part, m1); }); run(2, fin?2:8, [&]{ min_f64_finish(part, cm, m2); });
      for (int j=0;j<4;j++){ double s=0, mn=INFINITY; for(int i=0;i<37;i++){ s+=c[i*4+j]; mn=std::min(mn,c[i*4+j]);} CHECK(std::fabs(cs[j]-s)<1e-12, "colsum %d", j); CHECK(cm[j]==mn, "colmin %d", j);} }
    // empty reduction: identity
    double e[3]; Red me = meta(3, 0, 1, 1, 1, {{3,0}}, {{0,1}}); run(1, 4, [&]{ max_f64(x3.data(), e, me); }); CHECK(e[0]==-INFINITY && e[2]==-INFINITY, "empty max");
    run(1, 4, [&]{ sum_f64(x3.data(), e, me); }); CHECK(e[1]==0, "empty sum");
  }
  // softmax
  { std::vector<float> s(3*21), y(63); for (int i=0;i<63;i++) s[i]=std::sin(i)*10; s[5]=-INFINITY;
    run(2, 8, [&]{ softmax_f32(s.data(), y.data(), 3, 21); });
    for (int r=0;r<3;r++){ double m=-INFINITY; for(int j=0;j<21;j++) m=std::max(m,(double)s[r*21+j]); double z=0; for(int j=0;j<21;j++) z+=std::exp(s[r*21+j]-m);
      for(int j=0;j<21;j++){ double want=std::exp(s[r*21+j]-m)/z; CHECK(std::fabs(y[r*21+j]-want)<1e-6, "softmax %d %d: %f vs %f", r, j, y[r*21+j], want);} } }
  // softmax cross-entropy: rows of 21 (block 8: strided loads), a row with -inf, and rows of
  // 3 and 0 classes (block wider than the row; an empty row's loss is 0)
  for (int len : {21, 3, 0}) {
    const int R = 3; std::vector<double> xs(R*len), lb(R*len), loss(R, -1), bp(R*len);
    for (int i=0;i<R*len;i++){ xs[i]=std::sin(i*1.3)*10; lb[i]=0.1+0.5*std::fabs(std::cos(i*0.7)); }
    if (len > 5) xs[len+4] = -INFINITY;   // row 1: a label on a -inf logit, loss inf
    run(2, 8, [&]{ softmax_cross_entropy_with_logits_f64(xs.data(), lb.data(), loss.data(), bp.data(), R, len); });
    for (int r=0;r<R;r++){ double m=-INFINITY; for(int j=0;j<len;j++) m=std::max(m,xs[r*len+j]); double z=0; for(int j=0;j<len;j++) z+=std::exp(xs[r*len+j]-m);
      double want=0; for(int j=0;j<len;j++){ double s=xs[r*len+j]-m; want += lb[r*len+j]*(std::log(z)-s);
        double bw=std::exp(s)/z-lb[r*len+j]; CHECK(std::fabs(bp[r*len+j]-bw)<1e-12, "xent backprop %d %d %d: %g vs %g", len, r, j, bp[r*len+j], bw); }
      CHECK(loss[r]==want || std::fabs(loss[r]-want)<1e-9*std::max(1.0,std::fabs(want)), "xent loss %d %d: %g vs %g", len, r, loss[r], want); } }
  printf("reduce emulation: %d failures\n", fails);
  return fails != 0;
}

// Emulated runs of kernels/{binary,elementwise,random,training}.cu
// (scripts/emulate-kernels.sh): broadcasting offsets, AddN chaining, SelectV2, Cast edge
// values (NaN, infinities, saturation, wrapping), unary special values (NaN through Relu,
// Relu6, Elu, Selu, Softplus, LeakyRelu, Sigmoid, Sign, Maximum and Minimum, as on the
// CPU), Int64 arithmetic wrapping on overflow and Int64 comparisons, Floor/FloorDiv/FloorMod at mixed signs (Python's `//` and `%`), Philox4x32-10
// known-answer vectors (Random123's kat_vectors) and moments, the formulas of ApplyAdam,
// ApplyAdagrad and ApplyAdadelta.
#include "shim.h"
namespace bin {
#include "../../../../kernels/prelude.cuh"
#include "../../../../kernels/binary.cu"
}
namespace ew {
#include "../../../../kernels/prelude.cuh"
#include "../../../../kernels/elementwise.cu"
}
namespace rnd {
#include "../../../../kernels/prelude.cuh"
#include "../../../../kernels/random.cu"
}
namespace tr {
#include "../../../../kernels/prelude.cuh"
#include "../../../../kernels/training.cu"
}
static int fails = 0;
#define CHECK(c, ...) do { if (!(c)) { fails++; printf("FAIL %d: ", __LINE__); printf(__VA_ARGS__); printf("\n"); } } while (0)
int main() {
  // broadcasting: out [2,4,3] from a [2,1,3] and b [1,4,1]
  { bin::Bcast m{}; m.n=24; m.rank=3; long long d[3]={2,4,3}; long long sa[3]={3,0,1}; long long sb[3]={0,1,0};
    for(int i=0;i<3;i++){m.dims[i]=d[i];m.strides[0][i]=sa[i];m.strides[1][i]=sb[i];}
    float a[6], b[4], o[24]; for(int i=0;i<6;i++)a[i]=i; for(int i=0;i<4;i++)b[i]=10*i;
    launch(2, 4, [&]{ bin::add_f32(a, b, o, m); });
    for(int i=0;i<2;i++)for(int j=0;j<4;j++)for(int k=0;k<3;k++) CHECK(o[i*12+j*3+k]==a[i*3+k]+b[j], "bcast add %d %d %d", i,j,k);
    bool c[24]; launch(1, 8, [&]{ bin::greater_f32(a, b, c, m); });
    for(int i=0;i<2;i++)for(int j=0;j<4;j++)for(int k=0;k<3;k++) CHECK(c[i*12+j*3+k]==(a[i*3+k]>b[j]), "bcast gt");
    // flat: scalar b
    bin::Bcast f{}; f.n=6; f.rank=0; f.strides[0][0]=1; f.strides[1][0]=0; float s=2; float o2[6];
    launch(1, 4, [&]{ bin::mul_f32(a, &s, o2, f); }); for(int i=0;i<6;i++) CHECK(o2[i]==a[i]*2, "flat mul");
    float n1[2]={NAN,1}, n2[2]={1,NAN}, mo[2]; bin::Bcast g{}; g.n=2; g.strides[0][0]=1; g.strides[1][0]=1;
    launch(1,2,[&]{ bin::maximum_f32(n1,n2,mo,g); }); CHECK(std::isnan(mo[0]) && std::isnan(mo[1]), "maximum nan: %f %f", mo[0], mo[1]); // TF: a NaN on either side gives NaN
    launch(1,2,[&]{ bin::minimum_f32(n1,n2,mo,g); }); CHECK(std::isnan(mo[0]) && std::isnan(mo[1]), "minimum nan: %f %f", mo[0], mo[1]);
    // AddN chain semantics
    bin::Ptrs8 p{}; float x1[3]={1,2,3}, x2[3]={10,20,30}, out[3]; p.p[0]=(unsigned long long)x1; p.p[1]=(unsigned long long)x2;
    launch(1,2,[&]{ bin::add_n_f32(p, 2, out, 3); }); p.p[0]=(unsigned long long)out; p.p[1]=(unsigned long long)x2;
    launch(1,2,[&]{ bin::add_n_f32(p, 2, out, 3); }); CHECK(out[2]==63, "addn chain %f", out[2]);
    // select
    bool cc[2]={true,false}; float sx[2]={1,2}, sy[2]={3,4}, so[2]; bin::Bcast h{}; h.n=2; h.strides[0][0]=1;h.strides[1][0]=1;h.strides[2][0]=1;
    launch(1,2,[&]{ bin::select_v2_f32(cc,sx,sy,so,h); }); CHECK(so[0]==1&&so[1]==4, "select");
  }
  // Int64 arithmetic wraps (computed in u64), extrema and comparisons on edge values
  { long long a[4] = {9223372036854775807LL, -9223372036854775807LL - 1, 3037000500LL, -7};
    long long b[4] = {1, -1, 3037000500LL, 7}, o[4]; bool c[4];
    bin::Bcast m{}; m.n=4; m.rank=0; m.strides[0][0]=1; m.strides[1][0]=1;
    launch(1, 2, [&]{ bin::add_i64(a, b, o, m); });
    CHECK(o[0]==(-9223372036854775807LL - 1) && o[1]==9223372036854775807LL && o[2]==6074001000LL && o[3]==0, "add_i64 wraps: %lld %lld", o[0], o[1]);
    launch(1, 2, [&]{ bin::sub_i64(a, b, o, m); });
    CHECK(o[0]==9223372036854775806LL && o[1]==(-9223372036854775807LL) && o[2]==0 && o[3]==-14, "sub_i64: %lld %lld", o[0], o[1]);
    launch(1, 2, [&]{ bin::mul_i64(a, b, o, m); });
    CHECK(o[0]==9223372036854775807LL && o[1]==(-9223372036854775807LL - 1) && o[2]==(long long)(3037000500ULL*3037000500ULL) && o[3]==-49, "mul_i64 wraps: %lld", o[2]);
    launch(1, 2, [&]{ bin::maximum_i64(a, b, o, m); }); CHECK(o[0]==a[0] && o[1]==-1 && o[2]==a[2] && o[3]==7, "maximum_i64");
    launch(1, 2, [&]{ bin::minimum_i64(a, b, o, m); }); CHECK(o[0]==1 && o[1]==a[1] && o[3]==-7, "minimum_i64");
    launch(1, 2, [&]{ bin::less_i64(a, b, c, m); }); CHECK(!c[0] && c[1] && !c[2] && c[3], "less_i64");
    launch(1, 2, [&]{ bin::equal_i64(a, b, c, m); }); CHECK(!c[0] && !c[1] && c[2] && !c[3], "equal_i64");
    launch(1, 2, [&]{ bin::greater_equal_i64(a, b, c, m); }); CHECK(c[0] && !c[1] && c[2] && !c[3], "greater_equal_i64");
  }
  // the unrolled loops (4 loads per thread, a grid stride apart) and their tails
  for (int n : {1, 7, 31, 32, 33, 100, 1003}) {
    std::vector<float> x(n), y(n), z(n); for (int i=0;i<n;i++) x[i]=i*0.25f-3;
    launch(2, 4, [&]{ ew::square_f32(x.data(), y.data(), n); });
    for (int i=0;i<n;i++) CHECK(y[i]==x[i]*x[i], "unrolled square n=%d i=%d", n, i);
    bin::Bcast f{}; f.n=n; f.rank=0; f.strides[0][0]=1; f.strides[1][0]=1;
    launch(3, 2, [&]{ bin::sub_f32(x.data(), y.data(), z.data(), f); });
    for (int i=0;i<n;i++) CHECK(z[i]==x[i]-y[i], "unrolled sub n=%d i=%d", n, i);
    std::vector<int> c(n); launch(1, 4, [&]{ ew::cast_f32_i32(x.data(), c.data(), n); });
    for (int i=0;i<n;i++) CHECK(c[i]==(int)x[i], "unrolled cast n=%d i=%d", n, i);
    // general path: out [n, 3] = x[n,1] * w[3]
    std::vector<float> w = {1, 2, 3}, o(3 * n); bin::Bcast g{}; g.n = 3 * n; g.rank = 2; g.dims[0] = n; g.dims[1] = 3;
    g.strides[0][0] = 1; g.strides[0][1] = 0; g.strides[1][0] = 0; g.strides[1][1] = 1;
    launch(2, 2, [&]{ bin::mul_f32(x.data(), w.data(), o.data(), g); });
    for (int i=0;i<n;i++) for (int j=0;j<3;j++) CHECK(o[i*3+j]==x[i]*w[j], "unrolled bcast mul n=%d", n);
  }
  // casts
  { float v[8] = {NAN, INFINITY, -INFINITY, 3e9f, -3e9f, -2.7f, 2.7f, -0.0f}; int o[8]; long long l[8]; bool bb[8];
    launch(1, 4, [&]{ ew::cast_f32_i32(v, o, 8); }); launch(1, 4, [&]{ ew::cast_f32_i64(v, l, 8); }); launch(1,4,[&]{ ew::cast_f32_bool(v, bb, 8); });
    int wo[8] = {0, 2147483647, -2147483647-1, 2147483647, -2147483647-1, -2, 2, 0};
    for (int i=0;i<8;i++) CHECK(o[i]==wo[i], "cast i32 %d: %d", i, o[i]);
    CHECK(l[1]==9223372036854775807LL && l[2]==(-9223372036854775807LL-1) && l[3]==3000000000LL && l[0]==0, "cast i64");
    CHECK(bb[0] && bb[1] && !bb[7] && bb[5], "cast bool");
    double dv[2] = {1e300, -1e300}; float fo[2]; launch(1,2,[&]{ ew::cast_f64_f32(dv, fo, 2); }); CHECK(std::isinf(fo[0]) && fo[1] < 0, "f64->f32 overflow");
    bool bs[2]={true,false}; double bd[2]; launch(1,2,[&]{ ew::cast_bool_f64(bs, bd, 2); }); CHECK(bd[0]==1 && bd[1]==0, "bool->f64");
    long long big[1] = {(1LL<<40) + 5}; int bi[1]; launch(1,1,[&]{ ew::cast_i64_i32(big, bi, 1); }); CHECK(bi[0]==5, "i64->i32 wrap %d", bi[0]);
  }
  // unary specials
  { float v[6] = {NAN, -1, 0, 7, -800, 800}; float r6[6], sg[6], sp[6], sm[6];
    launch(1,4,[&]{ ew::relu6_f32(v, r6, 6); ew::sign_f32(v, sg, 6); });
    CHECK(std::isnan(r6[0]) && r6[1]==0 && r6[3]==6, "relu6"); CHECK(std::isnan(sg[0]) && sg[1]==-1 && sg[2]==0 && sg[3]==1, "sign");
    launch(1,4,[&]{ ew::softplus_f32(v, sp, 6); ew::sigmoid_f32(v, sm, 6); });
    CHECK(sp[5]==800 && sp[4]==0 && std::fabs(sp[2]-std::log(2.0))<1e-6, "softplus %g %g", sp[4], sp[5]); CHECK(sm[5]==1 && sm[4]==0 && sm[2]==0.5f, "sigmoid");
    float lr[6]; launch(1,2,[&]{ ew::leaky_relu_f32(v, lr, 6, 0.2); }); CHECK(lr[1]==-0.2f && lr[3]==7, "leaky");
    // NaN goes through every activation as on the CPU (nn.rs): Relu keeps it (TF's
    // Relu), -0 gives +0; the others give NaN through their arithmetic
    float re[6], el[6], se[6]; launch(1,4,[&]{ ew::relu_f32(v, re, 6); ew::elu_f32(v, el, 6); ew::selu_f32(v, se, 6); });
    CHECK(std::isnan(re[0]) && re[1]==0 && re[3]==7 && re[4]==0, "relu %g %g %g", re[0], re[1], re[3]);
    CHECK(std::isnan(el[0]) && std::isnan(se[0]) && std::isnan(sp[0]) && std::isnan(lr[0]) && std::isnan(sm[0]), "NaN through elu %g selu %g softplus %g leaky %g sigmoid %g", el[0], se[0], sp[0], lr[0], sm[0]);
    double vd[4] = {NAN, -0.0, -3, 2}, rd[4]; launch(1,2,[&]{ ew::relu_f64(vd, rd, 4); });
    CHECK(std::isnan(rd[0]) && rd[1]==0 && !std::signbit(rd[1]) && rd[2]==0 && rd[3]==2, "relu f64 %g %g", rd[0], rd[1]);
  }
  // Floor, FloorDiv, FloorMod: Python's -7 // 3 == -3, -7 % 3 == 2, 7 % -3 == -2, 7.5 % -2 == -0.5
  { double x[8] = {-7, 7, -7, 7, 6, 7.5, 0, 1}, y[8] = {3, -3, -3, 3, 3, -2, 4, 0}, q[8], r[8];
    double wq[8] = {-3, -3, 2, 2, 2, -4, 0, INFINITY}, wr[8] = {2, -2, -1, 1, 0, -0.5, 0, NAN};
    bin::Bcast f{}; f.n = 8; f.strides[0][0] = 1; f.strides[1][0] = 1;
    launch(1, 4, [&]{ bin::floor_div_f64(x, y, q, f); bin::floor_mod_f64(x, y, r, f); });
    for (int i = 0; i < 8; i++) CHECK(q[i] == wq[i], "floor_div %d: %g", i, q[i]);
    for (int i = 0; i < 7; i++) CHECK(r[i] == wr[i], "floor_mod %d: %g", i, r[i]);
    CHECK(std::isnan(r[7]), "floor_mod by zero: %g", r[7]);
    float xf[5] = {-2.5f, -0.1f, 0.0f, 2.9f, -INFINITY}, yf[5];
    launch(1, 2, [&]{ ew::floor_f32(xf, yf, 5); });
    CHECK(yf[0] == -3 && yf[1] == -1 && yf[2] == 0 && yf[3] == 2 && std::isinf(yf[4]), "floor f32");
    float af[3] = {-5.5f, 5.5f, 3.0f}, bf[1] = {-2.0f}, rf[3]; bin::Bcast h{}; h.n = 3; h.strides[0][0] = 1; h.strides[1][0] = 0;
    launch(1, 2, [&]{ bin::floor_mod_f32(af, bf, rf, h); });
    CHECK(rf[0] == -1.5f && rf[1] == -0.5f && rf[2] == -1.0f, "floor_mod f32 scalar divisor: %g %g %g", rf[0], rf[1], rf[2]);
  }
  // Philox4x32-10 known answers (Random123 kat_vectors)
  { auto k = rnd::philox(0, 0, 0); CHECK(k.x==0x6627e8d5u && k.y==0xe169c58du && k.z==0xbc57ac4cu && k.w==0x9b00dbd8u, "philox kat0 %08x %08x %08x %08x", k.x,k.y,k.z,k.w);
    auto k2 = rnd::philox(~0ULL, ~0ULL, ~0ULL); CHECK(k2.x==0x408f276du && k2.y==0x41c83b0eu && k2.z==0xa20bc7c6u && k2.w==0x6d5451fdu, "philox kat1 %08x %08x %08x %08x", k2.x,k2.y,k2.z,k2.w);
    auto k3 = rnd::philox((0x299f31d0ULL<<32)|0xa4093822ULL, (0x85a308d3ULL<<32)|0x243f6a88ULL, (0x03707344ULL<<32)|0x13198a2eULL);
    CHECK(k3.x==0xd16cfe09u && k3.y==0x94fdccebu && k3.z==0x5001e420u && k3.w==0x24126ea1u, "philox kat2 %08x %08x %08x %08x", k3.x,k3.y,k3.z,k3.w);
    std::vector<double> u(100001), nn(100001); launch(4, 8, [&]{ rnd::random_uniform_f64(u.data(), 100001, 42, 0); rnd::random_standard_normal_f64(nn.data(), 100001, 42, 0); });
    double m=0,v=0, mn=0, vn=0; for(double x: u){m+=x; CHECK(x>=0 && x<1, "uniform range");} m/=u.size(); for(double x:u) v+=(x-m)*(x-m); v/=u.size();
    for(double x: nn) mn+=x; mn/=nn.size(); for(double x:nn) vn+=(x-mn)*(x-mn); vn/=nn.size();
    CHECK(std::fabs(m-0.5)<0.005 && std::fabs(v-1.0/12)<0.002, "uniform moments %f %f", m, v); CHECK(std::fabs(mn)<0.01 && std::fabs(vn-1)<0.02, "normal moments %f %f", mn, vn);
    std::vector<float> uf(10003), nf(10003); launch(2, 8, [&]{ rnd::random_uniform_f32(uf.data(), 10003, 42, 1); rnd::random_standard_normal_f32(nf.data(), 10003, 42, 1); });
    double mf=0, nm=0; for(float x: uf){ mf+=x; CHECK(x>=0 && x<1, "uniform f32 range"); } for (float x: nf){ nm+=x; CHECK(std::isfinite(x), "normal finite"); }
    CHECK(std::fabs(mf/10003-0.5)<0.02 && std::fabs(nm/10003)<0.05, "f32 moments %f %f", mf/10003, nm/10003);
  }
  // Adam matches the CPU formula
  { double var[2]={1,-1}, m[2]={0.1,0}, v[2]={0.01,0.02}, g[2]={0.5,-0.3}; double b1p=0.729,b2p=0.997,lr=0.01,b1=0.9,b2=0.999,eps=1e-8;
    double ev[2], em[2], evv[2]; for(int i=0;i<2;i++){ double lr_t=lr*std::sqrt(1-b2p)/(1-b1p); em[i]=m[i]+(g[i]-m[i])*(1-b1); evv[i]=v[i]+(g[i]*g[i]-v[i])*(1-b2); ev[i]=var[i]-lr_t*em[i]/(std::sqrt(evv[i])+eps);} 
    launch(1,2,[&]{ tr::apply_adam_f64(var, m, v, &b1p, &b2p, &lr, &b1, &b2, &eps, g, 2, 0); });
    for(int i=0;i<2;i++) CHECK(std::fabs(var[i]-ev[i])<1e-15 && m[i]==em[i] && v[i]==evv[i], "adam %d", i); }
  // Adagrad (with and without update_slots) and Adadelta match the CPU formulas
  { double var[3]={1,-1,0.5}, acc[3]={0.1,0.2,0.3}, g[3]={0.5,-0.3,0.0}, lr=0.1; double ev[3], ea[3];
    for(int i=0;i<3;i++){ ea[i]=acc[i]+g[i]*g[i]; ev[i]=var[i]-g[i]*lr*(1/std::sqrt(ea[i])); }
    launch(1,2,[&]{ tr::apply_adagrad_f64(var, acc, &lr, g, 3, 1); });
    for(int i=0;i<3;i++) CHECK(var[i]==ev[i] && acc[i]==ea[i], "adagrad %d", i);
    for(int i=0;i<3;i++) ev[i]=var[i]-g[i]*lr*(1/std::sqrt(acc[i]));
    launch(1,2,[&]{ tr::apply_adagrad_f64(var, acc, &lr, g, 3, 0); });
    for(int i=0;i<3;i++) CHECK(var[i]==ev[i] && acc[i]==ea[i], "adagrad without update_slots %d", i); }
  { double var[2]={1,-1}, a[2]={0.1,0.0}, au[2]={0.01,0.0}, g[2]={0.5,-0.3}, lr=1.0, rho=0.95, eps=1e-6;
    double ev[2], ea[2], eau[2];
    for(int i=0;i<2;i++){ ea[i]=a[i]*rho+g[i]*g[i]*(1-rho); double u=std::sqrt(au[i]+eps)*(1/std::sqrt(ea[i]+eps))*g[i];
      ev[i]=var[i]-u*lr; eau[i]=au[i]*rho+u*u*(1-rho); }
    launch(1,2,[&]{ tr::apply_adadelta_f64(var, a, au, &lr, &rho, &eps, g, 2); });
    for(int i=0;i<2;i++) CHECK(var[i]==ev[i] && a[i]==ea[i] && au[i]==eau[i], "adadelta %d", i); }
  printf("misc emulation: %d failures\n", fails);
  return fails != 0;
}

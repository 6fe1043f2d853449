// LayerNorm and GroupNorm on the CPU in one sweep over memory: four small kernels.
//
// A normalization layer does about one operation per byte it moves, so its speed
// is the number of times it reads and writes full-size tensors. Each kernel here
// sees its input as `rows` contiguous rows, one per normalized group (a token's
// features for LayerNorm; one sample's channels of one group for GroupNorm). A row
// (3 to 160 KB in realistic layers) stays in the core's first- or second-level
// cache while the kernel makes its few loops over it, so memory sees one read of x
// (and dy) and one write of the result.
//
// * layer_norm_forward:  y = (x - mean) / sigma * w + b.
// * layer_norm_backward: dx, and the gradients of w and b. These are sums down the
//   columns, over every row; each thread adds its rows into its own partial row in
//   the loop that writes dx, so x and dy are read once. The code torch.compile
//   emits on a CPU sums the columns in a second sweep over x and dy.
// * group_norm_forward:  y = (x - mean) / sigma * w[c] + b[c], per channel c. The
//   code torch.compile emits takes all the statistics in one sweep and writes y in
//   a second, so it reads x from memory twice.
// * group_norm_backward: dx, and the gradients of w and b (per-thread partial sums
//   per channel, as in layer_norm_backward), in one sweep over x and dy.
//
// `#pragma omp simd` lets the compiler use SIMD registers and add a sum in any
// order (as torch's own kernels do); nothing else is reordered. Formulas:
// norms/autograd.py; measurements: book/speed.ipynb. Built and loaded by
// norms/fast/cpu_kernels.py (g++ -O3 -fopenmp and the flags of cpu_kernels.flags for
// the CPU: -march=native on x86-64, -mcpu=native on aarch64), called through ctypes,
// one C function per dtype. Nothing here is specific to one instruction set: the
// same loops become AVX-512, AVX2 or NEON code.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <omp.h>

// The sum of f(i) for i < n. One running sum would make every addition wait for
// the one before it (a few cycles each); 32 partial sums (several SIMD registers)
// let them overlap. They are then added in pairs (16 + 16, 8 + 8, ...: five
// steps, each one SIMD instruction) rather than one after the other (31 steps
// that wait for each other): with rows of a few hundred numbers, that wait was
// a tenth of a LayerNorm row's time on an AVX-512 CPU when the row is in the cache.
template <typename T, typename F>
static T sum_of(int64_t n, F f) {
  constexpr int64_t L = 32;
  T part[L] = {};
  int64_t i = 0;
  for (; i + L <= n; i += L)
#pragma omp simd
    for (int64_t j = 0; j < L; j++) part[j] += f(i + j);
  for (int64_t j = 0; i + j < n; j++) part[j] += f(i + j);  // the tail: fewer than L
  for (int64_t half = L / 2; half > 0; half /= 2)
    for (int64_t j = 0; j < half; j++) part[j] += part[j + half];
  return part[0];
}

// Ask the memory for the n numbers at p (up to 16 KB of them) while the loops work
// on data already in the cache: else memory idles during a row's second and third
// loops, and the next row's first loop waits for it. One request per 64-byte line.
template <typename T>
static void prefetch(const T* p, int64_t n) {
  n = std::min<int64_t>(n, 16384 / sizeof(T));
  for (int64_t i = 0; i < n; i += 64 / sizeof(T)) __builtin_prefetch(p + i);
}

// Mean and 1/sigma of one row: the two-pass formula (no E[x^2] - E[x]^2) on chunks
// of 2048 numbers, small enough to stay in the first-level cache for the second
// pass, so the row is read from memory once. The chunks are combined with the
// formula of Chan, Golub and LeVeque.
template <typename T>
static void row_stats(const T* x, int64_t cols, double eps, T* mean, T* rstd) {
  constexpr int64_t CHUNK = 2048;
  T m = 0, m2 = 0;  // mean and sum of squared deviations of the chunks so far
  for (int64_t done = 0; done < cols; done += CHUNK) {
    const int64_t len = std::min(CHUNK, cols - done);
    const T* xc = x + done;  // (len,)
    const T cm = sum_of<T>(len, [=](int64_t i) { return xc[i]; }) / len;
    prefetch(xc + len, std::min(CHUNK, cols - done - len));  // the next chunk, if any
    const T cm2 =
        sum_of<T>(len, [=](int64_t i) { return (xc[i] - cm) * (xc[i] - cm); });
    const T delta = cm - m;
    m += delta * len / (done + len);
    m2 += cm2 + delta * delta * done * len / (done + len);
  }
  *mean = m;
  *rstd = T(1) / std::sqrt(m2 / cols + T(eps));
}

// x, y: (rows, cols); w, b: (cols,) or null (no affine)
template <typename T>
static void layer_norm_forward(const T* x, const T* w, const T* b, int64_t rows,
                               int64_t cols, double eps, int threads, T* y) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    const T* xr = x + r * cols;  // (cols,)
    T* yr = y + r * cols;        // (cols,)
    T mean, rstd;
    row_stats(xr, cols, eps, &mean, &rstd);
    if (r + 1 < rows) prefetch(xr + cols, cols);  // the next row
#pragma omp simd
    for (int64_t i = 0; i < cols; i++) {
      const T xhat = (xr[i] - mean) * rstd;
      yr[i] = (w ? xhat * w[i] : xhat) + (b ? b[i] : T(0));
    }
  }
}

// dx = rstd * (g - <g> - xhat <g xhat>) with g = dy * w and <.> the row's mean,
// and the partial sums dw_part[t] += dy * xhat, db_part[t] += dy over the rows of
// thread t. x, dy, dx: (rows, cols); w: (cols,) or null;
// dw_part, db_part: (threads, cols), zero on entry.
template <typename T>
static void layer_norm_backward(const T* x, const T* dy, const T* w, int64_t rows,
                                int64_t cols, double eps, int threads, T* dx,
                                T* dw_part, T* db_part) {
#pragma omp parallel num_threads(threads)
  {
    T* dw = dw_part + omp_get_thread_num() * cols;  // this thread's row, (cols,)
    T* db = db_part + omp_get_thread_num() * cols;  // (cols,)
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
      const T* xr = x + r * cols;    // (cols,)
      const T* dyr = dy + r * cols;  // (cols,)
      T* dxr = dx + r * cols;        // (cols,)
      T mean, rstd;
      row_stats(xr, cols, eps, &mean, &rstd);
      // <g> and <g xhat>, and this row's share of dw and db, in one loop
      T sum_g = 0, sum_g_xhat = 0;
#pragma omp simd reduction(+ : sum_g, sum_g_xhat)
      for (int64_t i = 0; i < cols; i++) {
        const T xhat = (xr[i] - mean) * rstd;
        const T g = w ? dyr[i] * w[i] : dyr[i];
        sum_g += g;
        sum_g_xhat += g * xhat;
        dw[i] += dyr[i] * xhat;
        db[i] += dyr[i];
      }
      const T mean_g = sum_g / cols, mean_g_xhat = sum_g_xhat / cols;
      if (r + 1 < rows) prefetch(xr + cols, cols), prefetch(dyr + cols, cols);
#pragma omp simd
      for (int64_t i = 0; i < cols; i++) {
        const T xhat = (xr[i] - mean) * rstd;
        const T g = w ? dyr[i] * w[i] : dyr[i];
        dxr[i] = rstd * (g - mean_g - xhat * mean_g_xhat);
      }
    }
  }
}

// x, y: (n, channels, inner) with inner = H * W, seen as n * groups rows of
// (channels / groups) * inner numbers; w, b: (channels,) or null
template <typename T>
static void group_norm_forward(const T* x, const T* w, const T* b, int64_t n,
                               int64_t channels, int64_t groups, int64_t inner,
                               double eps, int threads, T* y) {
  const int64_t per_group = channels / groups, cols = per_group * inner;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t r = 0; r < n * groups; r++) {
    const T* xr = x + r * cols;  // (channels / groups, inner)
    T* yr = y + r * cols;        // (channels / groups, inner)
    T mean, rstd;
    row_stats(xr, cols, eps, &mean, &rstd);
    if (r + 1 < n * groups) prefetch(xr + cols, cols);  // the next group
    for (int64_t k = 0; k < per_group; k++) {
      const int64_t c = (r % groups) * per_group + k;  // the channel
      const T scale = w ? rstd * w[c] : rstd, shift = b ? b[c] : T(0);
      const T* xk = xr + k * inner;  // (inner,)
      T* yk = yr + k * inner;        // (inner,)
#pragma omp simd
      for (int64_t i = 0; i < inner; i++) yk[i] = (xk[i] - mean) * scale + shift;
    }
  }
}

// dx, and the partial sums of the gradients of w and b, in one sweep over x and dy.
// Per group (a row of channels / groups channels of `inner` numbers), with
// g = dy * w[c] and <.> the group's mean:
//   dx = rstd * (g - <g> - xhat <g xhat>),
// where <g> and <g xhat> follow from two sums per channel, sum dy and
// sum dy * xhat, which are also that channel's share of db and dw. A group
// (3 to 160 KB) stays in cache between its loops, so x and dy are read from memory
// once; dw_part[t] and db_part[t] gather the sums of thread t, as in
// layer_norm_backward. x, dy, dx: (n, channels, inner); w: (channels,) or null;
// dw_part, db_part: (threads, channels), zero on entry.
template <typename T>
static void group_norm_backward(const T* x, const T* dy, const T* w, int64_t n,
                                int64_t channels, int64_t groups, int64_t inner,
                                double eps, int threads, T* dx, T* dw_part,
                                T* db_part) {
  const int64_t per_group = channels / groups, cols = per_group * inner;
#pragma omp parallel num_threads(threads)
  {
    T* dw = dw_part + omp_get_thread_num() * channels;  // this thread's row, (channels,)
    T* db = db_part + omp_get_thread_num() * channels;  // (channels,)
#pragma omp for schedule(static)
    for (int64_t r = 0; r < n * groups; r++) {
      const T* xr = x + r * cols;    // (channels / groups, inner)
      const T* dyr = dy + r * cols;  // (channels / groups, inner)
      T* dxr = dx + r * cols;        // (channels / groups, inner)
      const int64_t c0 = (r % groups) * per_group;  // the group's first channel
      T mean, rstd;
      row_stats(xr, cols, eps, &mean, &rstd);
      T sum_g = 0, sum_g_xhat = 0;  // the group's sums of g and g * xhat
      for (int64_t k = 0; k < per_group; k++) {
        const T* xk = xr + k * inner;    // (inner,)
        const T* dyk = dyr + k * inner;  // (inner,)
        const T sum_dy = sum_of<T>(inner, [=](int64_t i) { return dyk[i]; });
        const T sum_dy_xhat =
            rstd * sum_of<T>(inner, [=](int64_t i) { return dyk[i] * (xk[i] - mean); });
        const T wc = w ? w[c0 + k] : T(1);
        sum_g += wc * sum_dy;
        sum_g_xhat += wc * sum_dy_xhat;
        dw[c0 + k] += sum_dy_xhat;
        db[c0 + k] += sum_dy;
      }
      const T mean_g = sum_g / cols, mean_g_xhat = sum_g_xhat / cols;
      if (r + 1 < n * groups) prefetch(xr + cols, cols), prefetch(dyr + cols, cols);
      for (int64_t k = 0; k < per_group; k++) {
        const T* xk = xr + k * inner;    // (inner,)
        const T* dyk = dyr + k * inner;  // (inner,)
        T* dxk = dxr + k * inner;        // (inner,)
        const T wc = w ? w[c0 + k] : T(1);
#pragma omp simd
        for (int64_t i = 0; i < inner; i++) {
          const T xhat = (xk[i] - mean) * rstd;
          dxk[i] = rstd * (wc * dyk[i] - mean_g - xhat * mean_g_xhat);
        }
      }
    }
  }
}

// The C functions ctypes calls: float32 (f32) and float64 (f64).
extern "C" {
void layer_norm_forward_f32(const float* x, const float* w, const float* b,
                            int64_t rows, int64_t cols, double eps, int threads,
                            float* y) {
  layer_norm_forward(x, w, b, rows, cols, eps, threads, y);
}
void layer_norm_forward_f64(const double* x, const double* w, const double* b,
                            int64_t rows, int64_t cols, double eps, int threads,
                            double* y) {
  layer_norm_forward(x, w, b, rows, cols, eps, threads, y);
}
void layer_norm_backward_f32(const float* x, const float* dy, const float* w,
                             int64_t rows, int64_t cols, double eps, int threads,
                             float* dx, float* dw_part, float* db_part) {
  layer_norm_backward(x, dy, w, rows, cols, eps, threads, dx, dw_part, db_part);
}
void layer_norm_backward_f64(const double* x, const double* dy, const double* w,
                             int64_t rows, int64_t cols, double eps, int threads,
                             double* dx, double* dw_part, double* db_part) {
  layer_norm_backward(x, dy, w, rows, cols, eps, threads, dx, dw_part, db_part);
}
void group_norm_forward_f32(const float* x, const float* w, const float* b,
                            int64_t n, int64_t channels, int64_t groups, int64_t inner,
                            double eps, int threads, float* y) {
  group_norm_forward(x, w, b, n, channels, groups, inner, eps, threads, y);
}
void group_norm_forward_f64(const double* x, const double* w, const double* b,
                            int64_t n, int64_t channels, int64_t groups, int64_t inner,
                            double eps, int threads, double* y) {
  group_norm_forward(x, w, b, n, channels, groups, inner, eps, threads, y);
}
void group_norm_backward_f32(const float* x, const float* dy, const float* w, int64_t n,
                             int64_t channels, int64_t groups, int64_t inner, double eps,
                             int threads, float* dx, float* dw_part, float* db_part) {
  group_norm_backward(x, dy, w, n, channels, groups, inner, eps, threads, dx, dw_part,
                      db_part);
}
void group_norm_backward_f64(const double* x, const double* dy, const double* w, int64_t n,
                             int64_t channels, int64_t groups, int64_t inner, double eps,
                             int threads, double* dx, double* dw_part, double* db_part) {
  group_norm_backward(x, dy, w, n, channels, groups, inner, eps, threads, dx, dw_part,
                      db_part);
}
}

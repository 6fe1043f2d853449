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
// * layer_norm_forward:  y = (x - mean) / sigma * w + b, and each row's mean and
//   1/sigma, kept for the backward pass (as torch's own kernels do).
// * layer_norm_backward: dx, and the gradients of w and b. These are sums down the
//   columns, over every row; each thread adds its rows into its own partial row in
//   the loop that writes dx, so x and dy are read once, and the partial rows are
//   added up at the end. The code torch.compile emits on a CPU sums the columns in
//   a second sweep over x and dy.
// * group_norm_forward:  y = (x - mean) / sigma * w[c] + b[c], per channel c, and
//   each group's mean and 1/sigma. The code torch.compile emits takes all the
//   statistics in one sweep and writes y in a second, so it reads x from memory twice.
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
#include <vector>

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

// No prefetching by hand. The loops read memory in order, which the CPU's own
// prefetchers follow: they ask for the next lines while the loops work on the row in
// the cache. An earlier version asked for the whole next row at once
// (__builtin_prefetch, one request per 64-byte line): measured on an AMD EPYC with
// AVX-512 (Zen 4), one thread, the kernels were slower with it (the LayerNorm
// forward pass by about a fifth, its backward pass by about a third) or no faster
// (GroupNorm on large groups): the extra requests compete with the ones the CPU
// makes anyway (book/speed.ipynb, README).

// Mean and 1/sigma of one row, in one loop over it (the output's is the second, as in
// torch's kernels). No E[x^2] - E[x]^2, whose rounding error grows with
// mean^2 / variance (catastrophic for an input far from zero).
//
// Each of L lanes (a few SIMD registers) keeps Welford's running mean m and sum of
// squared deviations m2 of every L-th number, updated as each number arrives (the
// k-th number of the lane):
//   d = x - m,  m += d / k,  m2 += d * (x - m).
// The lanes are then combined in pairs, and the chunks (at most 2048 numbers, so a
// lane makes at most 64 updates in a row) and the row's last few numbers into the
// row, by the formula of Chan, Golub and LeVeque for two groups a and b of n_a and
// n_b numbers (n = n_a + n_b):
//   m = m_a + (m_b - m_a) * n_b / n,  m2 = m2_a + m2_b + (m_b - m_a)^2 * n_a * n_b / n.
// Welford's m carries a rounding error of the size of |m|'s last digit at every
// update, and the deviations with it: measured in float32, 1/sigma came out 5e-4
// wrong at |mean| / sigma = 1e5 and 0.2 wrong at 1e7 (torch's kernel as well). So the
// numbers are first shifted by the row's first one, x[0]: x - x[0] is exact when x is
// close to x[0] (the hard case, |mean| >> sigma), and the lanes then work on numbers
// of the size of sigma (|x[0] - mean| <= sigma sqrt(cols) in any row). Measured
// (float32, rows of 768 to 100003 numbers, |mean| / sigma up to 1e7): 1/sigma within
// 2e-7 of the float64 value, where the two-pass formula of an earlier version (three
// loops over the row with the output's) was 1e-3 off at 1e7. (A shifted
// E[x^2] - E[x]^2 would still lose the digits of (x[0] - mean)^2 / variance: Welford's
// update squares nothing large.) One thread on an AMD EPYC with AVX-512 (Zen 4): a
// LayerNorm row of 768 numbers in the cache takes a sixth less time than with the
// three loops.
//
// SCALED: the same on x / scale (the fallback of row_stats, below).
template <typename T, bool SCALED>
static void row_moments(const T* x, int64_t cols, T scale, T* mean, T* sum_sq) {
  constexpr int64_t L = 32, CHUNK = 2048;  // lanes; the most numbers in a chunk
  const auto at = [&](const T* p) { return SCALED ? *p / scale : *p; };
  const T shift = cols > 0 ? at(x) : T(0);
  T m = 0, m2 = 0;  // mean and sum of squared deviations of x[:done] - shift
  int64_t done = 0;
  const auto merge = [&](T cm, T cm2, int64_t len) {  // x[done:done + len] into x[:done]
    const T delta = cm - m;
    m += delta * len / (done + len);
    m2 += cm2 + delta * delta * done * len / (done + len);
    done += len;
  };
  while (cols - done >= L) {
    const int64_t steps = std::min(CHUNK, cols - done) / L;  // numbers per lane
    const T* xc = x + done;                                    // (steps, L)
    T lm[L] = {}, lm2[L] = {};  // each lane's mean and sum of squared deviations
    // (The loop runs over a pointer, not over a counter k: g++ 12 "unrolls and jams"
    // a counted loop around an `omp simd` loop, and the jammed loop was not
    // vectorized for AVX2 or NEON: twice slower.)
    T k = 0;  // numbers per lane so far
    for (const T* xk = xc; xk < xc + steps * L; xk += L) {  // xk: (L,)
      k += 1;
      const T inv = T(1) / k;  // one division per L numbers
#pragma omp simd
      for (int64_t j = 0; j < L; j++) {
        const T xi = at(xk + j) - shift, d = xi - lm[j];
        lm[j] += d * inv;
        lm2[j] += d * (xi - lm[j]);
      }
    }
    // lanes in pairs (16 + 16, 8 + 8, ...), each of `count` numbers
    int64_t count = steps;
    for (int64_t half = L / 2; half > 0; half /= 2, count *= 2)
#pragma omp simd
      for (int64_t j = 0; j < half; j++) {
        const T delta = lm[j + half] - lm[j];
        lm[j] += delta * T(0.5);
        lm2[j] += lm2[j + half] + delta * delta * (T(0.5) * count);
      }
    merge(lm[0], lm2[0], steps * L);
  }
  if (done < cols) {  // the last numbers, fewer than L: the two-pass formula
    const int64_t len = cols - done;
    const T* xc = x + done;  // (len,)
    T s = 0, s2 = 0;
    for (int64_t i = 0; i < len; i++) s += at(xc + i) - shift;
    const T cm = s / len;
    for (int64_t i = 0; i < len; i++) s2 += (at(xc + i) - shift - cm) * (at(xc + i) - shift - cm);
    merge(cm, s2, len);
  }
  *mean = shift + m;
  *sum_sq = m2;
}

// Mean and 1/sigma of one row (row_moments). Where the squared deviations overflow
// (numbers near the square root of T's largest, e.g. 1e20 in float32), a second look
// at the row, still in the cache: the moments of x / max|x|, which square nothing
// large, scaled back, as norms.functional does (norms/functional.py, _normalize_rows).
// Every other row takes the first branch only, with the same numbers as before. A row
// with an infinite or NaN number stays NaN.
template <typename T>
static void row_stats(const T* x, int64_t cols, double eps, T* mean, T* rstd) {
  T m, m2;
  row_moments<T, false>(x, cols, T(1), &m, &m2);
  if (!std::isfinite(m2) || !std::isfinite(m)) {
    T s = 0;  // max |x|
    for (int64_t i = 0; i < cols; i++) s = std::max(s, std::abs(x[i]));
    if (std::isfinite(s) && s > 0) {
      row_moments<T, true>(x, cols, s, &m, &m2);
      *mean = m * s;
      *rstd = T(1) / (s * std::sqrt(m2 / cols + T(eps) / s / s));
      return;
    }
  }
  *mean = m;
  *rstd = T(1) / std::sqrt(m2 / cols + T(eps));
}

// How many threads a loop over `rows` rows of `cols` numbers gets: none beyond the
// first for less than 32768 numbers (waking a thread costs a few microseconds, as
// much as normalizing that many numbers; torch's kernels use the same grain), and
// never more than there are rows (a thread without a row would only wait).
static int threads_for(int64_t rows, int64_t cols, int threads) {
  if (rows * cols < 32768) return 1;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, rows)));
}

// The sums each thread kept in its own rows of part (threads, 2, n), added in the
// order of the threads (so that a result does not depend on which thread finished
// first) into out_w and out_b (n,). Call inside a parallel region, after a barrier.
template <typename T>
static void add_partial_sums(const T* part, int threads, int64_t n, T* out_w, T* out_b) {
#pragma omp for schedule(static)
  for (int64_t i = 0; i < n; i++) {
    T sw = 0, sb = 0;
    for (int t = 0; t < threads; t++) sw += part[(2 * t) * n + i], sb += part[(2 * t + 1) * n + i];
    out_w[i] = sw, out_b[i] = sb;
  }
}

// x, y: (rows, cols); w, b: (cols,) or null (no affine); mean, rstd: (rows,), or null
// when no backward pass will follow. The backward pass needs each row's mean and
// 1/sigma: written here (8 bytes a row), they need not be computed again there.
template <typename T>
static void layer_norm_forward(const T* x, const T* w, const T* b, int64_t rows,
                               int64_t cols, double eps, int threads, T* y, T* mean,
                               T* rstd) {
#pragma omp parallel for num_threads(threads_for(rows, cols, threads)) schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    const T* xr = x + r * cols;  // (cols,)
    T* yr = y + r * cols;        // (cols,)
    T m, s;
    row_stats(xr, cols, eps, &m, &s);
    if (mean) mean[r] = m, rstd[r] = s;
#pragma omp simd
    for (int64_t i = 0; i < cols; i++) {
      const T xhat = (xr[i] - m) * s;
      yr[i] = (w ? xhat * w[i] : xhat) + (b ? b[i] : T(0));
    }
  }
}

// dx = rstd * (g - <g> - xhat <g xhat>) with g = dy * w and <.> the row's mean, and
// the gradients of w and b: dw = sum over rows of dy * xhat, db = sum of dy. Each
// thread adds its rows into rows of its own (no two threads write the same number),
// which are added up at the end. x, dy, dx: (rows, cols); w: (cols,) or null;
// mean, rstd: (rows,) from the forward pass, or null (then computed here from x);
// dw, db: (cols,).
template <typename T>
static void layer_norm_backward(const T* x, const T* dy, const T* w, const T* mean,
                                const T* rstd, int64_t rows, int64_t cols, double eps,
                                int threads, T* dx, T* dw, T* db) {
  threads = threads_for(rows, cols, threads);
  std::vector<T> part(2 * threads * cols);  // (threads, 2, cols): each thread's dw, db
#pragma omp parallel num_threads(threads)
  {
    T* dw_t = part.data() + 2 * omp_get_thread_num() * cols;  // (cols,)
    T* db_t = dw_t + cols;                                     // (cols,)
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
      const T* xr = x + r * cols;    // (cols,)
      const T* dyr = dy + r * cols;  // (cols,)
      T* dxr = dx + r * cols;        // (cols,)
      T m, s;
      if (mean) m = mean[r], s = rstd[r];
      else row_stats(xr, cols, eps, &m, &s);
      // <g> and <g xhat>, and this row's share of dw and db, in one loop
      T sum_g = 0, sum_g_xhat = 0;
#pragma omp simd reduction(+ : sum_g, sum_g_xhat)
      for (int64_t i = 0; i < cols; i++) {
        const T xhat = (xr[i] - m) * s;
        const T g = w ? dyr[i] * w[i] : dyr[i];
        sum_g += g;
        sum_g_xhat += g * xhat;
        dw_t[i] += dyr[i] * xhat;
        db_t[i] += dyr[i];
      }
      const T mean_g = sum_g / cols, mean_g_xhat = sum_g_xhat / cols;
#pragma omp simd
      for (int64_t i = 0; i < cols; i++) {
        const T xhat = (xr[i] - m) * s;
        const T g = w ? dyr[i] * w[i] : dyr[i];
        dxr[i] = s * (g - mean_g - xhat * mean_g_xhat);
      }
    }
    add_partial_sums(part.data(), threads, cols, dw, db);  // after the loop's barrier
  }
}

// x, y: (n, channels, inner) with inner = H * W, seen as n * groups rows of
// (channels / groups) * inner numbers; w, b: (channels,) or null; mean, rstd:
// (n * groups,) or null, as in layer_norm_forward.
template <typename T>
static void group_norm_forward(const T* x, const T* w, const T* b, int64_t n,
                               int64_t channels, int64_t groups, int64_t inner,
                               double eps, int threads, T* y, T* mean, T* rstd) {
  const int64_t per_group = channels / groups, cols = per_group * inner;
#pragma omp parallel for num_threads(threads_for(n * groups, cols, threads)) schedule(static)
  for (int64_t r = 0; r < n * groups; r++) {
    const T* xr = x + r * cols;  // (channels / groups, inner)
    T* yr = y + r * cols;        // (channels / groups, inner)
    T m, s;
    row_stats(xr, cols, eps, &m, &s);
    if (mean) mean[r] = m, rstd[r] = s;
    for (int64_t k = 0; k < per_group; k++) {
      const int64_t c = (r % groups) * per_group + k;  // the channel
      const T scale = w ? s * w[c] : s, shift = b ? b[c] : T(0);
      const T* xk = xr + k * inner;  // (inner,)
      T* yk = yr + k * inner;        // (inner,)
#pragma omp simd
      for (int64_t i = 0; i < inner; i++) yk[i] = (xk[i] - m) * scale + shift;
    }
  }
}

// dx, and the gradients of w and b, in one sweep over x and dy. Per group (a row of
// channels / groups channels of `inner` numbers), with g = dy * w[c] and <.> the
// group's mean:
//   dx = rstd * (g - <g> - xhat <g xhat>),
// where <g> and <g xhat> follow from two sums per channel, sum dy and
// sum dy * xhat, which are also that channel's share of db and dw. A group
// (3 to 160 KB) stays in cache between its loops, so x and dy are read from memory
// once; each thread adds its channel sums into rows of its own, as in
// layer_norm_backward. x, dy, dx: (n, channels, inner); w: (channels,) or null;
// mean, rstd: (n * groups,) from the forward pass, or null; dw, db: (channels,).
template <typename T>
static void group_norm_backward(const T* x, const T* dy, const T* w, const T* mean,
                                const T* rstd, int64_t n, int64_t channels, int64_t groups,
                                int64_t inner, double eps, int threads, T* dx, T* dw,
                                T* db) {
  const int64_t per_group = channels / groups, cols = per_group * inner;
  threads = threads_for(n * groups, cols, threads);
  std::vector<T> part(2 * threads * channels);  // (threads, 2, channels)
#pragma omp parallel num_threads(threads)
  {
    T* dw_t = part.data() + 2 * omp_get_thread_num() * channels;  // (channels,)
    T* db_t = dw_t + channels;                                     // (channels,)
#pragma omp for schedule(static)
    for (int64_t r = 0; r < n * groups; r++) {
      const T* xr = x + r * cols;    // (channels / groups, inner)
      const T* dyr = dy + r * cols;  // (channels / groups, inner)
      T* dxr = dx + r * cols;        // (channels / groups, inner)
      const int64_t c0 = (r % groups) * per_group;  // the group's first channel
      T m, s;
      if (mean) m = mean[r], s = rstd[r];
      else row_stats(xr, cols, eps, &m, &s);
      T sum_g = 0, sum_g_xhat = 0;  // the group's sums of g and g * xhat
      for (int64_t k = 0; k < per_group; k++) {
        const T* xk = xr + k * inner;    // (inner,)
        const T* dyk = dyr + k * inner;  // (inner,)
        const T sum_dy = sum_of<T>(inner, [=](int64_t i) { return dyk[i]; });
        const T sum_dy_xhat =
            s * sum_of<T>(inner, [=](int64_t i) { return dyk[i] * (xk[i] - m); });
        const T wc = w ? w[c0 + k] : T(1);
        sum_g += wc * sum_dy;
        sum_g_xhat += wc * sum_dy_xhat;
        dw_t[c0 + k] += sum_dy_xhat;
        db_t[c0 + k] += sum_dy;
      }
      const T mean_g = sum_g / cols, mean_g_xhat = sum_g_xhat / cols;
      for (int64_t k = 0; k < per_group; k++) {
        const T* xk = xr + k * inner;    // (inner,)
        const T* dyk = dyr + k * inner;  // (inner,)
        T* dxk = dxr + k * inner;        // (inner,)
        const T wc = w ? w[c0 + k] : T(1);
#pragma omp simd
        for (int64_t i = 0; i < inner; i++) {
          const T xhat = (xk[i] - m) * s;
          dxk[i] = s * (wc * dyk[i] - mean_g - xhat * mean_g_xhat);
        }
      }
    }
    add_partial_sums(part.data(), threads, channels, dw, db);  // after the loop's barrier
  }
}

// The C functions ctypes calls: float32 (f32) and float64 (f64).
#define NORMS_KERNELS(T, SUFFIX)                                                          \
  void layer_norm_forward_##SUFFIX(const T* x, const T* w, const T* b, int64_t rows,     \
                                   int64_t cols, double eps, int threads, T* y, T* mean, \
                                   T* rstd) {                                            \
    layer_norm_forward(x, w, b, rows, cols, eps, threads, y, mean, rstd);                \
  }                                                                                       \
  void layer_norm_backward_##SUFFIX(const T* x, const T* dy, const T* w, const T* mean,  \
                                    const T* rstd, int64_t rows, int64_t cols,           \
                                    double eps, int threads, T* dx, T* dw, T* db) {      \
    layer_norm_backward(x, dy, w, mean, rstd, rows, cols, eps, threads, dx, dw, db);     \
  }                                                                                       \
  void group_norm_forward_##SUFFIX(const T* x, const T* w, const T* b, int64_t n,        \
                                   int64_t channels, int64_t groups, int64_t inner,      \
                                   double eps, int threads, T* y, T* mean, T* rstd) {    \
    group_norm_forward(x, w, b, n, channels, groups, inner, eps, threads, y, mean, rstd); \
  }                                                                                       \
  void group_norm_backward_##SUFFIX(const T* x, const T* dy, const T* w, const T* mean,  \
                                    const T* rstd, int64_t n, int64_t channels,          \
                                    int64_t groups, int64_t inner, double eps,           \
                                    int threads, T* dx, T* dw, T* db) {                  \
    group_norm_backward(x, dy, w, mean, rstd, n, channels, groups, inner, eps, threads,  \
                        dx, dw, db);                                                     \
  }

extern "C" {
NORMS_KERNELS(float, f32)
NORMS_KERNELS(double, f64)
}

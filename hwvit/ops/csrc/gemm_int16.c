/* Exact int8 x int8 -> integer matrix products on AVX2 with vpmaddwd (hwvit/ops/native.py builds it).
 *
 * Both operands are widened to int16 and multiplied in pairs along K: vpmaddwd forms
 * a[2p]*w[2p] + a[2p+1]*w[2p+1] in each int32 lane, exactly (|pair| <= 2 * 2^14 = 2^15), and
 * vpaddd adds the pairs into int32 accumulators. Every operation is on integers; the sum over K
 * stays exact while K * 2^14 < 2^31, i.e. K < 2^17 (the Python wrapper splits longer K). Results are
 * written as int64, with an int64 bias per output column added on the way out.
 *
 * Layouts (odd K is padded with one zero column, which adds nothing):
 *   packed A: rows padded with zeros to a multiple of MR; row m holds int16 a[m, 0..2*KP-1].
 *   packed W: panels of NR = 8 * NV output columns; panel p, pair kp holds, for j = 0..NR-1,
 *             the int16 pair (w[p*NR + j, 2kp], w[p*NR + j, 2kp + 1]); columns past N are zero.
 * The microkernel keeps MR x NR int32 sums in MR * NV = 12 of the 16 ymm registers.
 */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define MR 4 /* the tile below is written out for MR = 4, NV = 3 */
#define NV 3
#define NR (8 * NV)
#define A_BLOCK_BYTES (384 * 1024)

static int64_t pairs_of(int64_t k) { return (k + 1) / 2; }
static int64_t rows_padded(int64_t m) { return (m + MR - 1) / MR * MR; }
static int64_t panels_of(int64_t n) { return (n + NR - 1) / NR; }

int hw_mr(void) { return MR; }
int hw_nr(void) { return NR; }

/* int16 elements of one packed A (M x K) and one packed W (N x K) */
int64_t hw_packed_a_size(int64_t m, int64_t k) { return rows_padded(m) * pairs_of(k) * 2; }
int64_t hw_packed_w_size(int64_t n, int64_t k) { return panels_of(n) * pairs_of(k) * NR * 2; }

/* count matrices (M x K int8, contiguous, one after another) -> packed A, one after another */
void hw_pack_a(const int8_t *a, int64_t count, int64_t m, int64_t k, int16_t *out) {
    const int64_t kp2 = pairs_of(k) * 2, size = hw_packed_a_size(m, k);
    for (int64_t b = 0; b < count; b++) {
        int16_t *dst = out + b * size;
        const int8_t *src = a + b * m * k;
        memset(dst, 0, (size_t)size * sizeof(int16_t));
        for (int64_t r = 0; r < m; r++)
            for (int64_t c = 0; c < k; c++) dst[r * kp2 + c] = src[r * k + c];
    }
}

/* count matrices (N x K int8) -> packed W, one after another */
void hw_pack_w(const int8_t *w, int64_t count, int64_t n, int64_t k, int16_t *out) {
    const int64_t kp = pairs_of(k), size = hw_packed_w_size(n, k);
    for (int64_t b = 0; b < count; b++) {
        int16_t *dst = out + b * size;
        const int8_t *src = w + b * n * k;
        memset(dst, 0, (size_t)size * sizeof(int16_t));
        for (int64_t col = 0; col < n; col++) {
            int16_t *base = dst + (col / NR) * kp * NR * 2 + 2 * (col % NR);
            for (int64_t c = 0; c < k; c++) base[(c / 2) * NR * 2 + (c & 1)] = src[col * k + c];
        }
    }
}

/* One row of the tile: pair q of row ``ap`` times the three weight vectors, into its three sums */
#define TILE_ROW(ap, s0, s1, s2)                                   \
    do {                                                           \
        const __m256i av = _mm256_set1_epi32((ap)[q]);             \
        s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(av, w0));      \
        s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(av, w1));      \
        s2 = _mm256_add_epi32(s2, _mm256_madd_epi16(av, w2));      \
    } while (0)

/* Store one row's three sums */
#define STORE_ROW(dst, s0, s1, s2)                                 \
    do {                                                           \
        _mm256_storeu_si256((__m256i *)(dst), s0);                 \
        _mm256_storeu_si256((__m256i *)((dst) + 8), s1);           \
        _mm256_storeu_si256((__m256i *)((dst) + 16), s2);          \
    } while (0)

/* One MR x NR tile: out[i][j] = sum over pairs q of the int16 pair products (12 named registers,
 * so the compiler keeps every sum in a ymm register; an array of them was spilled to the stack). */
static void tile(const int32_t *arow, int64_t kp, const int32_t *wq, int32_t out[MR][NR]) {
    __m256i c00 = _mm256_setzero_si256(), c01 = c00, c02 = c00, c10 = c00, c11 = c00, c12 = c00;
    __m256i c20 = c00, c21 = c00, c22 = c00, c30 = c00, c31 = c00, c32 = c00;
    const int32_t *a0 = arow, *a1 = arow + kp, *a2 = arow + 2 * kp, *a3 = arow + 3 * kp;
    for (int64_t q = 0; q < kp; q++, wq += NR) {
        const __m256i w0 = _mm256_loadu_si256((const __m256i *)wq);
        const __m256i w1 = _mm256_loadu_si256((const __m256i *)(wq + 8));
        const __m256i w2 = _mm256_loadu_si256((const __m256i *)(wq + 16));
        TILE_ROW(a0, c00, c01, c02);
        TILE_ROW(a1, c10, c11, c12);
        TILE_ROW(a2, c20, c21, c22);
        TILE_ROW(a3, c30, c31, c32);
    }
    STORE_ROW(out[0], c00, c01, c02);
    STORE_ROW(out[1], c10, c11, c12);
    STORE_ROW(out[2], c20, c21, c22);
    STORE_ROW(out[3], c30, c31, c32);
}

/* rows of A per job for an M x K product: blocks of at most A_BLOCK_BYTES of packed A (3/4 of a
 * Zen 3 core's 512 KiB L2) stay in cache while a job's panels pass over them, and the blocks are
 * made equal. Without blocking, at batch 64 A (12608 x 768) was read from memory once per panel
 * (half speed); with blocks smaller than A needs, W is read from L3 once per block (197 x 768 in
 * two blocks: 20% slower than in one). */
int64_t hw_row_block(int64_t m, int64_t k) {
    int64_t most = (A_BLOCK_BYTES / (pairs_of(k) * 4)) / MR * MR, blocks, rows;
    if (most < MR) most = MR;
    blocks = (m + most - 1) / most;
    if (blocks < 1) blocks = 1;
    rows = (m + blocks - 1) / blocks;
    return (rows + MR - 1) / MR * MR;
}

/* c[m, n] = bias[n] + sum_k a[m, k] * w[n, k] (int64; bias may be NULL) for rows r0..r1-1 (r0 a
 * multiple of MR) and the columns of panels p0..p1-1 (c: M x N). Rows past M are computed on the
 * zero padding and not written. */
static void tiles(const int16_t *pa, const int16_t *pw, int64_t m, int64_t k, int64_t n, int64_t r0, int64_t r1,
                  int64_t p0, int64_t p1, const int64_t *bias, int64_t *c) {
    const int64_t kp = pairs_of(k);
    int32_t out[MR][NR];
    for (int64_t p = p0; p < p1; p++) {
        const int32_t *wpan = (const int32_t *)(pw + p * kp * NR * 2);
        const int64_t cols = n - p * NR < NR ? n - p * NR : NR;
        for (int64_t r = r0; r < r1 && r < m; r += MR) {
            tile((const int32_t *)(pa + r * kp * 2), kp, wpan, out); /* an int32 = one int16 pair */
            for (int64_t i = 0; i < MR && r + i < m; i++) {
                int64_t *row = c + (r + i) * n + p * NR;
                for (int64_t j = 0; j < cols; j++) row[j] = (int64_t)out[i][j] + (bias ? bias[p * NR + j] : 0);
            }
        }
    }
}

/* one job of a product: rows r0..r1-1, panels p0..p1-1 (numba's threads take the jobs) */
void hw_gemm_tiles(const int16_t *pa, const int16_t *pw, int64_t m, int64_t k, int64_t n, int64_t r0, int64_t r1,
                   int64_t p0, int64_t p1, const int64_t *bias, int64_t *c) {
    tiles(pa, pw, m, k, n, r0, r1, p0, p1, bias, c);
}

/* entries b0..b1-1 of a batch of products, no bias (threads take the entries) */
void hw_gemm_batch(const int16_t *pa, const int16_t *pw, int64_t m, int64_t k, int64_t n, int64_t b0, int64_t b1,
                   int64_t *c) {
    const int64_t sa = hw_packed_a_size(m, k), sw = hw_packed_w_size(n, k);
    for (int64_t b = b0; b < b1; b++) tiles(pa + b * sa, pw + b * sw, m, k, n, 0, m, 0, panels_of(n), NULL, c + b * m * n);
}

/* Multiply-add rates of two AVX2 GEMM tiles in L1 (docs/performance.md): hwvit's int16
 * tile (4 rows x 24 columns, vpmaddwd on int16 pairs + vpaddd: 4 instructions per 32 products) and
 * a quad tile (uint8 x int8 quads: vpmaddubsw, vpmaddwd by ones, vpaddd: 3 per 32), both over the
 * same 192 packed groups again and again, timed side by side in one run.
 *
 * The quad tile is exact only while no vpmaddubsw pair sum saturates int16: with the unsigned
 * operand at most 127 (7 bits) and any int8 w, |pair| <= 2 * 127 * 128 = 32512. hwvit's int16_avx2
 * does not use it (an int8 activation shifted to unsigned needs 8 bits); this program only measures
 * what a 7-bit split of the activations could gain.
 *
 *   cc -O3 -mavx2 -o /tmp/tile_rates docs/tile_rates.c && /tmp/tile_rates
 */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define GROUPS 192 /* K = 384 for int16 pairs, 768 for quads */
#define LANES 24   /* columns of a W panel: three vectors of eight int32 lanes */

static int32_t a_rows[4 * GROUPS] __attribute__((aligned(64)));
static int32_t w_panel[GROUPS * LANES] __attribute__((aligned(64)));
static int32_t sums[4][8];

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#define PAIR(s, av, wv) _mm256_add_epi32((s), _mm256_madd_epi16((av), (wv)))
#define QUAD(s, av, wv) _mm256_add_epi32((s), _mm256_madd_epi16(_mm256_maddubs_epi16((av), (wv)), ones))

/* int16 pairs: 4 rows x 24 columns, 12 sums in registers */
__attribute__((noinline)) static void tile_pairs(const int32_t *a, const int32_t *w) {
    __m256i s[4][3];
    memset(s, 0, sizeof s);
    for (int g = 0; g < GROUPS; g++, w += LANES) {
        const __m256i w0 = _mm256_load_si256((const __m256i *)w), w1 = _mm256_load_si256((const __m256i *)(w + 8));
        const __m256i w2 = _mm256_load_si256((const __m256i *)(w + 16));
        for (int r = 0; r < 4; r++) {
            const __m256i av = _mm256_set1_epi32(a[r * GROUPS + g]);
            s[r][0] = PAIR(s[r][0], av, w0);
            s[r][1] = PAIR(s[r][1], av, w1);
            s[r][2] = PAIR(s[r][2], av, w2);
        }
    }
    for (int r = 0; r < 4; r++)
        _mm256_storeu_si256((__m256i *)sums[r], _mm256_add_epi32(_mm256_add_epi32(s[r][0], s[r][1]), s[r][2]));
}

/* uint8 x int8 quads: 3 rows x 24 columns, 9 sums (the constant ones and the operands fill the rest) */
__attribute__((noinline)) static void tile_quads(const int32_t *a, const int32_t *w) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i s[3][3];
    memset(s, 0, sizeof s);
    for (int g = 0; g < GROUPS; g++, w += LANES) {
        const __m256i w0 = _mm256_load_si256((const __m256i *)w), w1 = _mm256_load_si256((const __m256i *)(w + 8));
        const __m256i w2 = _mm256_load_si256((const __m256i *)(w + 16));
        for (int r = 0; r < 3; r++) {
            const __m256i av = _mm256_set1_epi32(a[r * GROUPS + g]);
            s[r][0] = QUAD(s[r][0], av, w0);
            s[r][1] = QUAD(s[r][1], av, w1);
            s[r][2] = QUAD(s[r][2], av, w2);
        }
    }
    for (int r = 0; r < 3; r++)
        _mm256_storeu_si256((__m256i *)sums[r], _mm256_add_epi32(_mm256_add_epi32(s[r][0], s[r][1]), s[r][2]));
}

int main(void) {
    memset(a_rows, 0x11, sizeof a_rows);
    memset(w_panel, 0x22, sizeof w_panel);
    const long calls = 200000;
    for (int round = 0; round < 5; round++) {
        double t = seconds();
        for (long i = 0; i < calls; i++) tile_pairs(a_rows, w_panel);
        const double pairs = (double)calls * 4 * LANES * 2 * GROUPS / (seconds() - t) / 1e9;
        t = seconds();
        for (long i = 0; i < calls; i++) tile_quads(a_rows, w_panel);
        const double quads = (double)calls * 3 * LANES * 4 * GROUPS / (seconds() - t) / 1e9;
        printf("int16 pairs 4x24: %5.1f GMAC/s   uint8 x int8 quads 3x24: %5.1f GMAC/s   (x%.2f)\n", pairs, quads,
               quads / pairs);
    }
    return sums[0][0] == 1; /* keeps the sums live */
}

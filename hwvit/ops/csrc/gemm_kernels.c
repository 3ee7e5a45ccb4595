/* The tiles, the AMX blocks, the requantizing products and the small helpers numba calls; the
 * kinds, layouts and bounds are described in gemm_kernels.h, the packing in gemm_pack.c. */
#include "gemm_kernels.h"

static inline int32_t lane(const int32_t *p) { /* one packed lane, read without type punning */
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The products of one lane of a (broadcast) and a vector of W lanes, added to s */
#define DOT_INT16(s, av, wv) _mm256_add_epi32((s), _mm256_madd_epi16((av), (wv)))
#define DOT_AVXVNNI(s, av, wv) _mm256_dpbusd_avx_epi32((s), (av), (wv))
#define DOT_AVX512VNNI(s, av, wv) _mm256_dpbusd_epi32((s), (av), (wv))
#define DOT_EMULATED(s, av, wv) dpbusd_avx2((s), (av), (wv))
/* 7-bit uint8 quads (KIND_SPLIT7): int16 pair sums that cannot saturate, then pairs of pairs */
#define DOT_SPLIT7(s, av, wv) \
    _mm256_add_epi32((s), _mm256_madd_epi16(_mm256_maddubs_epi16((av), (wv)), _mm256_set1_epi16(1)))

/* vpdpbusd from AVX2 instructions: uint8 av times int8 wv, each lane's four products added to s */
static inline __m256i dpbusd_avx2(__m256i s, __m256i av, __m256i wv) {
    const __m256i a_even = _mm256_and_si256(av, _mm256_set1_epi16(0x00ff)); /* bytes 0, 2 of a lane */
    const __m256i a_odd = _mm256_srli_epi16(av, 8);                          /* bytes 1, 3 */
    const __m256i w_even = _mm256_srai_epi16(_mm256_slli_epi16(wv, 8), 8);  /* sign-extended */
    const __m256i w_odd = _mm256_srai_epi16(wv, 8);
    return _mm256_add_epi32(
        s, _mm256_add_epi32(_mm256_madd_epi16(a_even, w_even), _mm256_madd_epi16(a_odd, w_odd)));
}

/* One MR x NR tile: out[i][j] = sum over groups q of DOT(lane q of row i, lane q of column j).
 * Twelve named sums, so the compiler keeps every one in a ymm register (an array was spilled). */
#define TILE_ROW(DOT, ap, s0, s1, s2)                              \
    do {                                                           \
        const __m256i av = _mm256_set1_epi32(lane((ap) + q));      \
        s0 = DOT(s0, av, w0);                                      \
        s1 = DOT(s1, av, w1);                                      \
        s2 = DOT(s2, av, w2);                                      \
    } while (0)

#define STORE_ROW(dst, s0, s1, s2)                                 \
    do {                                                           \
        _mm256_storeu_si256((__m256i *)(dst), s0);                 \
        _mm256_storeu_si256((__m256i *)((dst) + 8), s1);           \
        _mm256_storeu_si256((__m256i *)((dst) + 16), s2);          \
    } while (0)

#define TILE_FUNCTION(name, DOT)                                                                     \
    static void name(const int32_t *arow, int64_t ng, const int32_t *wq, int32_t out[MR][NR]) {      \
        __m256i c00 = _mm256_setzero_si256(), c01 = c00, c02 = c00, c10 = c00, c11 = c00, c12 = c00; \
        __m256i c20 = c00, c21 = c00, c22 = c00, c30 = c00, c31 = c00, c32 = c00;                    \
        const int32_t *a0 = arow, *a1 = arow + ng, *a2 = arow + 2 * ng, *a3 = arow + 3 * ng;         \
        for (int64_t q = 0; q < ng; q++, wq += NR) {                                                 \
            const __m256i w0 = _mm256_loadu_si256((const __m256i *)wq);                              \
            const __m256i w1 = _mm256_loadu_si256((const __m256i *)(wq + 8));                        \
            const __m256i w2 = _mm256_loadu_si256((const __m256i *)(wq + 16));                       \
            TILE_ROW(DOT, a0, c00, c01, c02);                                                        \
            TILE_ROW(DOT, a1, c10, c11, c12);                                                        \
            TILE_ROW(DOT, a2, c20, c21, c22);                                                        \
            TILE_ROW(DOT, a3, c30, c31, c32);                                                        \
        }                                                                                            \
        STORE_ROW(out[0], c00, c01, c02);                                                            \
        STORE_ROW(out[1], c10, c11, c12);                                                            \
        STORE_ROW(out[2], c20, c21, c22);                                                            \
        STORE_ROW(out[3], c30, c31, c32);                                                            \
    }

TILE_FUNCTION(tile_int16, DOT_INT16)
TILE_FUNCTION(tile_emulated, DOT_EMULATED)
TILE_FUNCTION(tile_split7, DOT_SPLIT7)
#if HW_CAN_VNNI
__attribute__((target("avx2,avxvnni"))) TILE_FUNCTION(tile_avxvnni, DOT_AVXVNNI)
__attribute__((target("avx2,avx512f,avx512vl,avx512vnni"))) TILE_FUNCTION(tile_avx512vnni, DOT_AVX512VNNI)
#endif

/* Compilers that know the AMX target names (gcc 11, clang 12 on). */
#ifndef HW_CAN_AMX
#define HW_CAN_AMX HW_CAN_VNNI
#endif
int hw_amx_built(void) { return HW_CAN_AMX; }

/* Ask Linux for the AMX tile data state (permission is per process, for every thread): 0 when
 * granted, else the errno-style -1 of the call (a kernel before 5.16, or AMX switched off). */
int hw_amx_enable(void) {
#if defined(__linux__) && defined(SYS_arch_prctl)
    return (int)syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */);
#else
    return -1;
#endif
}

/* The AMX block: out[i][j] for 32 rows i of A (arow, ng groups a row, ng a multiple of 16) and the
 * 24 columns j of one W panel (wq, NR lanes a group). Tiles 0-3 are the sums (rows 0-15 / 16-31 by
 * columns 0-15 / 16-23), 4-5 the A tiles, 6-7 the W tiles; the tile configuration is loaded by the
 * caller (amx_config). */
#if HW_CAN_AMX
/* The tile configuration (palette 1): bytes 16-47 hold each tile's bytes per row (uint16, little
 * endian), bytes 48-63 its rows. Tiles 1, 3 and 7 are 8 columns wide (32 bytes), the rest 64 bytes;
 * all 16 rows. A constant in memory: gcc dropped the stores to a local struct before ldtilecfg. */
static const uint8_t AMX_CFG[64] __attribute__((aligned(64))) = {
    1, 0, [16] = 64, 0, 32, 0, 64, 0, 32, 0, 64, 0, 64, 0, 64, 0, 32, 0, [48] = 16, 16, 16, 16, 16, 16, 16, 16};

__attribute__((target("amx-tile"))) static void amx_config(void) { _tile_loadconfig(AMX_CFG); }

__attribute__((target("amx-tile"))) static void amx_release(void) { _tile_release(); }

__attribute__((target("amx-tile,amx-int8"))) static void tile_amx(const int32_t *arow, int64_t ng,
                                                                  const int32_t *wq, int32_t out[RB_AMX][NR]) {
    const int64_t astride = ng * 4, wstride = NR * 4;
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int64_t g = 0; g < ng; g += KG_AMX) {
        _tile_loadd(4, arow + g, astride);
        _tile_loadd(5, arow + 16 * ng + g, astride);
        _tile_loadd(6, wq + g * NR, wstride);
        _tile_loadd(7, wq + g * NR + 16, wstride);
        _tile_dpbusd(0, 4, 6);
        _tile_dpbusd(1, 4, 7);
        _tile_dpbusd(2, 5, 6);
        _tile_dpbusd(3, 5, 7);
    }
    _tile_stored(0, out[0], wstride);
    _tile_stored(1, out[0] + 16, wstride);
    _tile_stored(2, out[16], wstride);
    _tile_stored(3, out[16] + 16, wstride);
}
#endif

/* KIND_AMX_EMULATED: the same block's sums from the same layout, in plain C (uint8 a quads times
 * int8 w quads, as tdpbusd) */
static void tile_amx_emulated(const int32_t *arow, int64_t ng, const int32_t *wq, int32_t out[RB_AMX][NR]) {
    for (int64_t i = 0; i < RB_AMX; i++)
        for (int64_t j = 0; j < NR; j++) {
            const uint8_t *a = (const uint8_t *)(const void *)(arow + i * ng);
            const int8_t *w = (const int8_t *)(const void *)wq;
            int32_t s = 0;
            for (int64_t q = 0; q < ng; q++)
                for (int64_t h = 0; h < 4; h++) s += (int32_t)a[4 * q + h] * (int32_t)w[(q * NR + j) * 4 + h];
            out[i][j] = s;
        }
}

/* The job counter of a compiled caller's workers (hwvit/ops/native.py): each worker takes the next
 * job number until none is left, so a thread slowed by another process takes fewer jobs. The jobs
 * write disjoint outputs; the counter only shares them out (relaxed order), and the parallel
 * region's start and end order everything else. */
void hw_reset_jobs(int64_t *counter) { __atomic_store_n(counter, 0, __ATOMIC_RELAXED); }
int64_t hw_next_job(int64_t *counter) { return __atomic_fetch_add(counter, 1, __ATOMIC_RELAXED); }

/* A job whose output others read in the same parallel region (a chunk of packed A): its worker
 * counts it done (release: its writes before the count), and a worker about to read them waits for
 * the count to reach the total (acquire), pausing between reads. A job is counted by the worker that
 * took it, which never waits before finishing it: a wait ends once those workers run. */
void hw_job_done(int64_t *done) { __atomic_fetch_add(done, 1, __ATOMIC_RELEASE); }
void hw_wait_jobs(const int64_t *done, int64_t total) {
    while (__atomic_load_n(done, __ATOMIC_ACQUIRE) < total) _mm_pause();
}

/* rows of A per job for an M x K product: blocks of at most A_BLOCK_BYTES of packed A (3/4 of a
 * Zen 3 core's 512 KiB L2) stay in cache while a job's panels pass over them, and the blocks are
 * made equal. Without blocking, at batch 64 A (12608 x 768) was read from memory once per panel
 * (half speed); with blocks smaller than A needs, W is read from L3 once per block (197 x 768 in
 * two blocks: 20% slower than in one). */
int64_t hw_row_block(int64_t kind, int64_t m, int64_t k) {
    const int64_t rb = block_rows(kind);
    int64_t most = (A_BLOCK_BYTES / (groups_of(kind, k) * 4)) / rb * rb, blocks, rows;
    if (most < rb) most = rb;
    blocks = (m + most - 1) / most;
    if (blocks < 1) blocks = 1;
    rows = (m + blocks - 1) / blocks;
    return (rows + rb - 1) / rb * rb;
}

/* The requantizer of hwvit.ops.requant on four accumulators (int64 lanes holding int32 values):
 * clamp(round_half_up(acc * mult / 2^shift), lo, hi) per lane, vectorized. vpmuldq multiplies the
 * low signed 32 bits of each lane: acc is int32 and mult in [0, 2^31 - 1], so the 64-bit product is
 * exact and |acc * mult| < 2^62; adding the rounding term 2^(shift-1) (<= 2^61) keeps v inside
 * (-2^63, 2^63). AVX2 has no arithmetic 64-bit shift, so v is moved to unsigned (v + 2^63, an XOR
 * of the top bit), shifted logically, and 2^(63 - shift) taken off again: floor((v + 2^63) / 2^s)
 * = floor(v / 2^s) + 2^(63-s) because 2^s divides 2^63 (shift <= 62). Then the clamp. */
typedef struct {
    int64_t mult[NR], round[NR], shift[NR], back[NR]; /* per column of a panel */
    int32_t bias[NR];
    /* requant8_high's operands (a panel whose every shift is >= 32): per group of 8 columns, the
     * even columns' and the odd columns' mult and rounding term as int64 lanes, and shift - 32 per
     * column as int32 lanes */
    int64_t mult_even[NR / 2], mult_odd[NR / 2], round_even[NR / 2], round_odd[NR / 2];
    int32_t shift_high[NR];
    int high; /* every column's shift >= 32 */
} panel_rq;

static __m256i requant4(__m256i acc, const panel_rq *q, int64_t j, __m256i lo, __m256i hi) {
    const __m256i top = _mm256_set1_epi64x(INT64_MIN);
    __m256i v = _mm256_mul_epi32(acc, _mm256_loadu_si256((const __m256i *)(q->mult + j)));
    v = _mm256_add_epi64(v, _mm256_loadu_si256((const __m256i *)(q->round + j)));
    v = _mm256_srlv_epi64(_mm256_xor_si256(v, top), _mm256_loadu_si256((const __m256i *)(q->shift + j)));
    v = _mm256_sub_epi64(v, _mm256_loadu_si256((const __m256i *)(q->back + j)));
    v = _mm256_blendv_epi8(v, lo, _mm256_cmpgt_epi64(lo, v));
    return _mm256_blendv_epi8(v, hi, _mm256_cmpgt_epi64(v, hi));
}

/* eight int32 sums of one row (columns j..j+7 of the panel) + bias, requantized, back into sums */
static void requant8(int32_t *sums, const panel_rq *q, int64_t j, __m256i lo, __m256i hi) {
    const __m256i evens = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    const __m256i s = _mm256_add_epi32(_mm256_loadu_si256((const __m256i *)sums),
                                       _mm256_loadu_si256((const __m256i *)(q->bias + j)));
    const __m256i r0 = requant4(_mm256_cvtepi32_epi64(_mm256_castsi256_si128(s)), q, j, lo, hi);
    const __m256i r1 = requant4(_mm256_cvtepi32_epi64(_mm256_extracti128_si256(s, 1)), q, j + 4, lo, hi);
    /* each result lies in [lo, hi], so its low 32 bits are the value: gather them, four and four */
    const __m256i low0 = _mm256_permutevar8x32_epi32(r0, evens), low1 = _mm256_permutevar8x32_epi32(r1, evens);
    _mm256_storeu_si256((__m256i *)sums, _mm256_permute2x128_si256(low0, low1, 0x20));
}

/* The same requantizer for eight columns j..j+7 whose shifts are all >= 32, in half the instructions:
 * v = acc * mult + 2^(shift-1) is formed as above (vpmuldq of the even columns' sums, and of the odd
 * columns' moved down by 32 bits), and floor(v / 2^shift) = floor(floor(v / 2^32) / 2^(shift-32)):
 * floor(v / 2^32) is v's high 32 bits (two's complement), which a blend gathers for all eight columns
 * into one register, and vpsravd shifts them arithmetically by shift - 32 per lane. |v| < 2^62, so
 * the high half is below 2^30 in magnitude and every step stays in int32; the clamp is vpmaxsd and
 * vpminsd. The same integers as requant8 (the tests run every shift 0..62 at its ties). */
static void requant8_high(int32_t *sums, const panel_rq *q, int64_t j, __m256i lo, __m256i hi) {
    const __m256i s = _mm256_add_epi32(_mm256_loadu_si256((const __m256i *)sums),
                                       _mm256_loadu_si256((const __m256i *)(q->bias + j)));
    const int64_t h = j / 2; /* the int64 lanes of columns j, j+2, j+4, j+6 (even) and j+1, ... (odd) */
    const __m256i even = _mm256_add_epi64(_mm256_mul_epi32(s, _mm256_loadu_si256((const __m256i *)(q->mult_even + h))),
                                          _mm256_loadu_si256((const __m256i *)(q->round_even + h)));
    const __m256i odd = _mm256_add_epi64(
        _mm256_mul_epi32(_mm256_srli_epi64(s, 32), _mm256_loadu_si256((const __m256i *)(q->mult_odd + h))),
        _mm256_loadu_si256((const __m256i *)(q->round_odd + h)));
    /* dword 2i: the high half of even lane i (moved down); dword 2i + 1: the high half of odd lane i */
    const __m256i high = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xaa);
    const __m256i y = _mm256_srav_epi32(high, _mm256_loadu_si256((const __m256i *)(q->shift_high + j)));
    _mm256_storeu_si256((__m256i *)sums, _mm256_min_epi32(_mm256_max_epi32(y, lo), hi));
}

#if HW_CAN_VNNI
/* The same requantizer on a whole MR x NR tile with AVX-512 (the AVX512-VNNI kind only: every CPU it
 * runs on has AVX512F and VL): eight int64 lanes per register, vpmuldq as above, then vpsravq, the
 * arithmetic 64-bit shift AVX2 lacks (floor(v / 2^s) directly), vpmaxsq/vpminsq for the clamp and
 * vpmovqd back to int32 (the values lie in [lo, hi], so the truncation keeps them). Same integers as
 * requant8: the tests run both against hwvit.ops.requant. */
__attribute__((target("avx2,avx512f,avx512vl"))) static void requant_tile_avx512(int32_t out[MR][NR],
                                                                                  const panel_rq *q, int64_t lo,
                                                                                  int64_t hi) {
    const __m512i vlo = _mm512_set1_epi64(lo), vhi = _mm512_set1_epi64(hi);
    for (int64_t j = 0; j < NR; j += 8) {
        const __m512i mult = _mm512_loadu_si512((const void *)(q->mult + j));
        const __m512i round = _mm512_loadu_si512((const void *)(q->round + j));
        const __m512i shift = _mm512_loadu_si512((const void *)(q->shift + j));
        const __m256i bias = _mm256_loadu_si256((const __m256i *)(q->bias + j));
        for (int64_t i = 0; i < MR; i++) {
            const __m256i s = _mm256_add_epi32(_mm256_loadu_si256((const __m256i *)(out[i] + j)), bias);
            __m512i v = _mm512_mul_epi32(_mm512_cvtepi32_epi64(s), mult);
            v = _mm512_srav_epi64(_mm512_add_epi64(v, round), shift);
            v = _mm512_min_epi64(_mm512_max_epi64(v, vlo), vhi);
            _mm256_storeu_si256((__m256i *)(out[i] + j), _mm512_cvtepi64_epi32(v));
        }
    }
}
#endif

/* A row of a tile's NR = 24 requantized sums (each already in [lo, hi], inside the output type) stored
 * as int8 or int16 with three vector stores instead of 24 scalar ones: vpackssdw / vpacksswb narrow
 * with saturation, which keeps every in-range value as it is; the permutes put the 128-bit lanes'
 * pieces back in column order. */
static void store_row_i8(int8_t *dst, const int32_t *src) {
    const __m256i a = _mm256_loadu_si256((const __m256i *)src), b = _mm256_loadu_si256((const __m256i *)(src + 8));
    const __m256i c = _mm256_loadu_si256((const __m256i *)(src + 16));
    /* bytes, dword by dword: a0-3 b0-3 c0-3 c0-3 | a4-7 b4-7 c4-7 c4-7 */
    const __m256i x = _mm256_packs_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, c));
    const __m256i y = _mm256_permutevar8x32_epi32(x, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm_storeu_si128((__m128i *)dst, _mm256_castsi256_si128(y));         /* a0-7, b0-7 */
    _mm_storel_epi64((__m128i *)(dst + 16), _mm256_extracti128_si256(y, 1)); /* c0-7 */
}

static void store_row_i16(int16_t *dst, const int32_t *src) {
    const __m256i a = _mm256_loadu_si256((const __m256i *)src), b = _mm256_loadu_si256((const __m256i *)(src + 8));
    const __m256i c = _mm256_loadu_si256((const __m256i *)(src + 16));
    const __m256i ab = _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), 0xd8); /* a0-3 a4-7 b0-3 b4-7 */
    const __m256i cc = _mm256_permute4x64_epi64(_mm256_packs_epi32(c, c), 0xd8); /* c0-7 c0-7 */
    _mm256_storeu_si256((__m256i *)dst, ab);
    _mm_storeu_si128((__m128i *)(dst + 16), _mm256_castsi256_si128(cc));
}

static void tile(int64_t kind, const int32_t *arow, int64_t ng, const int32_t *wq, int32_t out[RB_AMX][NR]) {
    switch (kind) {
#if HW_CAN_AMX
    case KIND_AMX: tile_amx(arow, ng, wq, out); return;
#endif
    case KIND_AMX_EMULATED: tile_amx_emulated(arow, ng, wq, out); return;
    case KIND_INT16: tile_int16(arow, ng, wq, out); return;
    case KIND_SPLIT7: tile_split7(arow, ng, wq, out); return;
#if HW_CAN_VNNI
    case KIND_AVXVNNI: tile_avxvnni(arow, ng, wq, out); return;
    case KIND_AVX512VNNI: tile_avx512vnni(arow, ng, wq, out); return;
#endif
    default: tile_emulated(arow, ng, wq, out); /* group 4 without VNNI built: never asked for (hw_vnni_built) */
    }
}

/* KIND_SPLIT7: a row's outliers (list[0] positive ones from slot 2 up, list[1] negative ones from slot
 * K + 1 down, each (k << 16) | |a2|) times the NR columns of one W panel, added to the row's NR int32
 * sums. |a2| * w[n, k] for NR columns: |a2| placed in byte k % 4 of every lane is vpmaddubsw's unsigned
 * operand against the panel's group k / 4 (int8 w), so each int16 pair holds |a2| * w and a zero
 * (|a2| <= 128: no saturation); vpmaddwd by ones makes it the int32 lane. */
#define OUTLIER_PRODUCT(group, j, mag) \
    _mm256_madd_epi16(_mm256_maddubs_epi16((mag), _mm256_loadu_si256((const __m256i *)((group) + (j)))), ones)

static void add_outliers(const int32_t *list, int64_t k, const int32_t *wpan, int32_t *sums) {
    const int32_t pos = list[0], neg = list[1];
    if (pos + neg == 0) return;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i d[2][3]; /* the positive outliers' products, then the negative ones' (|a2| * w) */
    for (int side = 0; side < 2; side++) {
        const int32_t *at = side == 0 ? list + 2 : list + k + 2 - neg;
        const int32_t count = side == 0 ? pos : neg;
        __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0;
        for (int32_t t = 0; t < count; t++) {
            const uint32_t e = (uint32_t)at[t], c = e >> 16;
            const __m256i mag = _mm256_set1_epi32((int32_t)((e & 0xffffu) << (8 * (c & 3))));
            const int32_t *group = wpan + (int64_t)(c >> 2) * NR;
            s0 = _mm256_add_epi32(s0, OUTLIER_PRODUCT(group, 0, mag));
            s1 = _mm256_add_epi32(s1, OUTLIER_PRODUCT(group, 8, mag));
            s2 = _mm256_add_epi32(s2, OUTLIER_PRODUCT(group, 16, mag));
        }
        d[side][0] = s0, d[side][1] = s1, d[side][2] = s2;
    }
    for (int j = 0; j < 3; j++) {
        /* |positive - negative| <= K * 128 * 128 <= 2^30, and the row's sum plus it is the exact total */
        const __m256i s = _mm256_loadu_si256((const __m256i *)(sums + 8 * j));
        _mm256_storeu_si256((__m256i *)(sums + 8 * j), _mm256_add_epi32(s, _mm256_sub_epi32(d[0][j], d[1][j])));
    }
}

/* For rows r0..r1-1 (r0 a multiple of MR) and the columns of panels p0..p1-1 of an M x N product:
 * - mult == NULL: c[m, n] = bias[n] + sum_k a[m, k] * w[n, k] stored as int64 (bias may be NULL);
 * - else y[m, n] = requant(bias[n] + sum_k ...) with column n's mult and shift, clamped to [lo, hi]
 *   and stored as int8 (out_bytes 1) or int16 (2): the int32 sums never leave the tile. The caller
 *   guarantees |bias| + K * 255 * 128 < 2^31 (hwvit.ops.gemm's bound), mult in [0, 2^31 - 1],
 *   shift in [0, 62] and [lo, hi] inside the output type. For group 4 the tile's sums are offset
 *   sums and the bias that joins them is bias - 128 * colsum: |bias| + 128 * 128 * K < 2^31 by the
 *   same bound, so it is an int32, and so is every partial sum on the way.
 * Rows past M are computed on the zero padding and not written. */
static void tiles(int64_t kind, const int32_t *pa, const int32_t *pw, int64_t m, int64_t k, int64_t n, int64_t r0,
                  int64_t r1, int64_t p0, int64_t p1, const int64_t *bias, const int64_t *mult, const int64_t *shift,
                  int64_t lo, int64_t hi, int64_t out_bytes, void *y, int64_t raw) {
    const int64_t ng = groups_of(kind, k);
    /* raw (group 4): the packed bytes are the unsigned operand itself, not a + 128: no correction */
    const int32_t *colsum = kind == KIND_INT16 || raw ? NULL : pw + panels_of(n) * ng * NR;
    const int64_t offset = kind == KIND_SPLIT7 ? 64 : 128; /* what the packed unsigned a holds above a (a1) */
    const int32_t *outliers = kind == KIND_SPLIT7 ? pa + rows_padded(kind, m) * ng : NULL;
    const __m256i vlo = _mm256_set1_epi64x(lo), vhi = _mm256_set1_epi64x(hi);
    const __m256i vlo32 = _mm256_set1_epi32((int32_t)lo), vhi32 = _mm256_set1_epi32((int32_t)hi);
    int32_t out[RB_AMX][NR]; /* MR rows of it for the vector kinds */
    const int64_t rb = block_rows(kind);
    int64_t add[NR]; /* per column of the panel: the bias and the offset's correction */
    panel_rq q;
#if HW_CAN_VNNI
    /* the AVX-512 requantizer (see above): every CPU with AVX512-VNNI+VL or AMX has AVX512F and VL */
    const int wide_rq = mult != NULL && (kind == KIND_AVX512VNNI || kind == KIND_AMX);
#else
#define requant_tile_avx512(out, q, lo, hi) ((void)0)
    const int wide_rq = 0;
#endif
#if HW_CAN_AMX
    if (kind == KIND_AMX) amx_config(); /* per call: the configuration is per thread */
#endif
    for (int64_t p = p0; p < p1; p++) {
        const int32_t *wpan = pw + p * ng * NR;
        const int64_t c0 = p * NR, cols = n - c0 < NR ? n - c0 : NR;
        for (int64_t j = 0; j < cols; j++)
            add[j] = (bias ? bias[c0 + j] : 0) - (colsum ? offset * (int64_t)colsum[c0 + j] : 0);
        if (mult) {
            memset(&q, 0, sizeof q); /* columns past N: mult 0, shift 0, so their lanes are 0 */
            for (int64_t j = 0; j < cols; j++) {
                const int64_t s = shift[c0 + j];
                q.mult[j] = mult[c0 + j];
                q.round[j] = s > 0 ? (int64_t)1 << (s - 1) : 0;
                q.shift[j] = s;
                q.back[j] = (int64_t)((uint64_t)1 << (63 - s));
                q.bias[j] = (int32_t)add[j];
            }
            for (int64_t j = cols; j < NR; j++) q.back[j] = INT64_MIN; /* 2^63 for shift 0 */
            q.high = 1;
            for (int64_t j = 0; j < NR; j++) {
                /* columns past N: shift 32 and mult 0, so 0; q.round already holds 2^(s-1) (0 for s = 0) */
                const int64_t s = j < cols ? q.shift[j] : 32, round = j < cols ? q.round[j] : (int64_t)1 << 31;
                q.high &= s >= 32;
                q.shift_high[j] = (int32_t)(s - 32);
                if (j % 2 == 0)
                    q.mult_even[j / 2] = q.mult[j], q.round_even[j / 2] = round;
                else
                    q.mult_odd[j / 2] = q.mult[j], q.round_odd[j / 2] = round;
            }
        }
        for (int64_t r = r0; r < r1 && r < m; r += rb) {
            tile(kind, pa + r * ng, ng, wpan, out);
            if (outliers)
                for (int64_t i = 0; i < rb && r + i < m; i++) add_outliers(outliers + (r + i) * (k + 2), k, wpan, out[i]);
            if (wide_rq)
                for (int64_t i = 0; i < rb && r + i < m; i += MR) requant_tile_avx512(out + i, &q, lo, hi);
            for (int64_t i = 0; i < rb && r + i < m; i++) {
                const int64_t at = (r + i) * n + c0;
                if (!mult) {
                    int64_t *row = (int64_t *)y + at;
                    for (int64_t j = 0; j < cols; j++) row[j] = (int64_t)out[i][j] + add[j];
                    continue;
                }
                if (!wide_rq && q.high)
                    for (int64_t j = 0; j < NR; j += 8) requant8_high(out[i] + j, &q, j, vlo32, vhi32);
                else if (!wide_rq)
                    for (int64_t j = 0; j < NR; j += 8) requant8(out[i] + j, &q, j, vlo, vhi);
                if (out_bytes == 1) {
                    int8_t *row = (int8_t *)y + at;
                    if (cols == NR)
                        store_row_i8(row, out[i]);
                    else
                        for (int64_t j = 0; j < cols; j++) row[j] = (int8_t)out[i][j];
                } else {
                    int16_t *row = (int16_t *)y + at;
                    if (cols == NR)
                        store_row_i16(row, out[i]);
                    else
                        for (int64_t j = 0; j < cols; j++) row[j] = (int16_t)out[i][j];
                }
            }
        }
    }
#if HW_CAN_AMX
    if (kind == KIND_AMX) amx_release();
#endif
}

/* one job of a product: rows r0..r1-1, panels p0..p1-1 (numba's threads take the jobs) */
void hw_gemm_tiles(int64_t kind, const int32_t *pa, const int32_t *pw, int64_t m, int64_t k, int64_t n, int64_t r0,
                   int64_t r1, int64_t p0, int64_t p1, const int64_t *bias, int64_t *c) {
    tiles(kind, pa, pw, m, k, n, r0, r1, p0, p1, bias, NULL, NULL, 0, 0, 8, c, 0);
}

/* one job of a requantized product (numba's threads take the jobs): rows r0..r1-1 and panels
 * p0..p1-1 of entry e of a batch of products (packed A and W, bias rows and outputs one after
 * another; e = 0 for a single product). Entry e's bias row is its own (an unsigned a's offset
 * term); every entry shares mult and shift. */
void hw_linear(int64_t kind, const int32_t *pa, const int32_t *pw, int64_t m, int64_t k, int64_t n, int64_t e,
               int64_t r0, int64_t r1, int64_t p0, int64_t p1, const int64_t *bias, const int64_t *mult,
               const int64_t *shift, int64_t lo, int64_t hi, int64_t out_bytes, void *y, int64_t raw) {
    tiles(kind, pa + e * hw_packed_a_size(kind, m, k), pw + e * hw_packed_w_size(kind, n, k), m, k, n, r0, r1, p0,
          p1, bias + e * n, mult, shift, lo, hi, out_bytes, (char *)y + e * m * n * out_bytes, raw);
}

/* entries b0..b1-1 of a batch of products, no bias (threads take the entries) */
void hw_gemm_batch(int64_t kind, const int32_t *pa, const int32_t *pw, int64_t m, int64_t k, int64_t n, int64_t b0,
                   int64_t b1, int64_t *c) {
    const int64_t sa = hw_packed_a_size(kind, m, k), sw = hw_packed_w_size(kind, n, k);
    for (int64_t b = b0; b < b1; b++)
        tiles(kind, pa + b * sa, pw + b * sw, m, k, n, 0, m, 0, panels_of(n), NULL, NULL, NULL, 0, 0, 8,
              c + b * m * n, 0);
}

/* out[i] = table[x[i] + 128] for int8 x and a 256-entry int8 table (hwvit.ops.gelu's lookup at 8
 * bits), 32 elements at a time: the index x + 128 = x XOR 0x80 is split into its high nibble h and
 * low nibble l; for each h = 0..15, vpshufb picks entry l of the table's 16 entries 16h..16h+15 (in
 * both 128-bit lanes) and vpblendvb keeps it where the element's own high nibble is h. Every
 * element takes exactly the one table entry its index names: no arithmetic on the values. */
void hw_lookup_i8(const int8_t *x, int64_t n, const int8_t *table, int8_t *out) {
    __m256i rows[16];
    for (int h = 0; h < 16; h++)
        rows[h] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(table + 16 * h)));
    const __m256i flip = _mm256_set1_epi8((char)0x80), nib = _mm256_set1_epi8(0x0f);
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m256i idx = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(x + i)), flip);
        const __m256i lo = _mm256_and_si256(idx, nib), hi = _mm256_and_si256(_mm256_srli_epi16(idx, 4), nib);
        __m256i r = _mm256_setzero_si256();
        for (int h = 0; h < 16; h++)
            r = _mm256_blendv_epi8(r, _mm256_shuffle_epi8(rows[h], lo),
                                   _mm256_cmpeq_epi8(hi, _mm256_set1_epi8((char)h)));
        _mm256_storeu_si256((__m256i *)(out + i), r);
    }
    for (; i < n; i++) out[i] = table[(int64_t)x[i] + 128];
}

/* rows x cols bytes from a contiguous block at src to rows dst_stride bytes apart at dst (attention's
 * context of one head, (N, hd), into its columns of the (N, H*hd) activation) */
void hw_copy_rows(const int8_t *src, int64_t rows, int64_t cols, int8_t *dst, int64_t dst_stride) {
    for (int64_t r = 0; r < rows; r++) memcpy(dst + r * dst_stride, src + r * cols, (size_t)cols);
}

/* a monotonic clock in nanoseconds (hwvit bench: the time the compiled encoder block spends in its
 * four projections, GEMM time as the bench counts it) */
int64_t hw_now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Packing: int8 matrices into the lane layouts the tiles of gemm_kernels.c read (gemm_kernels.h
 * describes them). */
#include "gemm_kernels.h"

int hw_mr(void) { return MR; }
int hw_nr(void) { return NR; }
int hw_vnni_built(void) { return HW_CAN_VNNI; }

/* int32 lanes of one packed A (M x K) and one packed W (N x K, with its column sums) */
int64_t hw_packed_a_size(int64_t kind, int64_t m, int64_t k) {
    return rows_padded(kind, m) * (groups_of(kind, k) + (kind == KIND_SPLIT7 ? k + 2 : 0));
}
int64_t hw_packed_w_size(int64_t kind, int64_t n, int64_t k) {
    return panels_of(n) * NR * (groups_of(kind, k) + (kind == KIND_INT16 ? 0 : 1));
}

/* One KIND_SPLIT7 outlier of a row (column c, remainder a2 != 0, |a2| <= 128) into its list of K + 2
 * int32: (c << 16) | |a2|, the positive ones from slot 2 up, the negative ones from slot K + 1 down. */
static void split7_outlier(int32_t *list, int64_t k, int64_t c, int a2, int32_t *pos, int32_t *neg) {
    const uint32_t e = ((uint32_t)c << 16) | (uint32_t)(a2 < 0 ? -a2 : a2);
    if (a2 > 0)
        list[2 + (*pos)++] = (int32_t)e;
    else
        list[k + 1 - (*neg)++] = (int32_t)e;
}

/* Rows [r0, r1) of one packed A from one M x K matrix whose element (r, c) is a[r * sm + c * sk]
 * (strides in elements, any sign; contiguous: sm = K, sk = 1): row r < M holds its K values and
 * zeros to the padded width, a row past M (up to the padded row count) is all zeros. For group 4
 * the packed byte is a + 128: from int8 a it is a XOR 0x80 (flip = 0x80); an unsigned byte that
 * the tile takes as it is (raw) is copied (flip = 0). For int16 an int8 a (flip = 0x80) is
 * sign-extended and an unsigned byte (flip = 0: P.V's probabilities, 0..255) zero-extended: int16
 * holds both, and vpmaddwd's pair sums (|a*w| <= 255 * 128) and the K-sums (the caller's bound
 * K * 255 * 128 + |bias| < 2^31) stay int32, so no offset is needed. Disjoint row ranges write
 * disjoint memory: threads may pack one matrix together. */
void hw_pack_a_rows(int64_t kind, const int8_t *a, int64_t m, int64_t k, int64_t sm, int64_t sk, int64_t r0,
                    int64_t r1, int32_t *out, int64_t flip) {
    const int64_t ng = groups_of(kind, k);
    const uint8_t x = (uint8_t)flip;
    for (int64_t r = r0; r < r1; r++) {
        const int64_t valid = r < m ? k : 0;
        const int8_t *src = a + (r < m ? r * sm : 0);
        if (kind == KIND_INT16) {
            int16_t *row = (int16_t *)(void *)out + r * ng * 2;
            if (flip == 0) /* unsigned bytes, zero-extended */
                for (int64_t c = 0; c < valid; c++) row[c] = (uint8_t)src[c * sk];
            else if (sk == 1)
                for (int64_t c = 0; c < valid; c++) row[c] = src[c];
            else
                for (int64_t c = 0; c < valid; c++) row[c] = src[c * sk];
            memset(row + valid, 0, (size_t)(ng * 2 - valid) * sizeof(int16_t));
        } else if (kind == KIND_SPLIT7) {
            /* int8 a (flip 0x80): a1 = clamp(a, -64, 63) stored as a1 + 64; unsigned (flip 0): min(a, 127) */
            const int lo = flip ? -64 : 0, hi = flip ? 63 : 127;
            uint8_t *row = (uint8_t *)(void *)out + r * ng * 4;
            int32_t *list = out + rows_padded(kind, m) * ng + r * (k + 2), pos = 0, neg = 0;
            int64_t c = 0;
            if (sk == 1) { /* 32 at a time: the clamp by vpmaxsb/vpminsb (vpminub unsigned), outliers by mask */
                const __m256i vlo = _mm256_set1_epi8((char)lo), vhi = _mm256_set1_epi8((char)hi);
                const __m256i shift = _mm256_set1_epi8((char)-lo);
                for (; c + 32 <= valid; c += 32) {
                    const __m256i v = _mm256_loadu_si256((const __m256i *)(src + c));
                    const __m256i a1 = flip ? _mm256_min_epi8(_mm256_max_epi8(v, vlo), vhi) : _mm256_min_epu8(v, vhi);
                    _mm256_storeu_si256((__m256i *)(row + c), _mm256_add_epi8(a1, shift));
                    uint32_t odd = ~(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(v, a1));
                    for (; odd; odd &= odd - 1) { /* a2 = a - a1, a1 = the byte just stored + lo */
                        const int64_t at = c + __builtin_ctz(odd);
                        const int x = flip ? (int)src[at] : (int)(uint8_t)src[at];
                        split7_outlier(list, k, at, x - (row[at] + lo), &pos, &neg);
                    }
                }
            }
            for (; c < valid; c++) {
                const int v = flip ? (int)src[c * sk] : (int)(uint8_t)src[c * sk];
                const int a1 = v < lo ? lo : (v > hi ? hi : v);
                row[c] = (uint8_t)(a1 - lo);
                if (v != a1) split7_outlier(list, k, c, v - a1, &pos, &neg);
            }
            memset(row + valid, 0, (size_t)(ng * 4 - valid));
            list[0] = pos, list[1] = neg;
        } else {
            uint8_t *row = (uint8_t *)(void *)out + r * ng * 4;
            if (sk == 1)
                for (int64_t c = 0; c < valid; c++) row[c] = (uint8_t)((uint8_t)src[c] ^ x);
            else
                for (int64_t c = 0; c < valid; c++) row[c] = (uint8_t)((uint8_t)src[c * sk] ^ x);
            memset(row + valid, 0, (size_t)(ng * 4 - valid));
        }
    }
}

int64_t hw_rows_padded(int64_t kind, int64_t m) { return rows_padded(kind, m); }

/* count matrices (M x K, contiguous, one after another) -> packed A, one after another */
static void pack_a(int64_t kind, const int8_t *a, int64_t count, int64_t m, int64_t k, int32_t *out, uint8_t flip) {
    const int64_t size = hw_packed_a_size(kind, m, k);
    for (int64_t b = 0; b < count; b++)
        hw_pack_a_rows(kind, a + b * m * k, m, k, k, 1, 0, rows_padded(kind, m), out + b * size, flip);
}

void hw_pack_a(int64_t kind, const int8_t *a, int64_t count, int64_t m, int64_t k, int32_t *out) {
    pack_a(kind, a, count, m, k, out, 0x80);
}

/* a holds unsigned bytes: for group 4, a + 128 of an offset operand; for int16, the values 0..255 */
void hw_pack_a_biased(int64_t kind, const uint8_t *a, int64_t count, int64_t m, int64_t k, int32_t *out) {
    pack_a(kind, (const int8_t *)a, count, m, k, out, 0);
}

/* One N x K int8 matrix -> packed W; element (col, c) is src[col * sn + c * sk] (strides in
 * elements, any sign; contiguous: sn = K, sk = 1). Written in order (panel, group, column): the
 * reads hop between NR rows of W, which stay in L1, and every output line is filled once. */
static void pack_w_pairs(const int8_t *src, int64_t n, int64_t k, int64_t sn, int64_t sk, int16_t *dst) {
    const int64_t ng = groups_of(KIND_INT16, k);
    for (int64_t p = 0; p < panels_of(n); p++) {
        int16_t *pan = dst + p * ng * NR * 2;
        for (int64_t q = 0; q < ng; q++)
            for (int64_t j = 0; j < NR; j++) {
                const int64_t col = p * NR + j, c = 2 * q;
                const int8_t *row = col < n ? src + col * sn : NULL; /* columns past N: zero */
                pan[(q * NR + j) * 2] = row ? row[c * sk] : 0;
                pan[(q * NR + j) * 2 + 1] = row && c + 1 < k ? row[(c + 1) * sk] : 0;
            }
    }
}

static void pack_w_quads(const int8_t *src, int64_t n, int64_t k, int64_t sn, int64_t sk, int8_t *dst, int64_t ng) {
    int32_t *sums = (int32_t *)(void *)(dst + panels_of(n) * ng * NR * 4);
    for (int64_t p = 0; p < panels_of(n); p++) {
        int8_t *pan = dst + p * ng * NR * 4;
        const int64_t cols = n - p * NR < NR ? n - p * NR : NR;
        for (int64_t q = 0; q < k / 4; q++) { /* whole quads: one 4-byte copy per lane where K is contiguous */
            for (int64_t j = 0; j < cols; j++) {
                const int8_t *at = src + (p * NR + j) * sn + 4 * q * sk;
                if (sk == 1)
                    memcpy(pan + (q * NR + j) * 4, at, 4);
                else
                    for (int64_t h = 0; h < 4; h++) pan[(q * NR + j) * 4 + h] = at[h * sk];
            }
            memset(pan + (q * NR + cols) * 4, 0, (size_t)(NR - cols) * 4); /* columns past N */
        }
        for (int64_t q = k / 4; q < ng; q++) /* the tail quad (K not a multiple of 4): byte by byte */
            for (int64_t j = 0; j < NR; j++) {
                const int64_t col = p * NR + j;
                const int8_t *row = col < n ? src + col * sn : NULL;
                for (int64_t h = 0; h < 4; h++) {
                    const int64_t c = 4 * q + h;
                    pan[(q * NR + j) * 4 + h] = row && c < k ? row[c * sk] : 0;
                }
            }
    }
    for (int64_t col = 0; col < panels_of(n) * NR; col++) { /* column sums, |sum| <= 128 K <= 2^23 */
        int32_t s = 0;
        if (col < n) /* columns past N sum to 0 */
            for (int64_t c = 0; c < k; c++) s += src[col * sn + c * sk];
        sums[col] = s;
    }
}

/* One strided N x K int8 matrix (element (col, c) at w[col * sn + c * sk]) -> packed W */
void hw_pack_w_strided(int64_t kind, const int8_t *w, int64_t n, int64_t k, int64_t sn, int64_t sk, int32_t *out) {
    if (kind == KIND_INT16)
        pack_w_pairs(w, n, k, sn, sk, (int16_t *)(void *)out);
    else
        pack_w_quads(w, n, k, sn, sk, (int8_t *)(void *)out, groups_of(kind, k));
}

/* count matrices (N x K int8, contiguous) -> packed W, one after another */
void hw_pack_w(int64_t kind, const int8_t *w, int64_t count, int64_t n, int64_t k, int32_t *out) {
    const int64_t size = hw_packed_w_size(kind, n, k);
    for (int64_t b = 0; b < count; b++) hw_pack_w_strided(kind, w + b * n * k, n, k, k, 1, out + b * size);
}

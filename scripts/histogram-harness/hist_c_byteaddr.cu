// dotcompute CUDA C++ for kernel `histogram_byte_values_5_2` (IR v1)

typedef int i32;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;
typedef float f32;
typedef double f64;
#define DC_FN static __device__ __forceinline__
#define DC_THREAD
// Signed abs as a predicated negation in PTX (abs(MIN) == MIN). ptxas treats the result
// of `abs.s32` (which LLVM also emits for `a < 0 ? -a : a`) as non-negative and turns a
// following `%` into an unsigned remainder: abs(MIN) % 61 gave 59, not -59 (CUDA 13,
// H100; found by the random-kernel differential test, checked form by form by the
// `abs_of_min_then_remainder_forms` diagnosis). The predicated form computes the same.
#define DC_ABS_SIGNED \
DC_FN i32 dc_abs(i32 a) { i32 r; asm volatile("{ .reg .pred p; setp.lt.s32 p, %1, 0; @p sub.s32 %0, 0, %1; @!p mov.b32 %0, %1; }" : "=r"(r) : "r"(a)); return r; } \
DC_FN i64 dc_abs(i64 a) { i64 r; asm volatile("{ .reg .pred p; setp.lt.s64 p, %1, 0; @p sub.s64 %0, 0, %1; @!p mov.b64 %0, %1; }" : "=l"(r) : "l"(a)); return r; }

// Signed + - * and negation wrap (two's complement) through the unsigned types.
DC_FN i32 dc_add(i32 a, i32 b) { return (i32)((u32)a + (u32)b); }
DC_FN i32 dc_sub(i32 a, i32 b) { return (i32)((u32)a - (u32)b); }
DC_FN i32 dc_mul(i32 a, i32 b) { return (i32)((u32)a * (u32)b); }
DC_FN i32 dc_neg(i32 a) { return (i32)(0u - (u32)a); }
DC_FN i64 dc_add(i64 a, i64 b) { return (i64)((u64)a + (u64)b); }
DC_FN i64 dc_sub(i64 a, i64 b) { return (i64)((u64)a - (u64)b); }
DC_FN i64 dc_mul(i64 a, i64 b) { return (i64)((u64)a * (u64)b); }
DC_FN i64 dc_neg(i64 a) { return (i64)((u64)0 - (u64)a); }
DC_FN u32 dc_add(u32 a, u32 b) { return a + b; }
DC_FN u64 dc_add(u64 a, u64 b) { return a + b; }

// x / 0 == x, x % 0 == 0, MIN / -1 == MIN, MIN % -1 == 0.
DC_FN i32 dc_div(i32 a, i32 b) { return b == 0 ? a : (b == -1 ? dc_neg(a) : a / b); }
DC_FN i64 dc_div(i64 a, i64 b) { return b == 0 ? a : (b == -1 ? dc_neg(a) : a / b); }
DC_FN u32 dc_div(u32 a, u32 b) { return b == 0 ? a : a / b; }
DC_FN u64 dc_div(u64 a, u64 b) { return b == 0 ? a : a / b; }
DC_FN i32 dc_rem(i32 a, i32 b) { return (b == 0 || b == -1) ? 0 : a % b; }
DC_FN i64 dc_rem(i64 a, i64 b) { return (b == 0 || b == -1) ? 0 : a % b; }
DC_FN u32 dc_rem(u32 a, u32 b) { return b == 0 ? 0 : a % b; }
DC_FN u64 dc_rem(u64 a, u64 b) { return b == 0 ? 0 : a % b; }

// Shift amounts are taken modulo the bit width; >> is arithmetic for signed types.
DC_FN i32 dc_shl(i32 a, u32 s) { return (i32)((u32)a << (s & 31u)); }
DC_FN u32 dc_shl(u32 a, u32 s) { return a << (s & 31u); }
DC_FN i64 dc_shl(i64 a, u32 s) { return (i64)((u64)a << (s & 63u)); }
DC_FN u64 dc_shl(u64 a, u32 s) { return a << (s & 63u); }
DC_FN i32 dc_shr(i32 a, u32 s) { return a >> (s & 31u); }
DC_FN u32 dc_shr(u32 a, u32 s) { return a >> (s & 31u); }
DC_FN i64 dc_shr(i64 a, u32 s) { return a >> (s & 63u); }
DC_FN u64 dc_shr(u64 a, u32 s) { return a >> (s & 63u); }

// Integer abs wraps (abs(MIN) == MIN; the signed forms are each dialect's DC_ABS_SIGNED);
// min, max and clamp for integers.
DC_ABS_SIGNED
DC_FN u32 dc_abs(u32 a) { return a; }
DC_FN u64 dc_abs(u64 a) { return a; }
DC_FN u32 dc_sat_add(u32 a, u32 b) { u32 r = a + b; return r < a ? 0xffffffffu : r; }
DC_FN u64 dc_sat_add(u64 a, u64 b) { u64 r = a + b; return r < a ? ~(u64)0 : r; }
DC_FN u32 dc_sat_sub(u32 a, u32 b) { return a > b ? a - b : 0u; }
DC_FN u64 dc_sat_sub(u64 a, u64 b) { return a > b ? a - b : (u64)0; }
DC_FN i32 dc_sat_add(i32 a, i32 b) { i32 r = (i32)((u32)a + (u32)b); return ((a ^ r) & (b ^ r)) < 0 ? (a < 0 ? (i32)0x80000000u : 0x7fffffff) : r; }
DC_FN i64 dc_sat_add(i64 a, i64 b) { i64 r = (i64)((u64)a + (u64)b); return ((a ^ r) & (b ^ r)) < 0 ? (a < 0 ? (i64)(((u64)1) << 63) : (i64)(~((u64)1 << 63))) : r; }
DC_FN i32 dc_sat_sub(i32 a, i32 b) { i32 r = (i32)((u32)a - (u32)b); return ((a ^ b) & (a ^ r)) < 0 ? (a < 0 ? (i32)0x80000000u : 0x7fffffff) : r; }
DC_FN i64 dc_sat_sub(i64 a, i64 b) { i64 r = (i64)((u64)a - (u64)b); return ((a ^ b) & (a ^ r)) < 0 ? (a < 0 ? (i64)(((u64)1) << 63) : (i64)(~((u64)1 << 63))) : r; }
template <typename T> DC_FN T dc_min(T a, T b) { return b < a ? b : a; }
template <typename T> DC_FN T dc_max(T a, T b) { return a < b ? b : a; }
template <typename T> DC_FN T dc_clamp(T x, T lo, T hi) { return dc_min(dc_max(x, lo), hi); }

DC_FN f32 dc_clampf(f32 x, f32 lo, f32 hi) { return fminf(fmaxf(x, lo), hi); }
DC_FN f64 dc_clampd(f64 x, f64 lo, f64 hi) { return fmin(fmax(x, lo), hi); }
DC_FN i32 dc_f32_to_i32(f32 x) { return x != x ? 0 : __float2int_rz(x); }
DC_FN u32 dc_f32_to_u32(f32 x) { return x != x ? 0u : __float2uint_rz(x); }
DC_FN i64 dc_f32_to_i64(f32 x) { return x != x ? (i64)0 : __float2ll_rz(x); }
DC_FN u64 dc_f32_to_u64(f32 x) { return x != x ? (u64)0 : __float2ull_rz(x); }
DC_FN i32 dc_f64_to_i32(f64 x) { return x != x ? 0 : __double2int_rz(x); }
DC_FN u32 dc_f64_to_u32(f64 x) { return x != x ? 0u : __double2uint_rz(x); }
DC_FN i64 dc_f64_to_i64(f64 x) { return x != x ? (i64)0 : __double2ll_rz(x); }
DC_FN u64 dc_f64_to_u64(f64 x) { return x != x ? (u64)0 : __double2ull_rz(x); }

// Advances a counted loop; false at the end or when the counter would overflow.
template <typename T> DC_FN bool dc_advance(DC_THREAD T& v, T step, T end) {
    T next = dc_add(v, step);
    bool go = next > v && next < end;
    v = next;
    return go;
}

// Vectors: lane-wise with the scalar rules.
DC_FN f32 dc_add(f32 a, f32 b) { return a + b; }
DC_FN f32 dc_sub(f32 a, f32 b) { return a - b; }
DC_FN f32 dc_mul(f32 a, f32 b) { return a * b; }
DC_FN f32 dc_neg(f32 a) { return -a; }
DC_FN u32 dc_sub(u32 a, u32 b) { return a - b; }
DC_FN u32 dc_mul(u32 a, u32 b) { return a * b; }
DC_FN u32 dc_neg(u32 a) { return 0u - a; }
#define DC_VEC2(V, S) \
DC_FN V dc_vec(S x, S y) { V v; v.x = x; v.y = y; return v; } \
DC_FN V dc_vadd(V a, V b) { return dc_vec(dc_add(a.x, b.x), dc_add(a.y, b.y)); } \
DC_FN V dc_vsub(V a, V b) { return dc_vec(dc_sub(a.x, b.x), dc_sub(a.y, b.y)); } \
DC_FN V dc_vmul(V a, V b) { return dc_vec(dc_mul(a.x, b.x), dc_mul(a.y, b.y)); } \
DC_FN V dc_vdiv(V a, V b) { return dc_vec(a.x / b.x, a.y / b.y); } \
DC_FN V dc_vneg(V a) { return dc_vec(dc_neg(a.x), dc_neg(a.y)); }
#define DC_VEC4(V, S) \
DC_FN V dc_vec(S x, S y, S z, S w) { V v; v.x = x; v.y = y; v.z = z; v.w = w; return v; } \
DC_FN V dc_vadd(V a, V b) { return dc_vec(dc_add(a.x, b.x), dc_add(a.y, b.y), dc_add(a.z, b.z), dc_add(a.w, b.w)); } \
DC_FN V dc_vsub(V a, V b) { return dc_vec(dc_sub(a.x, b.x), dc_sub(a.y, b.y), dc_sub(a.z, b.z), dc_sub(a.w, b.w)); } \
DC_FN V dc_vmul(V a, V b) { return dc_vec(dc_mul(a.x, b.x), dc_mul(a.y, b.y), dc_mul(a.z, b.z), dc_mul(a.w, b.w)); } \
DC_FN V dc_vdiv(V a, V b) { return dc_vec(a.x / b.x, a.y / b.y, a.z / b.z, a.w / b.w); } \
DC_FN V dc_vneg(V a) { return dc_vec(dc_neg(a.x), dc_neg(a.y), dc_neg(a.z), dc_neg(a.w)); }
DC_VEC2(float2, f32)
DC_VEC2(int2, i32)
DC_VEC2(uint2, u32)
DC_VEC4(float4, f32)
DC_VEC4(int4, i32)
DC_VEC4(uint4, u32)

static __device__ __forceinline__ void dc_body(
    const uint4* __restrict__ p_quads,
    const u32* __restrict__ p_words,
    u32* p_hist,
    u32 p_n,
    u32 p_lower,
    u32 p_upper,
    u32 p_width,
    u32 p_shift,
    u32 dc_len_quads,
    u32 dc_len_words,
    u32 dc_len_hist,
    u32 dc_grid_x,
    u32 dc_grid_y,
    u32 dc_grid_z,
    u32 dc_dyn_len,
    const uint3 dc_global,
    const uint3 dc_lid,
    const uint3 dc_group,
    const uint3 dc_gsize,
    const uint3 dc_ngroups
) {
    __shared__ __align__(16) u32 s_local[8192];
    u32 l_log_copies_0 = 5u;
    u32 l_copies_1 = dc_shl(1u, 5u);
    u32 l_bins_2 = dc_shl(256u, 5u);
    u32 l_b_3 = dc_lid.x;
    for (;;) {
        if (!(l_b_3 < l_bins_2)) {
            break;
        }
        (*(volatile u32*)&s_local[l_b_3]) = 0u;
        l_b_3 = (l_b_3 + 256u);
    }
    __syncthreads();
    u32 l_copy_4 = dc_rem(dc_lid.x, l_copies_1);
    u32 l_stride_5 = (256u * dc_ngroups.x);
    u32 l_i_6 = dc_global.x;
    for (;;) {
        if (!((l_i_6 + l_stride_5) < dc_len_quads)) {
            break;
        }
        uint4 l_q0_151 = p_quads[l_i_6];
        uint4 l_q1_152 = p_quads[(l_i_6 + l_stride_5)];
        uint4 l_q_153 = l_q0_151;
        u32 l_log_copies_154 = 5u;
        u32 l_copy_155 = l_copy_4;
        u32 l_w_156 = (l_q_153).x;
        u32 l_log_copies_157 = 5u;
        u32 l_copy_158 = l_copy_155;
        u32 l_mask_159 = dc_shl(255u, 5u);
        u32 l_atomic_old_160_160 = u32(0);
        l_atomic_old_160_160 = atomicAdd((u32*)((char*)s_local + ((((l_w_156 << 7u)) & 0x7f80u) | (l_copy_158 << 2u))), 1u);
        u32 l_atomic_old_161_161 = u32(0);
        l_atomic_old_161_161 = atomicAdd((u32*)((char*)s_local + ((((l_w_156 >> 1u)) & 0x7f80u) | (l_copy_158 << 2u))), 1u);
        u32 l_atomic_old_162_162 = u32(0);
        l_atomic_old_162_162 = atomicAdd((u32*)((char*)s_local + ((((l_w_156 >> 9u)) & 0x7f80u) | (l_copy_158 << 2u))), 1u);
        u32 l_atomic_old_163_163 = u32(0);
        l_atomic_old_163_163 = atomicAdd((u32*)((char*)s_local + ((((l_w_156 >> 17u)) & 0x7f80u) | (l_copy_158 << 2u))), 1u);
        u32 l_w_164 = (l_q_153).y;
        u32 l_log_copies_165 = 5u;
        u32 l_copy_166 = l_copy_155;
        u32 l_mask_167 = dc_shl(255u, 5u);
        u32 l_atomic_old_168_168 = u32(0);
        l_atomic_old_168_168 = atomicAdd((u32*)((char*)s_local + ((((l_w_164 << 7u)) & 0x7f80u) | (l_copy_166 << 2u))), 1u);
        u32 l_atomic_old_169_169 = u32(0);
        l_atomic_old_169_169 = atomicAdd((u32*)((char*)s_local + ((((l_w_164 >> 1u)) & 0x7f80u) | (l_copy_166 << 2u))), 1u);
        u32 l_atomic_old_170_170 = u32(0);
        l_atomic_old_170_170 = atomicAdd((u32*)((char*)s_local + ((((l_w_164 >> 9u)) & 0x7f80u) | (l_copy_166 << 2u))), 1u);
        u32 l_atomic_old_171_171 = u32(0);
        l_atomic_old_171_171 = atomicAdd((u32*)((char*)s_local + ((((l_w_164 >> 17u)) & 0x7f80u) | (l_copy_166 << 2u))), 1u);
        u32 l_w_172 = (l_q_153).z;
        u32 l_log_copies_173 = 5u;
        u32 l_copy_174 = l_copy_155;
        u32 l_mask_175 = dc_shl(255u, 5u);
        u32 l_atomic_old_176_176 = u32(0);
        l_atomic_old_176_176 = atomicAdd((u32*)((char*)s_local + ((((l_w_172 << 7u)) & 0x7f80u) | (l_copy_174 << 2u))), 1u);
        u32 l_atomic_old_177_177 = u32(0);
        l_atomic_old_177_177 = atomicAdd((u32*)((char*)s_local + ((((l_w_172 >> 1u)) & 0x7f80u) | (l_copy_174 << 2u))), 1u);
        u32 l_atomic_old_178_178 = u32(0);
        l_atomic_old_178_178 = atomicAdd((u32*)((char*)s_local + ((((l_w_172 >> 9u)) & 0x7f80u) | (l_copy_174 << 2u))), 1u);
        u32 l_atomic_old_179_179 = u32(0);
        l_atomic_old_179_179 = atomicAdd((u32*)((char*)s_local + ((((l_w_172 >> 17u)) & 0x7f80u) | (l_copy_174 << 2u))), 1u);
        u32 l_w_180 = (l_q_153).w;
        u32 l_log_copies_181 = 5u;
        u32 l_copy_182 = l_copy_155;
        u32 l_mask_183 = dc_shl(255u, 5u);
        u32 l_atomic_old_184_184 = u32(0);
        l_atomic_old_184_184 = atomicAdd((u32*)((char*)s_local + ((((l_w_180 << 7u)) & 0x7f80u) | (l_copy_182 << 2u))), 1u);
        u32 l_atomic_old_185_185 = u32(0);
        l_atomic_old_185_185 = atomicAdd((u32*)((char*)s_local + ((((l_w_180 >> 1u)) & 0x7f80u) | (l_copy_182 << 2u))), 1u);
        u32 l_atomic_old_186_186 = u32(0);
        l_atomic_old_186_186 = atomicAdd((u32*)((char*)s_local + ((((l_w_180 >> 9u)) & 0x7f80u) | (l_copy_182 << 2u))), 1u);
        u32 l_atomic_old_187_187 = u32(0);
        l_atomic_old_187_187 = atomicAdd((u32*)((char*)s_local + ((((l_w_180 >> 17u)) & 0x7f80u) | (l_copy_182 << 2u))), 1u);
        uint4 l_q_188 = l_q1_152;
        u32 l_log_copies_189 = 5u;
        u32 l_copy_190 = l_copy_4;
        u32 l_w_191 = (l_q_188).x;
        u32 l_log_copies_192 = 5u;
        u32 l_copy_193 = l_copy_190;
        u32 l_mask_194 = dc_shl(255u, 5u);
        u32 l_atomic_old_195_195 = u32(0);
        l_atomic_old_195_195 = atomicAdd((u32*)((char*)s_local + ((((l_w_191 << 7u)) & 0x7f80u) | (l_copy_193 << 2u))), 1u);
        u32 l_atomic_old_196_196 = u32(0);
        l_atomic_old_196_196 = atomicAdd((u32*)((char*)s_local + ((((l_w_191 >> 1u)) & 0x7f80u) | (l_copy_193 << 2u))), 1u);
        u32 l_atomic_old_197_197 = u32(0);
        l_atomic_old_197_197 = atomicAdd((u32*)((char*)s_local + ((((l_w_191 >> 9u)) & 0x7f80u) | (l_copy_193 << 2u))), 1u);
        u32 l_atomic_old_198_198 = u32(0);
        l_atomic_old_198_198 = atomicAdd((u32*)((char*)s_local + ((((l_w_191 >> 17u)) & 0x7f80u) | (l_copy_193 << 2u))), 1u);
        u32 l_w_199 = (l_q_188).y;
        u32 l_log_copies_200 = 5u;
        u32 l_copy_201 = l_copy_190;
        u32 l_mask_202 = dc_shl(255u, 5u);
        u32 l_atomic_old_203_203 = u32(0);
        l_atomic_old_203_203 = atomicAdd((u32*)((char*)s_local + ((((l_w_199 << 7u)) & 0x7f80u) | (l_copy_201 << 2u))), 1u);
        u32 l_atomic_old_204_204 = u32(0);
        l_atomic_old_204_204 = atomicAdd((u32*)((char*)s_local + ((((l_w_199 >> 1u)) & 0x7f80u) | (l_copy_201 << 2u))), 1u);
        u32 l_atomic_old_205_205 = u32(0);
        l_atomic_old_205_205 = atomicAdd((u32*)((char*)s_local + ((((l_w_199 >> 9u)) & 0x7f80u) | (l_copy_201 << 2u))), 1u);
        u32 l_atomic_old_206_206 = u32(0);
        l_atomic_old_206_206 = atomicAdd((u32*)((char*)s_local + ((((l_w_199 >> 17u)) & 0x7f80u) | (l_copy_201 << 2u))), 1u);
        u32 l_w_207 = (l_q_188).z;
        u32 l_log_copies_208 = 5u;
        u32 l_copy_209 = l_copy_190;
        u32 l_mask_210 = dc_shl(255u, 5u);
        u32 l_atomic_old_211_211 = u32(0);
        l_atomic_old_211_211 = atomicAdd((u32*)((char*)s_local + ((((l_w_207 << 7u)) & 0x7f80u) | (l_copy_209 << 2u))), 1u);
        u32 l_atomic_old_212_212 = u32(0);
        l_atomic_old_212_212 = atomicAdd((u32*)((char*)s_local + ((((l_w_207 >> 1u)) & 0x7f80u) | (l_copy_209 << 2u))), 1u);
        u32 l_atomic_old_213_213 = u32(0);
        l_atomic_old_213_213 = atomicAdd((u32*)((char*)s_local + ((((l_w_207 >> 9u)) & 0x7f80u) | (l_copy_209 << 2u))), 1u);
        u32 l_atomic_old_214_214 = u32(0);
        l_atomic_old_214_214 = atomicAdd((u32*)((char*)s_local + ((((l_w_207 >> 17u)) & 0x7f80u) | (l_copy_209 << 2u))), 1u);
        u32 l_w_215 = (l_q_188).w;
        u32 l_log_copies_216 = 5u;
        u32 l_copy_217 = l_copy_190;
        u32 l_mask_218 = dc_shl(255u, 5u);
        u32 l_atomic_old_219_219 = u32(0);
        l_atomic_old_219_219 = atomicAdd((u32*)((char*)s_local + ((((l_w_215 << 7u)) & 0x7f80u) | (l_copy_217 << 2u))), 1u);
        u32 l_atomic_old_220_220 = u32(0);
        l_atomic_old_220_220 = atomicAdd((u32*)((char*)s_local + ((((l_w_215 >> 1u)) & 0x7f80u) | (l_copy_217 << 2u))), 1u);
        u32 l_atomic_old_221_221 = u32(0);
        l_atomic_old_221_221 = atomicAdd((u32*)((char*)s_local + ((((l_w_215 >> 9u)) & 0x7f80u) | (l_copy_217 << 2u))), 1u);
        u32 l_atomic_old_222_222 = u32(0);
        l_atomic_old_222_222 = atomicAdd((u32*)((char*)s_local + ((((l_w_215 >> 17u)) & 0x7f80u) | (l_copy_217 << 2u))), 1u);
        l_i_6 = (l_i_6 + (2u * l_stride_5));
    }
    if (l_i_6 < dc_len_quads) {
        uint4 l_q_223 = p_quads[l_i_6];
        u32 l_log_copies_224 = 5u;
        u32 l_copy_225 = l_copy_4;
        u32 l_w_226 = (l_q_223).x;
        u32 l_log_copies_227 = 5u;
        u32 l_copy_228 = l_copy_225;
        u32 l_mask_229 = dc_shl(255u, 5u);
        u32 l_atomic_old_230_230 = u32(0);
        l_atomic_old_230_230 = atomicAdd((u32*)((char*)s_local + ((((l_w_226 << 7u)) & 0x7f80u) | (l_copy_228 << 2u))), 1u);
        u32 l_atomic_old_231_231 = u32(0);
        l_atomic_old_231_231 = atomicAdd((u32*)((char*)s_local + ((((l_w_226 >> 1u)) & 0x7f80u) | (l_copy_228 << 2u))), 1u);
        u32 l_atomic_old_232_232 = u32(0);
        l_atomic_old_232_232 = atomicAdd((u32*)((char*)s_local + ((((l_w_226 >> 9u)) & 0x7f80u) | (l_copy_228 << 2u))), 1u);
        u32 l_atomic_old_233_233 = u32(0);
        l_atomic_old_233_233 = atomicAdd((u32*)((char*)s_local + ((((l_w_226 >> 17u)) & 0x7f80u) | (l_copy_228 << 2u))), 1u);
        u32 l_w_234 = (l_q_223).y;
        u32 l_log_copies_235 = 5u;
        u32 l_copy_236 = l_copy_225;
        u32 l_mask_237 = dc_shl(255u, 5u);
        u32 l_atomic_old_238_238 = u32(0);
        l_atomic_old_238_238 = atomicAdd((u32*)((char*)s_local + ((((l_w_234 << 7u)) & 0x7f80u) | (l_copy_236 << 2u))), 1u);
        u32 l_atomic_old_239_239 = u32(0);
        l_atomic_old_239_239 = atomicAdd((u32*)((char*)s_local + ((((l_w_234 >> 1u)) & 0x7f80u) | (l_copy_236 << 2u))), 1u);
        u32 l_atomic_old_240_240 = u32(0);
        l_atomic_old_240_240 = atomicAdd((u32*)((char*)s_local + ((((l_w_234 >> 9u)) & 0x7f80u) | (l_copy_236 << 2u))), 1u);
        u32 l_atomic_old_241_241 = u32(0);
        l_atomic_old_241_241 = atomicAdd((u32*)((char*)s_local + ((((l_w_234 >> 17u)) & 0x7f80u) | (l_copy_236 << 2u))), 1u);
        u32 l_w_242 = (l_q_223).z;
        u32 l_log_copies_243 = 5u;
        u32 l_copy_244 = l_copy_225;
        u32 l_mask_245 = dc_shl(255u, 5u);
        u32 l_atomic_old_246_246 = u32(0);
        l_atomic_old_246_246 = atomicAdd((u32*)((char*)s_local + ((((l_w_242 << 7u)) & 0x7f80u) | (l_copy_244 << 2u))), 1u);
        u32 l_atomic_old_247_247 = u32(0);
        l_atomic_old_247_247 = atomicAdd((u32*)((char*)s_local + ((((l_w_242 >> 1u)) & 0x7f80u) | (l_copy_244 << 2u))), 1u);
        u32 l_atomic_old_248_248 = u32(0);
        l_atomic_old_248_248 = atomicAdd((u32*)((char*)s_local + ((((l_w_242 >> 9u)) & 0x7f80u) | (l_copy_244 << 2u))), 1u);
        u32 l_atomic_old_249_249 = u32(0);
        l_atomic_old_249_249 = atomicAdd((u32*)((char*)s_local + ((((l_w_242 >> 17u)) & 0x7f80u) | (l_copy_244 << 2u))), 1u);
        u32 l_w_250 = (l_q_223).w;
        u32 l_log_copies_251 = 5u;
        u32 l_copy_252 = l_copy_225;
        u32 l_mask_253 = dc_shl(255u, 5u);
        u32 l_atomic_old_254_254 = u32(0);
        l_atomic_old_254_254 = atomicAdd((u32*)((char*)s_local + ((((l_w_250 << 7u)) & 0x7f80u) | (l_copy_252 << 2u))), 1u);
        u32 l_atomic_old_255_255 = u32(0);
        l_atomic_old_255_255 = atomicAdd((u32*)((char*)s_local + ((((l_w_250 >> 1u)) & 0x7f80u) | (l_copy_252 << 2u))), 1u);
        u32 l_atomic_old_256_256 = u32(0);
        l_atomic_old_256_256 = atomicAdd((u32*)((char*)s_local + ((((l_w_250 >> 9u)) & 0x7f80u) | (l_copy_252 << 2u))), 1u);
        u32 l_atomic_old_257_257 = u32(0);
        l_atomic_old_257_257 = atomicAdd((u32*)((char*)s_local + ((((l_w_250 >> 17u)) & 0x7f80u) | (l_copy_252 << 2u))), 1u);
    }
    u32 l_tail_258 = ((4u * dc_len_quads) + dc_global.x);
    if (l_tail_258 < dc_len_words) {
        u32 l_w_259 = p_words[l_tail_258];
        u32 l_log_copies_260 = 5u;
        u32 l_copy_261 = l_copy_4;
        u32 l_mask_262 = dc_shl(255u, 5u);
        u32 l_atomic_old_263_263 = u32(0);
        l_atomic_old_263_263 = atomicAdd((u32*)((char*)s_local + ((((l_w_259 << 7u)) & 0x7f80u) | (l_copy_261 << 2u))), 1u);
        u32 l_atomic_old_264_264 = u32(0);
        l_atomic_old_264_264 = atomicAdd((u32*)((char*)s_local + ((((l_w_259 >> 1u)) & 0x7f80u) | (l_copy_261 << 2u))), 1u);
        u32 l_atomic_old_265_265 = u32(0);
        l_atomic_old_265_265 = atomicAdd((u32*)((char*)s_local + ((((l_w_259 >> 9u)) & 0x7f80u) | (l_copy_261 << 2u))), 1u);
        u32 l_atomic_old_266_266 = u32(0);
        l_atomic_old_266_266 = atomicAdd((u32*)((char*)s_local + ((((l_w_259 >> 17u)) & 0x7f80u) | (l_copy_261 << 2u))), 1u);
    }
    __syncthreads();
    u32 l_v_267 = dc_lid.x;
    u32 l_count_268 = 0u;
    u32 l_c_269 = 0u;
    for (;;) {
        if (!(l_c_269 < l_copies_1)) {
            break;
        }
        l_count_268 = (l_count_268 + (*(volatile u32*)&s_local[(dc_shl(l_v_267, 5u) | ((l_c_269 + l_v_267) & (l_copies_1 - 1u)))]));
        l_c_269 = (l_c_269 + 1u);
    }
    if ((l_v_267 == 0u) && (dc_group.x == 0u)) {
        l_count_268 = (l_count_268 - ((4u * dc_len_words) - p_n));
    }
    u32 l_b_270 = l_v_267;
    u32 l_lower_271 = p_lower;
    u32 l_upper_272 = p_upper;
    u32 l_width_273 = p_width;
    u32 l_shift_274 = p_shift;
    u32 l_bin_275 = 4294967295u;
    if ((l_b_270 >= l_lower_271) && (l_b_270 < l_upper_272)) {
        u32 l_if_value_276_276 = u32(0);
        if (l_shift_274 < 32u) {
            l_if_value_276_276 = dc_shr((l_b_270 - l_lower_271), l_shift_274);
        } else {
            l_if_value_276_276 = dc_div((l_b_270 - l_lower_271), l_width_273);
        }
        l_bin_275 = l_if_value_276_276;
    }
    u32 l_bin_277 = l_bin_275;
    if ((l_bin_277 != 4294967295u) && (l_count_268 != 0u)) {
        u32 l_atomic_old_278_278 = u32(0);
        l_atomic_old_278_278 = atomicAdd(&p_hist[l_bin_277], l_count_268);
    }
}

extern "C" __global__ void dc_histogram_byte_values_5_2(
    const uint4* __restrict__ p_quads,
    const u32* __restrict__ p_words,
    u32* p_hist,
    u32 p_n,
    u32 p_lower,
    u32 p_upper,
    u32 p_width,
    u32 p_shift,
    u32 dc_len_quads,
    u32 dc_len_words,
    u32 dc_len_hist,
    u32 dc_grid_x,
    u32 dc_grid_y,
    u32 dc_grid_z,
    u32 dc_dyn_len
) {
    const uint3 dc_lid = threadIdx;
    const uint3 dc_group = blockIdx;
    const uint3 dc_gsize = blockDim;
    const uint3 dc_ngroups = gridDim;
    const uint3 dc_global = make_uint3(dc_group.x * dc_gsize.x + dc_lid.x, dc_group.y * dc_gsize.y + dc_lid.y, dc_group.z * dc_gsize.z + dc_lid.z);
    dc_body(p_quads, p_words, p_hist, p_n, p_lower, p_upper, p_width, p_shift, dc_len_quads, dc_len_words, dc_len_hist, dc_grid_x, dc_grid_y, dc_grid_z, dc_dyn_len, dc_global, dc_lid, dc_group, dc_gsize, dc_ngroups);
}

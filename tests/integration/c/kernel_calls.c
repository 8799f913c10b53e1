/*
 * kernel_calls: make a batch of single CMSIS-NN kernel calls, for differential tests of the reference.
 *
 *   kernel_calls < CALLS > RESULTS
 *
 * Reads calls from stdin until the announced count is reached, makes each one through CMSIS-NN's public
 * API (arm_nnfunctions.h) with a scratch buffer sized by the kernel's *_get_buffer_size and cleared, and
 * writes one result per call to stdout. It checks only that the records are well formed (counts and
 * element sizes agree with the dimensions); whether the parameters make sense is the caller's business,
 * and a kernel's own argument errors are reported as its status, not as a failure of this program.
 * Exit status: 0 every call was made (whatever the kernels returned), 2 malformed input or out of memory.
 *
 * Format, both directions: little-endian; every field is an int32 unless noted; arrays are padded to 4 bytes.
 *   CALLS    "FXKC" version(=1) call_count, then per call:
 *            kernel int_count ints[int_count] array_count, then per array:
 *            elem_size(1|2|4|8) count data[count*elem_size] padding
 *   RESULTS  "FXKR" version(=1) call_count, then per call:
 *            status elem_size count data[count*elem_size] padding
 *            status is the kernel's arm_cmsis_nn_status (0 success); its output has count 0 unless it is 0.
 * An array of count 0 is passed as NULL (e.g. no bias). DIMS is a cmsis_nn_dims as four ints n h w c, in the
 * meaning each kernel's header gives its fields; a pair (stride, padding, dilation) is h then w.
 *
 * Kernels, their ints, their arrays (type, element count) and their output:
 *   1 arm_convolve_wrapper_s8            input_dims filter_dims output_dims input_offset output_offset
 *                                        stride padding dilation act_min act_max                     (22)
 *        input int8 (input), filter int8 (filter), bias int32 (output c or 0), multiplier int32 and
 *        shift int32 (output c);  output int8 (output)
 *   2 arm_depthwise_conv_wrapper_s8      input_dims filter_dims output_dims input_offset output_offset
 *                                        ch_mult stride padding dilation act_min act_max             (23)
 *        arrays as kind 1;  output int8 (output)
 *   3 arm_fully_connected_s8             input_dims filter_dims output_dims input_offset filter_offset
 *                                        output_offset multiplier shift act_min act_max              (19)
 *        input int8 (input), filter int8 (filter n*c), bias int32 (output c or 0);  output int8 (output)
 *   4 arm_fully_connected_per_channel_s8 input_dims filter_dims output_dims input_offset filter_offset
 *                                        output_offset act_min act_max                               (17)
 *        arrays as kind 3, then multiplier int32 and shift int32 (output c);  output int8 (output)
 *   5 arm_fully_connected_wrapper_s8     ints as kind 4, then is_per_channel                         (18)
 *        arrays as kind 4, with multiplier and shift of count 1 when not per channel
 *   6 arm_avgpool_s8, 7 arm_max_pool_s8  input_dims filter_dims output_dims stride padding
 *                                        act_min act_max                                             (18)
 *        input int8 (input);  output int8 (output)
 *   8 arm_softmax_s8                     num_rows row_size mult shift diff_min                        (5)
 *        input int8 (num_rows*row_size);  output int8 (same)
 *   9 arm_softmax_s8_s16                 as kind 8;  output int16
 *  10 arm_softmax_s16                    num_rows row_size mult shift                                 (4)
 *        input int16 (num_rows*row_size), exp_lut int16 (513), one_by_one_lut int16 (513); output int16
 *  11 arm_elementwise_add_s8, 12 arm_elementwise_add_s16
 *                                        block_size input_1_offset input_1_mult input_1_shift
 *                                        input_2_offset input_2_mult input_2_shift left_shift
 *                                        out_offset out_mult out_shift act_min act_max               (13)
 *        input_1 and input_2 (block_size, int8 or int16);  output of their type (block_size)
 *  13 arm_elementwise_mul_s8, 14 arm_elementwise_mul_s16
 *                                        block_size input_1_offset input_2_offset out_offset
 *                                        out_mult out_shift act_min act_max                           (8)
 *        as kinds 11/12
 *  15 arm_convolve_wrapper_s16           ints as kind 1, then is_int32_bias                          (23)
 *        input int16, filter int8, bias int64 (int32 when is_int32_bias; or count 0), multiplier,
 *        shift;  output int16 (output)
 *  16 arm_depthwise_conv_wrapper_s16     ints as kind 2                                              (23)
 *        input int16, filter int8, bias int64 (or 0), multiplier, shift;  output int16 (output)
 *  17 arm_fully_connected_s16            input_dims filter_dims output_dims multiplier shift
 *                                        act_min act_max                                             (16)
 *        input int16, filter int8 (filter n*c), bias int64 (output c or 0);  output int16 (output)
 *  18 arm_avgpool_s16, 19 arm_max_pool_s16   as kinds 6/7 with int16 input and output
 * where (input), (filter), (output) mean the product n*h*w*c of those dims.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arm_nnfunctions.h"

enum { MAX_INTS = 32, MAX_ARRAYS = 8, LUT_ENTRIES = 513 };
/* Kernels may read a few bytes past an array on some paths (see arm_depthwise_conv_s8_opt); stay safe. */
enum { SLACK_BYTES = 64 };

typedef struct {
    int32_t elem_size, count;
    void *data;
} array_t;

typedef struct {
    int index;
    int32_t kernel;
    int32_t n_ints;
    int32_t v[MAX_INTS];
    int32_t n_arrays;
    array_t a[MAX_ARRAYS];
} call_t;

typedef struct {
    int32_t status;
    int32_t elem_size, count;
    void *data;
} result_t;

/* ------------------------------------------------------------------------------------------- I/O */

static void die(const char *what, int call) {
    if (call >= 0) fprintf(stderr, "kernel_calls: call %d: %s\n", call, what);
    else fprintf(stderr, "kernel_calls: %s\n", what);
    exit(2);
}

static void *zeroed(size_t bytes) {
    void *p = calloc(bytes + SLACK_BYTES, 1);
    if (!p) die("out of memory", -1);
    return p;
}

static void read_exact(void *dst, size_t n) {
    if (n && fread(dst, 1, n, stdin) != n) die("truncated input", -1);
}

static int32_t read_i32(void) {
    uint8_t b[4];
    read_exact(b, 4);
    return (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24);
}

static void write_i32(int32_t value) {
    uint32_t u = (uint32_t)value;
    uint8_t b[4] = {(uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16), (uint8_t)(u >> 24)};
    fwrite(b, 1, 4, stdout);
}

static size_t padding_of(size_t bytes) { return (4 - bytes % 4) % 4; }

static void read_array(array_t *a, int call) {
    a->elem_size = read_i32();
    a->count = read_i32();
    int size = a->elem_size;
    if ((size != 1 && size != 2 && size != 4 && size != 8) || a->count < 0) die("bad array header", call);
    size_t bytes = (size_t)size * (size_t)a->count;
    a->data = a->count ? zeroed(bytes) : NULL;
    read_exact(a->data, bytes);
    uint8_t pad[4];
    read_exact(pad, padding_of(bytes));
}

static void read_call(call_t *c, int index) {
    c->index = index;
    c->kernel = read_i32();
    c->n_ints = read_i32();
    if (c->n_ints < 0 || c->n_ints > MAX_INTS) die("too many ints", index);
    for (int i = 0; i < c->n_ints; i++) c->v[i] = read_i32();
    c->n_arrays = read_i32();
    if (c->n_arrays < 0 || c->n_arrays > MAX_ARRAYS) die("too many arrays", index);
    for (int i = 0; i < c->n_arrays; i++) read_array(&c->a[i], index);
}

static void write_result(const result_t *r) {
    int32_t count = r->status == ARM_CMSIS_NN_SUCCESS ? r->count : 0;
    write_i32(r->status);
    write_i32(r->elem_size);
    write_i32(count);
    size_t bytes = (size_t)r->elem_size * (size_t)count;
    if (bytes) fwrite(r->data, 1, bytes, stdout);
    static const uint8_t pad[4] = {0};
    fwrite(pad, 1, padding_of(bytes), stdout);
}

/* ---------------------------------------------------------------------------- checked record views */

static void expect_shape(const call_t *c, int n_ints, int n_arrays) {
    if (c->n_ints != n_ints || c->n_arrays != n_arrays) {
        fprintf(stderr, "kernel_calls: call %d: kernel %d takes %d ints and %d arrays, got %d and %d\n", c->index,
                c->kernel, n_ints, n_arrays, c->n_ints, c->n_arrays);
        exit(2);
    }
}

/* Array i, checked to hold `count` elements of `elem_size` bytes; an optional one may be empty (NULL). */
static const void *array(const call_t *c, int i, int32_t elem_size, int64_t count, bool optional) {
    const array_t *a = &c->a[i];
    if (optional && a->count == 0) return NULL;
    if (a->elem_size != elem_size || (int64_t)a->count != count) {
        fprintf(stderr, "kernel_calls: call %d: array %d holds %d x %d bytes, expected %lld x %d\n", c->index, i,
                a->count, a->elem_size, (long long)count, elem_size);
        exit(2);
    }
    return a->data;
}

static cmsis_nn_dims dims_at(const call_t *c, int at) {
    cmsis_nn_dims d = {c->v[at], c->v[at + 1], c->v[at + 2], c->v[at + 3]};
    if (d.n < 0 || d.h < 0 || d.w < 0 || d.c < 0) die("negative dimension", c->index);
    return d;
}

static int64_t volume(cmsis_nn_dims d) { return (int64_t)d.n * d.h * d.w * d.c; }

static cmsis_nn_tile tile_at(const call_t *c, int at) {
    cmsis_nn_tile t = {c->v[at + 1], c->v[at]}; /* the record holds (h, w); the struct is {w, h} */
    return t;
}

static cmsis_nn_activation activation_at(const call_t *c, int at) {
    cmsis_nn_activation act = {c->v[at], c->v[at + 1]};
    return act;
}

static void alloc_output(result_t *r, int32_t elem_size, int64_t count, int call) {
    if (count < 0 || count > INT32_MAX / 8) die("output too large", call);
    r->elem_size = elem_size;
    r->count = (int32_t)count;
    r->data = zeroed((size_t)elem_size * (size_t)count);
}

/* A cleared scratch buffer of the size the kernel asked for; NULL when it needs none, as TFLM passes. */
static cmsis_nn_context scratch(int32_t size, int call) {
    cmsis_nn_context ctx = {NULL, 0};
    if (size < 0) die("negative scratch buffer size", call);
    if (size > 0) {
        ctx.buf = zeroed((size_t)size);
        ctx.size = size;
    }
    return ctx;
}

/* The three DIMS every layer record starts with. */
typedef struct {
    cmsis_nn_dims in, filter, out, bias;
} layer_dims_t;

static layer_dims_t layer_dims(const call_t *c) {
    layer_dims_t d = {dims_at(c, 0), dims_at(c, 4), dims_at(c, 8), {1, 1, 1, 0}};
    d.bias.c = d.out.c;
    return d;
}

/* ------------------------------------------------------------------------------------ convolutions */

static cmsis_nn_conv_params conv_params(const call_t *c) {
    cmsis_nn_conv_params p;
    p.input_offset = c->v[12];
    p.output_offset = c->v[13];
    p.stride = tile_at(c, 14);
    p.padding = tile_at(c, 16);
    p.dilation = tile_at(c, 18);
    p.activation = activation_at(c, 20);
    return p;
}

static cmsis_nn_dw_conv_params dw_params(const call_t *c) {
    cmsis_nn_dw_conv_params p;
    p.input_offset = c->v[12];
    p.output_offset = c->v[13];
    p.ch_mult = c->v[14];
    p.stride = tile_at(c, 15);
    p.padding = tile_at(c, 17);
    p.dilation = tile_at(c, 19);
    p.activation = activation_at(c, 21);
    return p;
}

/* The quantization arrays 3 and 4 of a convolution record, one entry per output channel. */
static cmsis_nn_per_channel_quant_params channel_quant(const call_t *c, int32_t channels) {
    cmsis_nn_per_channel_quant_params q;
    q.multiplier = (int32_t *)array(c, 3, 4, channels, false);
    q.shift = (int32_t *)array(c, 4, 4, channels, false);
    return q;
}

static void conv_s8(const call_t *c, result_t *r) {
    expect_shape(c, 22, 5);
    layer_dims_t d = layer_dims(c);
    cmsis_nn_conv_params p = conv_params(c);
    cmsis_nn_per_channel_quant_params q = channel_quant(c, d.out.c);
    const int8_t *input = array(c, 0, 1, volume(d.in), false);
    const int8_t *filter = array(c, 1, 1, volume(d.filter), false);
    const int32_t *bias = array(c, 2, 4, d.out.c, true);
    alloc_output(r, 1, volume(d.out), c->index);
    cmsis_nn_context ctx = scratch(arm_convolve_wrapper_s8_get_buffer_size(&p, &d.in, &d.filter, &d.out), c->index);
    r->status = arm_convolve_wrapper_s8(&ctx, &p, &q, &d.in, input, &d.filter, filter, &d.bias, bias, &d.out, r->data);
    free(ctx.buf);
}

static void depthwise_s8(const call_t *c, result_t *r) {
    expect_shape(c, 23, 5);
    layer_dims_t d = layer_dims(c);
    cmsis_nn_dw_conv_params p = dw_params(c);
    cmsis_nn_per_channel_quant_params q = channel_quant(c, d.out.c);
    const int8_t *input = array(c, 0, 1, volume(d.in), false);
    const int8_t *filter = array(c, 1, 1, volume(d.filter), false);
    const int32_t *bias = array(c, 2, 4, d.out.c, true);
    alloc_output(r, 1, volume(d.out), c->index);
    int32_t size = arm_depthwise_conv_wrapper_s8_get_buffer_size(&p, &d.in, &d.filter, &d.out);
    cmsis_nn_context ctx = scratch(size, c->index);
    r->status =
        arm_depthwise_conv_wrapper_s8(&ctx, &p, &q, &d.in, input, &d.filter, filter, &d.bias, bias, &d.out, r->data);
    free(ctx.buf);
}

static void conv_s16(const call_t *c, result_t *r) {
    expect_shape(c, 23, 5);
    layer_dims_t d = layer_dims(c);
    cmsis_nn_conv_params p = conv_params(c);
    cmsis_nn_per_channel_quant_params q = channel_quant(c, d.out.c);
    const bool int32_bias = c->v[22] != 0;
    const int16_t *input = array(c, 0, 2, volume(d.in), false);
    const int8_t *filter = array(c, 1, 1, volume(d.filter), false);
    cmsis_nn_bias_data bias = {array(c, 2, int32_bias ? 4 : 8, d.out.c, true), int32_bias};
    alloc_output(r, 2, volume(d.out), c->index);
    cmsis_nn_context ctx = scratch(arm_convolve_wrapper_s16_get_buffer_size(&p, &d.in, &d.filter, &d.out), c->index);
    r->status =
        arm_convolve_wrapper_s16(&ctx, &p, &q, &d.in, input, &d.filter, filter, &d.bias, &bias, &d.out, r->data);
    free(ctx.buf);
}

static void depthwise_s16(const call_t *c, result_t *r) {
    expect_shape(c, 23, 5);
    layer_dims_t d = layer_dims(c);
    cmsis_nn_dw_conv_params p = dw_params(c);
    cmsis_nn_per_channel_quant_params q = channel_quant(c, d.out.c);
    const int16_t *input = array(c, 0, 2, volume(d.in), false);
    const int8_t *filter = array(c, 1, 1, volume(d.filter), false);
    const int64_t *bias = array(c, 2, 8, d.out.c, true);
    alloc_output(r, 2, volume(d.out), c->index);
    int32_t size = arm_depthwise_conv_wrapper_s16_get_buffer_size(&p, &d.in, &d.filter, &d.out);
    cmsis_nn_context ctx = scratch(size, c->index);
    r->status =
        arm_depthwise_conv_wrapper_s16(&ctx, &p, &q, &d.in, input, &d.filter, filter, &d.bias, bias, &d.out, r->data);
    free(ctx.buf);
}

/* ---------------------------------------------------------------------------------- fully connected */

static cmsis_nn_fc_params fc_params(const call_t *c) {
    cmsis_nn_fc_params p;
    p.input_offset = c->v[12];
    p.filter_offset = c->v[13];
    p.output_offset = c->v[14];
    return p;
}

/* The Helium path reads precomputed kernel sums (with the bias folded in) from the scratch buffer. */
static cmsis_nn_context fc_s8_scratch(const call_t *c, const layer_dims_t *d, const cmsis_nn_fc_params *p) {
    cmsis_nn_context ctx = scratch(arm_fully_connected_s8_get_buffer_size(&d->filter), c->index);
#if defined(ARM_MATH_MVEI)
    if (ctx.buf)
        arm_vector_sum_s8(ctx.buf, d->filter.n, d->out.c, c->a[1].data, p->input_offset, p->filter_offset,
                          c->a[2].count ? c->a[2].data : NULL);
#else
    (void)p;
#endif
    return ctx;
}

static void fc_s8(const call_t *c, result_t *r) {
    expect_shape(c, 19, 3);
    layer_dims_t d = layer_dims(c);
    cmsis_nn_fc_params p = fc_params(c);
    cmsis_nn_per_tensor_quant_params q = {c->v[15], c->v[16]};
    p.activation = activation_at(c, 17);
    const int8_t *input = array(c, 0, 1, volume(d.in), false);
    const int8_t *filter = array(c, 1, 1, (int64_t)d.filter.n * d.filter.c, false);
    const int32_t *bias = array(c, 2, 4, d.out.c, true);
    alloc_output(r, 1, volume(d.out), c->index);
    cmsis_nn_context ctx = fc_s8_scratch(c, &d, &p);
    r->status = arm_fully_connected_s8(&ctx, &p, &q, &d.in, input, &d.filter, filter, &d.bias, bias, &d.out, r->data);
    free(ctx.buf);
}

static void fc_per_channel_s8(const call_t *c, result_t *r, bool wrapper) {
    expect_shape(c, wrapper ? 18 : 17, 5);
    layer_dims_t d = layer_dims(c);
    cmsis_nn_fc_params p = fc_params(c);
    p.activation = activation_at(c, 15);
    const bool per_channel = !wrapper || c->v[17] != 0;
    const int32_t n_quant = per_channel ? d.out.c : 1;
    int32_t *mult = (int32_t *)array(c, 3, 4, n_quant, false);
    int32_t *shift = (int32_t *)array(c, 4, 4, n_quant, false);
    const int8_t *input = array(c, 0, 1, volume(d.in), false);
    const int8_t *filter = array(c, 1, 1, (int64_t)d.filter.n * d.filter.c, false);
    const int32_t *bias = array(c, 2, 4, d.out.c, true);
    alloc_output(r, 1, volume(d.out), c->index);
    cmsis_nn_context ctx = fc_s8_scratch(c, &d, &p);
    if (wrapper) {
        cmsis_nn_quant_params q = {mult, shift, per_channel};
        r->status =
            arm_fully_connected_wrapper_s8(&ctx, &p, &q, &d.in, input, &d.filter, filter, &d.bias, bias, &d.out, r->data);
    } else {
        cmsis_nn_per_channel_quant_params q = {mult, shift};
        r->status = arm_fully_connected_per_channel_s8(&ctx, &p, &q, &d.in, input, &d.filter, filter, &d.bias, bias,
                                                       &d.out, r->data);
    }
    free(ctx.buf);
}

static void fc_s16(const call_t *c, result_t *r) {
    expect_shape(c, 16, 3);
    layer_dims_t d = layer_dims(c);
    cmsis_nn_fc_params p = {0, 0, 0, activation_at(c, 14)}; /* int16 is symmetric: CMSIS-NN wants 0 offsets */
    cmsis_nn_per_tensor_quant_params q = {c->v[12], c->v[13]};
    const int16_t *input = array(c, 0, 2, volume(d.in), false);
    const int8_t *filter = array(c, 1, 1, (int64_t)d.filter.n * d.filter.c, false);
    const int64_t *bias = array(c, 2, 8, d.out.c, true);
    alloc_output(r, 2, volume(d.out), c->index);
    cmsis_nn_context ctx = scratch(arm_fully_connected_s16_get_buffer_size(&d.filter), c->index);
    r->status = arm_fully_connected_s16(&ctx, &p, &q, &d.in, input, &d.filter, filter, &d.bias, bias, &d.out, r->data);
    free(ctx.buf);
}

/* ----------------------------------------------------------------------------------------- pooling */

enum pool_kind { AVG_S8, MAX_S8, AVG_S16, MAX_S16 };

static void pool(const call_t *c, result_t *r, enum pool_kind kind) {
    expect_shape(c, 18, 1);
    layer_dims_t d = layer_dims(c);
    cmsis_nn_pool_params p;
    p.stride = tile_at(c, 12);
    p.padding = tile_at(c, 14);
    p.activation = activation_at(c, 16);
    const int32_t elem = (kind == AVG_S8 || kind == MAX_S8) ? 1 : 2;
    const void *input = array(c, 0, elem, volume(d.in), false);
    alloc_output(r, elem, volume(d.out), c->index);
    int32_t size = 0;
    if (kind == AVG_S8) size = arm_avgpool_s8_get_buffer_size(d.out.w, d.in.c);
    if (kind == AVG_S16) size = arm_avgpool_s16_get_buffer_size(d.out.w, d.in.c);
    cmsis_nn_context ctx = scratch(size, c->index);
    switch (kind) {
    case AVG_S8:
        r->status = arm_avgpool_s8(&ctx, &p, &d.in, input, &d.filter, &d.out, r->data);
        break;
    case MAX_S8:
        r->status = arm_max_pool_s8(&ctx, &p, &d.in, input, &d.filter, &d.out, r->data);
        break;
    case AVG_S16:
        r->status = arm_avgpool_s16(&ctx, &p, &d.in, input, &d.filter, &d.out, r->data);
        break;
    case MAX_S16:
        r->status = arm_max_pool_s16(&ctx, &p, &d.in, input, &d.filter, &d.out, r->data);
        break;
    }
    free(ctx.buf);
}

/* ----------------------------------------------------------------------------------------- softmax */

static void softmax_s8(const call_t *c, result_t *r, bool s16_output) {
    expect_shape(c, 5, 1);
    const int32_t rows = c->v[0], row_size = c->v[1];
    const int8_t *input = array(c, 0, 1, (int64_t)rows * row_size, false);
    alloc_output(r, s16_output ? 2 : 1, (int64_t)rows * row_size, c->index);
    if (s16_output) arm_softmax_s8_s16(input, rows, row_size, c->v[2], c->v[3], c->v[4], r->data);
    else arm_softmax_s8(input, rows, row_size, c->v[2], c->v[3], c->v[4], r->data);
    r->status = ARM_CMSIS_NN_SUCCESS; /* both return void */
}

static void softmax_s16(const call_t *c, result_t *r) {
    expect_shape(c, 4, 3);
    const int32_t rows = c->v[0], row_size = c->v[1];
    const int16_t *input = array(c, 0, 2, (int64_t)rows * row_size, false);
    cmsis_nn_softmax_lut_s16 luts = {array(c, 1, 2, LUT_ENTRIES, false), array(c, 2, 2, LUT_ENTRIES, false)};
    alloc_output(r, 2, (int64_t)rows * row_size, c->index);
    r->status = arm_softmax_s16(input, rows, row_size, c->v[2], c->v[3], &luts, r->data);
}

/* -------------------------------------------------------------------------------------- elementwise */

static void add(const call_t *c, result_t *r, bool s16) {
    expect_shape(c, 13, 2);
    const int32_t *v = c->v;
    const int32_t n = v[0], elem = s16 ? 2 : 1;
    const void *in_1 = array(c, 0, elem, n, false);
    const void *in_2 = array(c, 1, elem, n, false);
    alloc_output(r, elem, n, c->index);
    if (s16)
        r->status = arm_elementwise_add_s16(in_1, in_2, v[1], v[2], v[3], v[4], v[5], v[6], v[7], r->data, v[8], v[9],
                                            v[10], v[11], v[12], n);
    else
        r->status = arm_elementwise_add_s8(in_1, in_2, v[1], v[2], v[3], v[4], v[5], v[6], v[7], r->data, v[8], v[9],
                                           v[10], v[11], v[12], n);
}

static void mul(const call_t *c, result_t *r, bool s16) {
    expect_shape(c, 8, 2);
    const int32_t *v = c->v;
    const int32_t n = v[0], elem = s16 ? 2 : 1;
    const void *in_1 = array(c, 0, elem, n, false);
    const void *in_2 = array(c, 1, elem, n, false);
    alloc_output(r, elem, n, c->index);
    if (s16) r->status = arm_elementwise_mul_s16(in_1, in_2, v[1], v[2], r->data, v[3], v[4], v[5], v[6], v[7], n);
    else r->status = arm_elementwise_mul_s8(in_1, in_2, v[1], v[2], r->data, v[3], v[4], v[5], v[6], v[7], n);
}

/* -------------------------------------------------------------------------------------------- main */

static void make_call(const call_t *c, result_t *r) {
    switch (c->kernel) {
    case 1: conv_s8(c, r); break;
    case 2: depthwise_s8(c, r); break;
    case 3: fc_s8(c, r); break;
    case 4: fc_per_channel_s8(c, r, false); break;
    case 5: fc_per_channel_s8(c, r, true); break;
    case 6: pool(c, r, AVG_S8); break;
    case 7: pool(c, r, MAX_S8); break;
    case 8: softmax_s8(c, r, false); break;
    case 9: softmax_s8(c, r, true); break;
    case 10: softmax_s16(c, r); break;
    case 11: add(c, r, false); break;
    case 12: add(c, r, true); break;
    case 13: mul(c, r, false); break;
    case 14: mul(c, r, true); break;
    case 15: conv_s16(c, r); break;
    case 16: depthwise_s16(c, r); break;
    case 17: fc_s16(c, r); break;
    case 18: pool(c, r, AVG_S16); break;
    case 19: pool(c, r, MAX_S16); break;
    default: die("unknown kernel", c->index);
    }
}

int main(void) {
    char magic[4];
    read_exact(magic, 4);
    if (memcmp(magic, "FXKC", 4) != 0 || read_i32() != 1) die("stdin is not a version-1 FXKC stream", -1);
    const int32_t n_calls = read_i32();
    if (n_calls < 0) die("negative call count", -1);

    static char out_buffer[1 << 16];
    setvbuf(stdout, out_buffer, _IOFBF, sizeof out_buffer);
    fwrite("FXKR", 1, 4, stdout);
    write_i32(1);
    write_i32(n_calls);
    for (int i = 0; i < n_calls; i++) {
        call_t call;
        result_t result = {ARM_CMSIS_NN_SUCCESS, 1, 0, NULL};
        read_call(&call, i);
        make_call(&call, &result);
        write_result(&result);
        free(result.data);
        for (int k = 0; k < call.n_arrays; k++) free(call.a[k].data);
    }
    if (fflush(stdout) != 0) die("cannot write the results", -1);
    return 0;
}

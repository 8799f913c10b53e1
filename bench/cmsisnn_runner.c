/*
 * cmsisnn_runner: run an int8 network through compiled CMSIS-NN, for bit-exactness checks and timing.
 *
 *   cmsisnn_runner NETWORK INPUTS OUTPUTS [--repeat R] [--all-layers]
 *
 * Reads a network description and a batch of N inputs written by quantcore.verify.host_cmsis_nn, runs
 * the batch through the network R times (one sample per call, as firmware does), writes the outputs of
 * the last pass (only the final layer's, or every layer's with --all-layers) and prints one line
 *   layers=L batch=N repeat=R elapsed_ns=T
 * where T covers the inference loop only (clock_gettime, CLOCK_MONOTONIC): no file I/O, no allocation.
 * Exit status: 0 success, 2 bad usage or file, 3 a CMSIS-NN call did not return ARM_CMSIS_NN_SUCCESS.
 *
 * File formats: little-endian; every field is an int32 unless noted; arrays are padded to 4 bytes.
 *   NETWORK  "FXNN" version(=1) layer_count in_h in_w in_c, then per layer:
 *            kind in_h in_w in_c out_h out_w out_c scalar_count scalars[scalar_count]
 *            array_count, then per array: elem_size(1|4) count data[count*elem_size] padding
 *   INPUTS   "FXIN" version(=1) batch sample_bytes data[batch*sample_bytes]
 *   OUTPUTS  "FXOU" version(=1) batch layer_count, then per layer written:
 *            layer_index sample_bytes data[batch*sample_bytes] padding
 * Kinds, their scalars and arrays (an array of count 0 is absent, e.g. no bias):
 *   1 conv (arm_convolve_wrapper_s8), 2 depthwise (arm_depthwise_conv_wrapper_s8):
 *       input_offset output_offset stride_h stride_w pad_h pad_w dilation_h dilation_w act_min act_max
 *       filter_n filter_h filter_w filter_c;  arrays: weights int8, bias int32, multiplier int32, shift int32
 *   3 average pool (arm_avgpool_s8), 4 max pool (arm_max_pool_s8):
 *       kernel_h kernel_w stride_h stride_w pad_h pad_w act_min act_max;  no arrays
 *   5 fully connected (arm_fully_connected_s8):
 *       input_offset output_offset multiplier shift act_min act_max;  arrays: weights int8 [out][in], bias
 *   6 softmax (arm_softmax_s8): mult shift diff_min;  no arrays (rows = out_h*out_w, row size = out_c)
 */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "arm_nnfunctions.h"

enum { KIND_CONV = 1, KIND_DEPTHWISE, KIND_AVGPOOL, KIND_MAXPOOL, KIND_FC, KIND_SOFTMAX };
enum { MAX_SCALARS = 16, MAX_ARRAYS = 4 };

typedef struct {
    int32_t elem_size, count;
    void *data;
} array_t;

typedef struct {
    int32_t kind;
    cmsis_nn_dims in, out;
    int32_t n_scalars, s[MAX_SCALARS];
    int32_t n_arrays;
    array_t a[MAX_ARRAYS];
    cmsis_nn_context ctx;    /* this layer's scratch buffer, sized by the kernel's *_get_buffer_size */
    int32_t in_size, out_size; /* bytes per sample */
    int32_t out_stride;        /* bytes per sample in memory, rounded up to 4 for word alignment */
} layer_t;

static void die(int status, const char *what, const char *detail) {
    fprintf(stderr, "cmsisnn_runner: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    exit(status);
}

static int32_t align4(int32_t n) { return (n + 3) & ~3; }

/* ------------------------------------------------------------------------------------------ reading */

typedef struct {
    FILE *f;
    const char *name;
} reader_t;

static void read_bytes(reader_t *r, void *dst, size_t n) {
    if (n && fread(dst, 1, n, r->f) != n) die(2, "truncated file", r->name);
}

static int32_t read_i32(reader_t *r) {
    uint8_t b[4];
    read_bytes(r, b, 4);
    return (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24);
}

static void expect_magic(reader_t *r, const char *magic) {
    char got[4];
    read_bytes(r, got, 4);
    if (memcmp(got, magic, 4) != 0 || read_i32(r) != 1) die(2, "not a version-1 file of this kind", r->name);
}

static void *xcalloc(size_t n) {
    void *p = calloc(n ? n : 1, 1);
    if (!p) die(2, "out of memory", NULL);
    return p;
}

static void read_array(reader_t *r, array_t *a) {
    a->elem_size = read_i32(r);
    a->count = read_i32(r);
    if ((a->elem_size != 1 && a->elem_size != 4) || a->count < 0) die(2, "bad array header", r->name);
    size_t bytes = (size_t)a->elem_size * (size_t)a->count;
    a->data = a->count ? xcalloc(bytes) : NULL;
    read_bytes(r, a->data, bytes);
    uint8_t pad[4];
    read_bytes(r, pad, (size_t)(align4((int32_t)bytes) - (int32_t)bytes));
}

static cmsis_nn_dims read_hwc(reader_t *r) {
    cmsis_nn_dims d = {1, 0, 0, 0};
    d.h = read_i32(r);
    d.w = read_i32(r);
    d.c = read_i32(r);
    return d;
}

static void read_layer(reader_t *r, layer_t *l) {
    l->kind = read_i32(r);
    l->in = read_hwc(r);
    l->out = read_hwc(r);
    l->n_scalars = read_i32(r);
    if (l->n_scalars < 0 || l->n_scalars > MAX_SCALARS) die(2, "too many scalars in a layer", r->name);
    for (int i = 0; i < l->n_scalars; i++) l->s[i] = read_i32(r);
    l->n_arrays = read_i32(r);
    if (l->n_arrays < 0 || l->n_arrays > MAX_ARRAYS) die(2, "too many arrays in a layer", r->name);
    for (int i = 0; i < l->n_arrays; i++) read_array(r, &l->a[i]);
    l->in_size = l->in.h * l->in.w * l->in.c;
    l->out_size = l->out.h * l->out.w * l->out.c;
    l->out_stride = align4(l->out_size);
}

/* ------------------------------------------------------------------------ per-kind parameter views */

static const int expected_scalars[] = {0, 14, 14, 8, 8, 6, 3};
static const int expected_arrays[] = {0, 4, 4, 0, 0, 2, 0};

static cmsis_nn_tile tile(int32_t h, int32_t w) {
    cmsis_nn_tile t = {w, h};
    return t;
}

static cmsis_nn_dims dims(int32_t n, int32_t h, int32_t w, int32_t c) {
    cmsis_nn_dims d = {n, h, w, c};
    return d;
}

static cmsis_nn_conv_params conv_params(const layer_t *l) {
    cmsis_nn_conv_params p;
    p.input_offset = l->s[0];
    p.output_offset = l->s[1];
    p.stride = tile(l->s[2], l->s[3]);
    p.padding = tile(l->s[4], l->s[5]);
    p.dilation = tile(l->s[6], l->s[7]);
    p.activation.min = l->s[8];
    p.activation.max = l->s[9];
    return p;
}

static cmsis_nn_dw_conv_params dw_params(const layer_t *l) {
    cmsis_nn_dw_conv_params p;
    p.input_offset = l->s[0];
    p.output_offset = l->s[1];
    p.ch_mult = l->out.c / l->in.c;
    p.stride = tile(l->s[2], l->s[3]);
    p.padding = tile(l->s[4], l->s[5]);
    p.dilation = tile(l->s[6], l->s[7]);
    p.activation.min = l->s[8];
    p.activation.max = l->s[9];
    return p;
}

static cmsis_nn_dims filter_dims(const layer_t *l) {
    if (l->kind == KIND_FC) return dims(l->in_size, 1, 1, l->out.c);
    if (l->kind == KIND_AVGPOOL || l->kind == KIND_MAXPOOL) return dims(1, l->s[0], l->s[1], 1);
    return dims(l->s[10], l->s[11], l->s[12], l->s[13]);
}

static cmsis_nn_pool_params pool_params(const layer_t *l) {
    cmsis_nn_pool_params p;
    p.stride = tile(l->s[2], l->s[3]);
    p.padding = tile(l->s[4], l->s[5]);
    p.activation.min = l->s[6];
    p.activation.max = l->s[7];
    return p;
}

static cmsis_nn_fc_params fc_params(const layer_t *l) {
    cmsis_nn_fc_params p;
    p.input_offset = l->s[0];
    p.filter_offset = 0; /* CMSIS-NN's int8 fully connected takes symmetric (zero-point 0) weights */
    p.output_offset = l->s[1];
    p.activation.min = l->s[4];
    p.activation.max = l->s[5];
    return p;
}

static cmsis_nn_dims fc_in_dims(const layer_t *l) { return dims(1, 1, 1, l->in_size); }
static cmsis_nn_dims fc_out_dims(const layer_t *l) { return dims(1, 1, 1, l->out.c); }

static void check_array(const layer_t *l, int i, int32_t elem_size, int32_t count, int optional) {
    const array_t *a = &l->a[i];
    if (optional && a->count == 0) return;
    if (a->elem_size != elem_size || a->count != count) {
        fprintf(stderr, "cmsisnn_runner: layer kind %d: array %d has %d x %d bytes, expected %d x %d\n", l->kind, i,
                a->count, a->elem_size, count, elem_size);
        exit(2);
    }
}

/* Checks a layer against what its kernel needs and sizes its scratch buffer. */
static void prepare_layer(layer_t *l, int index) {
    if (l->kind < KIND_CONV || l->kind > KIND_SOFTMAX) die(2, "unknown layer kind", NULL);
    if (l->n_scalars != expected_scalars[l->kind] || l->n_arrays != expected_arrays[l->kind]) {
        fprintf(stderr, "cmsisnn_runner: layer %d: kind %d needs %d scalars and %d arrays\n", index, l->kind,
                expected_scalars[l->kind], expected_arrays[l->kind]);
        exit(2);
    }
    cmsis_nn_dims f = filter_dims(l);
    int32_t size = 0;
    switch (l->kind) {
    case KIND_CONV: {
        cmsis_nn_conv_params p = conv_params(l);
        size = arm_convolve_wrapper_s8_get_buffer_size(&p, &l->in, &f, &l->out);
        break;
    }
    case KIND_DEPTHWISE: {
        cmsis_nn_dw_conv_params p = dw_params(l);
        size = arm_depthwise_conv_wrapper_s8_get_buffer_size(&p, &l->in, &f, &l->out);
        break;
    }
    case KIND_AVGPOOL:
        size = arm_avgpool_s8_get_buffer_size(l->out.w, l->in.c);
        break;
    case KIND_FC:
        check_array(l, 0, 1, l->in_size * l->out.c, 0);
        check_array(l, 1, 4, l->out.c, 1);
        size = arm_fully_connected_s8_get_buffer_size(&f);
        break;
    default:
        break;
    }
    if (l->kind == KIND_CONV || l->kind == KIND_DEPTHWISE) {
        check_array(l, 0, 1, f.n * f.h * f.w * f.c, 0);
        check_array(l, 1, 4, l->out.c, 1);
        check_array(l, 2, 4, l->out.c, 0);
        check_array(l, 3, 4, l->out.c, 0);
    }
    /* CMSIS-NN asks the caller to clear scratch buffers; calloc does. */
    l->ctx.size = size;
    l->ctx.buf = size > 0 ? xcalloc((size_t)size) : NULL;
#if defined(ARM_MATH_MVEI)
    /* The Helium fully connected path reads precomputed kernel sums (with the bias) from its buffer. */
    if (l->kind == KIND_FC)
        arm_vector_sum_s8(l->ctx.buf, f.n, f.c, l->a[0].data, l->s[0], 0, l->a[1].data);
#endif
}

/* ---------------------------------------------------------------------------------------- running */

static arm_cmsis_nn_status run_layer(const layer_t *l, const int8_t *in, int8_t *out) {
    cmsis_nn_dims f = filter_dims(l);
    cmsis_nn_dims bias = dims(1, 1, 1, l->out.c);
    switch (l->kind) {
    case KIND_CONV: {
        cmsis_nn_conv_params p = conv_params(l);
        cmsis_nn_per_channel_quant_params q = {l->a[2].data, l->a[3].data};
        return arm_convolve_wrapper_s8(&l->ctx, &p, &q, &l->in, in, &f, l->a[0].data, &bias, l->a[1].data, &l->out,
                                       out);
    }
    case KIND_DEPTHWISE: {
        cmsis_nn_dw_conv_params p = dw_params(l);
        cmsis_nn_per_channel_quant_params q = {l->a[2].data, l->a[3].data};
        return arm_depthwise_conv_wrapper_s8(&l->ctx, &p, &q, &l->in, in, &f, l->a[0].data, &bias, l->a[1].data,
                                             &l->out, out);
    }
    case KIND_AVGPOOL: {
        cmsis_nn_pool_params p = pool_params(l);
        return arm_avgpool_s8(&l->ctx, &p, &l->in, in, &f, &l->out, out);
    }
    case KIND_MAXPOOL: {
        cmsis_nn_pool_params p = pool_params(l);
        return arm_max_pool_s8(&l->ctx, &p, &l->in, in, &f, &l->out, out);
    }
    case KIND_FC: {
        cmsis_nn_fc_params p = fc_params(l);
        cmsis_nn_per_tensor_quant_params q = {l->s[2], l->s[3]};
        cmsis_nn_dims in_dims = fc_in_dims(l), out_dims = fc_out_dims(l);
        return arm_fully_connected_s8(&l->ctx, &p, &q, &in_dims, in, &f, l->a[0].data, &bias, l->a[1].data,
                                      &out_dims, out);
    }
    case KIND_SOFTMAX:
        arm_softmax_s8(in, l->out.h * l->out.w, l->out.c, l->s[0], l->s[1], l->s[2], out);
        return ARM_CMSIS_NN_SUCCESS;
    default:
        return ARM_CMSIS_NN_ARG_ERROR;
    }
}

/* Where each layer writes sample n: its own batch-sized array with --all-layers, else two ping-pong
 * scratch buffers for the intermediate layers and the batch-sized result array for the last. */
typedef struct {
    int all_layers;
    int8_t **layer_out; /* [layer] batch arrays, or NULL for ping-pong layers */
    int8_t *ping[2];
} outputs_t;

static int8_t *output_of(const outputs_t *o, const layer_t *layers, int i, int n) {
    if (o->layer_out[i]) return o->layer_out[i] + (size_t)n * (size_t)layers[i].out_stride;
    return o->ping[i % 2];
}

static void run_batch(const layer_t *layers, int n_layers, const int8_t *inputs, int32_t in_stride, int batch,
                      const outputs_t *o) {
    for (int n = 0; n < batch; n++) {
        const int8_t *x = inputs + (size_t)n * (size_t)in_stride;
        for (int i = 0; i < n_layers; i++) {
            int8_t *y = output_of(o, layers, i, n);
            arm_cmsis_nn_status status = run_layer(&layers[i], x, y);
            if (status != ARM_CMSIS_NN_SUCCESS) {
                fprintf(stderr, "cmsisnn_runner: layer %d (kind %d) returned status %d on sample %d\n", i,
                        layers[i].kind, (int)status, n);
                exit(3);
            }
            x = y;
        }
    }
}

/* -------------------------------------------------------------------------------------------- main */

static FILE *open_or_die(const char *path, const char *mode) {
    FILE *f = fopen(path, mode);
    if (!f) die(2, "cannot open", path);
    return f;
}

static void write_i32(FILE *f, int32_t v) {
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    fwrite(b, 1, 4, f);
}

static void write_outputs(const char *path, const layer_t *layers, int n_layers, int batch, const outputs_t *o) {
    FILE *f = open_or_die(path, "wb");
    fwrite("FXOU", 1, 4, f);
    write_i32(f, 1);
    write_i32(f, batch);
    write_i32(f, o->all_layers ? n_layers : 1);
    static const uint8_t pad[4] = {0};
    for (int i = o->all_layers ? 0 : n_layers - 1; i < n_layers; i++) {
        write_i32(f, i);
        write_i32(f, layers[i].out_size);
        for (int n = 0; n < batch; n++) fwrite(output_of(o, layers, i, n), 1, (size_t)layers[i].out_size, f);
        size_t bytes = (size_t)batch * (size_t)layers[i].out_size;
        fwrite(pad, 1, (size_t)align4((int32_t)bytes) - bytes, f);
    }
    if (fclose(f) != 0) die(2, "cannot write", path);
}

static layer_t *read_network(const char *path, int *n_layers, cmsis_nn_dims *input) {
    reader_t r = {open_or_die(path, "rb"), path};
    expect_magic(&r, "FXNN");
    *n_layers = read_i32(&r);
    if (*n_layers < 1) die(2, "network has no layers", path);
    *input = read_hwc(&r);
    layer_t *layers = xcalloc(sizeof(layer_t) * (size_t)*n_layers);
    for (int i = 0; i < *n_layers; i++) {
        read_layer(&r, &layers[i]);
        prepare_layer(&layers[i], i);
        int32_t feeds = i ? layers[i - 1].out_size : input->h * input->w * input->c;
        if (layers[i].in_size != feeds) die(2, "a layer's input size differs from what feeds it", path);
    }
    fclose(r.f);
    return layers;
}

/* Inputs are copied to a word-aligned stride per sample, as firmware would place them. */
static int8_t *read_inputs(const char *path, int32_t sample_bytes, int *batch, int32_t *stride) {
    reader_t r = {open_or_die(path, "rb"), path};
    expect_magic(&r, "FXIN");
    *batch = read_i32(&r);
    if (read_i32(&r) != sample_bytes || *batch < 1) die(2, "inputs do not match the network's input size", path);
    *stride = align4(sample_bytes);
    int8_t *data = xcalloc((size_t)*batch * (size_t)*stride);
    for (int n = 0; n < *batch; n++) read_bytes(&r, data + (size_t)n * (size_t)*stride, (size_t)sample_bytes);
    fclose(r.f);
    return data;
}

int main(int argc, char **argv) {
    int repeat = 1, all_layers = 0;
    const char *paths[3];
    int n_paths = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--all-layers")) all_layers = 1;
        else if (!strcmp(argv[i], "--repeat") && i + 1 < argc) repeat = atoi(argv[++i]);
        else if (n_paths < 3) paths[n_paths++] = argv[i];
        else n_paths = 4;
    }
    if (n_paths != 3 || repeat < 1) die(2, "usage: cmsisnn_runner NETWORK INPUTS OUTPUTS [--repeat R] [--all-layers]", NULL);

    int n_layers, batch;
    int32_t in_stride;
    cmsis_nn_dims input;
    layer_t *layers = read_network(paths[0], &n_layers, &input);
    int8_t *inputs = read_inputs(paths[1], input.h * input.w * input.c, &batch, &in_stride);

    outputs_t o = {all_layers, xcalloc(sizeof(int8_t *) * (size_t)n_layers), {NULL, NULL}};
    int32_t largest = 0;
    for (int i = 0; i < n_layers; i++) {
        if (all_layers || i == n_layers - 1) o.layer_out[i] = xcalloc((size_t)batch * (size_t)layers[i].out_stride);
        if (layers[i].out_stride > largest) largest = layers[i].out_stride;
    }
    o.ping[0] = xcalloc((size_t)largest);
    o.ping[1] = xcalloc((size_t)largest);

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int r = 0; r < repeat; r++) run_batch(layers, n_layers, inputs, in_stride, batch, &o);
    clock_gettime(CLOCK_MONOTONIC, &t1);

    write_outputs(paths[2], layers, n_layers, batch, &o);
    long long ns = (long long)(t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec);
    printf("layers=%d batch=%d repeat=%d elapsed_ns=%lld\n", n_layers, batch, repeat, ns);
    return 0;
}
